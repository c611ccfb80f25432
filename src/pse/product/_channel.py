"""One side of the channel between a check and its product: requests and answers, nested both ways.

A request is `{"q": n, "op": NAME, "args": [nodes], ...}`; its answer `{"a": n, "value": node}` or
`{"a": n, "raised": node}`, with the write-back of the request's containers (`"wb"`) and, from the
product, what it printed meanwhile (`"out"`, `"err"`). While a side waits for its answer it serves the
other side's requests (a product calling a test's callback, which calls the product again): the calls
nest, so an answer always belongs to the innermost request still open; anything else is a protocol
error, and a channel that saw one is broken for good. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pse.product._values import (
    Exchange,
    Policy,
    decode,
    decode_write_back,
    encode,
    encode_write_back,
)
from pse.product._wire import ChannelClosed, ChannelTimeout, read_frame, write_frame

__all__ = ["MAX_FRAME_BYTES", "Broken", "Connection", "Handler", "Raised"]

MAX_FRAME_BYTES = 64 << 20
"""Largest frame either side reads."""

Handler = Callable[[str, list[Any], dict[str, Any]], object]
"""Serves one request: (op, decoded args, the request's other fields) → its value, or raises."""


class Broken(Exception):
    """The channel cannot be used any more: the other side closed it, timed out or broke the protocol."""


class Raised(Exception):
    """The other side's call raised: `value` is what the answer decoded to (the side's own rebuild)."""

    def __init__(self, value: object) -> None:
        super().__init__("the other side raised")
        self.value = value


class Connection:
    """One side: sends requests and serves the other side's, over two pipe descriptors.

    Args:
        read_fd, write_fd: the channel.
        policy: how this side encodes and decodes what the shared tags do not cover.
        handler: serves the other side's requests.
        wrap: wraps the serving of one request (the product captures what it prints); returns extra
            answer fields.
    """

    def __init__(
        self,
        read_fd: int,
        write_fd: int,
        policy: Policy,
        handler: Handler,
        wrap: Callable[[Callable[[], dict[str, Any]]], dict[str, Any]] | None = None,
    ) -> None:
        self._read_fd, self._write_fd = read_fd, write_fd
        self.policy, self._handler = policy, handler
        self._wrap = wrap or (lambda serve: serve())
        self._seq = 0
        self.broken: str | None = None
        self.on_answer: Callable[[dict[str, Any]], None] = lambda answer: None
        """Called with every answer to this side's requests (the check forwards what the product printed)."""

    def request(self, op: str, args: list[object], deadline: float | None = None, **fields: Any) -> object:
        """Send one request and wait for its answer (serving the other side meanwhile); its value.

        Raises:
            Raised: the other side's call raised (the exception, decoded).
            Broken: the channel is unusable (now or since an earlier failure).
        """
        if self.broken is not None:
            raise Broken(self.broken)
        self._seq += 1
        seq = self._seq
        exchange = Exchange(self.policy)
        body = {"q": seq, "op": op, "args": [encode(a, exchange) for a in args], **fields}
        exchange.seal_request()
        self._send(body, deadline)
        while True:
            message = self._receive(deadline)
            if "q" in message:
                self._serve(message)
                continue
            if message.get("a") != seq:
                raise self._break("an answer out of sequence")
            self.on_answer(message)
            return self._result(message, exchange)

    def hello(self) -> None:
        """Say this side is ready (the product, before it imports anything of the workspace)."""
        self._send({"hello": 1}, None)

    def wait_hello(self, deadline: float) -> None:
        """Wait for the other side's hello.

        Raises:
            Broken: it never came (the other side could not start).
        """
        if self._receive(deadline) != {"hello": 1}:
            raise self._break("the other side did not start with a hello")

    def serve_forever(self) -> None:
        """Serve the other side's requests until it closes the channel."""
        while True:
            try:
                message = self._receive(None)
            except Broken:
                return
            if "q" not in message:
                raise self._break("an answer where a request was due")
            self._serve(message)

    def _serve(self, message: dict[str, Any]) -> None:
        seq, op = message.get("q"), message.get("op")
        if type(seq) is not int or type(op) is not str or type(message.get("args")) is not list:
            raise self._break("a malformed request")
        exchange = Exchange(self.policy)
        answer: dict[str, Any] = {"a": seq}

        def serve() -> dict[str, Any]:
            try:
                args = [decode(a, exchange) for a in message["args"]]
            except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
                raise self._break(f"a malformed request: {exc}") from None
            exchange.seal_request()
            try:
                value = self._handler(op, args, message)
                answer["value"] = encode(value, exchange)
            except Broken:
                raise
            except BaseException as exc:  # the call's own exception, whatever it is, goes back
                answer["raised"] = encode(exc, exchange)
            answer["wb"] = encode_write_back(exchange)
            return {}

        answer.update(self._wrap(serve))
        self._send(answer, None)

    def _result(self, message: dict[str, Any], exchange: Exchange) -> object:
        try:
            apply = decode_write_back(message.get("wb", []), exchange)
            raised = "raised" in message
            value = decode(message["raised"] if raised else message.get("value"), exchange)
        except (ValueError, TypeError, OverflowError, RecursionError, MemoryError, KeyError) as exc:
            raise self._break(f"a malformed answer: {exc}") from None
        apply()
        if raised:
            raise Raised(value)
        return value

    def _send(self, body: dict[str, Any], deadline: float | None) -> None:
        try:
            data = json.dumps(body, separators=(",", ":")).encode()
        except (ValueError, TypeError, RecursionError) as exc:  # a value the encoder let through
            raise self._break(f"an unencodable message: {exc}") from None
        try:
            write_frame(self._write_fd, data, deadline)
        except ChannelTimeout:
            raise self._break("the other side stopped reading") from None
        except (ChannelClosed, OSError):
            raise self._break("the other side closed the channel") from None

    def _receive(self, deadline: float | None) -> dict[str, Any]:
        try:
            body = read_frame(self._read_fd, MAX_FRAME_BYTES, deadline)
        except ChannelTimeout:
            raise self._break("no answer in time") from None
        except (ChannelClosed, OSError):
            raise self._break("the other side closed the channel") from None
        except ValueError as exc:
            raise self._break(str(exc)) from None
        try:
            message = json.loads(body, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise self._break("a frame that is not JSON") from None
        if type(message) is not dict:
            raise self._break("a frame that is not a JSON object")
        return message

    def _break(self, why: str) -> Broken:
        self.broken = self.broken or why
        return Broken(self.broken)


def _no_constant(name: str) -> object:
    raise ValueError(f"JSON constant {name} is not part of the protocol")
