"""A threaded HTTP server on 127.0.0.1 that imitates the OpenAI and Ollama chat APIs."""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from gbnf_recognizer import Grammar
from pse.models import PROBE_PROMPT

Api = Literal["openai", "ollama"]
GrammarField = Literal["grammar", "guided_grammar", "structured_outputs", "ebnf"]
_ONE_LITERAL = re.compile(r'root ::= "(.)"')
_HANG_LIMIT_S = 30.0  # a hanging reply gives up by itself so a broken test cannot wedge the run


@dataclass
class Reply:
    """One scripted reply. Defaults give a plain successful answer.

    Attributes:
        status: HTTP status; anything but 200 sends an error body of the API's shape.
        content: the assistant's text.
        usage: (prompt_tokens, completion_tokens) reported, or None to report none.
        reasoning: a DeepSeek-style `reasoning_content` (OpenAI flavour) or `thinking` (Ollama).
        finish_reason: OpenAI finish reason / Ollama done_reason.
        hang: never answer (until the stand-in closes or 30 s pass).
        error: the error message of a non-200 reply.
        delay_s: think this long before answering (a slow model); a client that hung up meanwhile gets
            no answer, and its usage is not counted as delivered.
        tool_calls: native function calls (name, arguments as JSON text); `content` is their text then.
        cached: prompt tokens served from the provider's cache (OpenAI flavour), in the usage shape of
            `cached_shape`: "openai" (`prompt_tokens_details.cached_tokens`) or "deepseek"
            (`prompt_cache_hit_tokens`).
        headers: more response headers (a 429's `Retry-After`, say).
    """

    status: int = 200
    content: str = "ok"
    usage: tuple[int, int] | None = (11, 7)
    reasoning: str | None = None
    finish_reason: str = "stop"
    hang: bool = False
    error: str = "scripted failure"
    delay_s: float = 0.0
    tool_calls: list[tuple[str, str]] | None = None
    cached: int | None = None
    cached_shape: Literal["openai", "deepseek"] = "openai"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    """What the stand-in received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    """When it was received (`time.monotonic`, the clock of asyncio's loop)."""


@dataclass
class ChatStandIn:
    """A loopback chat API. Use as a context manager; `url` is what a client is pointed at.

    `applies` makes it a server that constrains decoding by that grammar field (`grammar` like
    llama.cpp, `guided_grammar` or `structured_outputs` like vLLM, `ebnf` like SGLang). PSE's
    constrained-decoding probe (`pse.models.probe_server`) is answered out of script and recorded in
    `probes`, not `requests`: with the forced digit of the applied field, else "OK" (a server that
    ignores the fields), or with `probe_status` when that is not 200 (a server that refuses unknown
    fields, like OpenAI's). A scripted reply to a request whose applied grammar rejects it is recorded
    in `violations`: a real server could never have sent it.
    """

    api: Api
    applies: GrammarField | None = None
    probe_status: int = 200
    probe_delay_s: float = 0.0
    """The probe's answer waits this long too (a slow server is slow for every call)."""
    probes_delivered: list[tuple[int, int]] = field(default_factory=list)
    """The usage of every probe answer written to a client that was still there to read it."""
    requests: list[RecordedRequest] = field(default_factory=list)
    delivered: list[tuple[int, int]] = field(default_factory=list)
    """The usage of every successful reply written to a client that was still there to read it."""
    probes: list[RecordedRequest] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    in_flight: int = 0
    """Requests received and not yet being answered (a scripted delay or hang counts as in flight)."""
    max_in_flight: int = 0
    _flight_lock: threading.Lock = field(default_factory=threading.Lock)
    _script: deque[Reply] = field(default_factory=deque)
    _closing: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def script(self, *replies: Reply) -> ChatStandIn:
        """Queue replies, played one per request in order."""
        self._script.extend(replies)
        return self

    @property
    def url(self) -> str:
        """Base URL: `http://127.0.0.1:PORT/v1` for OpenAI, `http://127.0.0.1:PORT` for Ollama."""
        assert self._server is not None, "start the stand-in first"
        root = f"http://127.0.0.1:{self._server.server_address[1]}"
        return root + "/v1" if self.api == "openai" else root

    def __enter__(self) -> ChatStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = RecordedRequest(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                if stand_in._is_probe(body):
                    stand_in.probes.append(request)
                    answer = Reply(stand_in.probe_status, stand_in._probe_answer(body), (3, 1))
                    if stand_in.probe_delay_s:
                        stand_in._closing.wait(stand_in.probe_delay_s)
                        if _hung_up(self):
                            return
                    stand_in._answer(self, body, answer)
                    if answer.status == 200 and answer.usage is not None:
                        stand_in.probes_delivered.append(answer.usage)
                    return
                stand_in.requests.append(request)
                reply = stand_in._script.popleft() if stand_in._script else Reply()
                stand_in._check(body, reply)
                with stand_in._flight():  # over before the answer is written: the client cannot be faster
                    if reply.hang:
                        stand_in._closing.wait(_HANG_LIMIT_S)
                        return
                    if reply.delay_s:
                        stand_in._closing.wait(reply.delay_s)
                        if _hung_up(self):
                            return
                stand_in._answer(self, body, reply)
                if reply.status == 200 and reply.usage is not None:
                    stand_in.delivered.append(reply.usage)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @contextlib.contextmanager
    def _flight(self) -> Iterator[None]:
        with self._flight_lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._flight_lock:
                self.in_flight -= 1

    # --- constrained decoding ------------------------------------------------------------
    def _grammar(self, body: dict[str, Any]) -> str | None:
        if self.applies is None:
            return None
        value = body.get(self.applies)
        if self.applies == "structured_outputs":
            value = value.get("grammar") if isinstance(value, dict) else None
        return value if isinstance(value, str) else None

    @staticmethod
    def _is_probe(body: dict[str, Any]) -> bool:
        messages = body.get("messages") or [{}]
        return body.get("max_tokens") == 1 and messages[-1].get("content") == PROBE_PROMPT

    def _probe_answer(self, body: dict[str, Any]) -> str:
        forced = _ONE_LITERAL.fullmatch(self._grammar(body) or "")
        return forced.group(1) if forced else "OK"

    def _check(self, body: dict[str, Any], reply: Reply) -> None:
        grammar = self._grammar(body)
        if grammar is not None and reply.status == 200 and not Grammar(grammar).accepts(reply.content):
            self.violations.append(reply.content)

    # --- replies -----------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], reply: Reply) -> None:
        if reply.status != 200:
            error = {"error": {"message": reply.error, "type": "scripted", "code": reply.status}}
            payload = error if self.api == "openai" else {"error": reply.error}
            self._send_json(handler, reply.status, payload, reply.headers)
            return
        model = str(body.get("model", "unknown"))
        if body.get("stream"):
            self._send_stream(handler, model, reply)
        elif self.api == "openai":
            self._send_json(handler, 200, _openai_completion(model, reply))
        else:
            self._send_json(handler, 200, _ollama_chat(model, reply, done=True, content=reply.content))

    @staticmethod
    def _send_json(
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _send_stream(self, handler: BaseHTTPRequestHandler, model: str, reply: Reply) -> None:
        handler.send_response(200)
        handler.send_header(
            "Content-Type", "text/event-stream" if self.api == "openai" else "application/x-ndjson"
        )
        handler.send_header("Connection", "close")
        handler.end_headers()
        words = reply.content.split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        if self.api == "openai":
            for piece in pieces:
                chunk = _openai_chunk(model, {"content": piece}, None)
                handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.write(
                f"data: {json.dumps(_openai_chunk(model, {}, reply.finish_reason))}\n\n".encode()
            )
            if reply.usage is not None:
                final = _openai_chunk(model, {}, None) | {"choices": [], "usage": _openai_usage(reply.usage)}
                handler.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
            handler.wfile.write(b"data: [DONE]\n\n")
        else:
            for piece in pieces:
                handler.wfile.write(
                    (json.dumps(_ollama_chat(model, reply, done=False, content=piece)) + "\n").encode()
                )
            handler.wfile.write(
                (json.dumps(_ollama_chat(model, reply, done=True, content="")) + "\n").encode()
            )
        handler.wfile.flush()
        handler.close_connection = True


def _hung_up(handler: BaseHTTPRequestHandler) -> bool:
    """Whether the client closed its connection while the reply was being prepared."""
    sock = handler.connection
    ready, _, _ = select.select([sock], [], [], 0)
    if not ready:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _openai_usage(usage: tuple[int, int]) -> dict[str, int]:
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}


def _openai_completion(model: str, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    finish_reason = reply.finish_reason
    if reply.tool_calls is not None:
        message["content"] = reply.content or None
        message["tool_calls"] = [
            {
                "id": f"call_standin_{n}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for n, (name, arguments) in enumerate(reply.tool_calls)
        ]
        finish_reason = "tool_calls"
    payload: dict[str, Any] = {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
    }
    if reply.usage is not None:
        payload["usage"] = _openai_usage(reply.usage)
        if reply.cached is not None and reply.cached_shape == "openai":
            payload["usage"]["prompt_tokens_details"] = {"cached_tokens": reply.cached}
        elif reply.cached is not None:
            payload["usage"] |= {"prompt_cache_hit_tokens": reply.cached, "prompt_cache_miss_tokens": 0}
    return payload


def _openai_chunk(model: str, delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }


def _ollama_chat(model: str, reply: Reply, *, done: bool, content: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.reasoning is not None and done:
        message["thinking"] = reply.reasoning
    if reply.tool_calls is not None and done:
        message["tool_calls"] = [
            {"function": {"name": name, "arguments": json.loads(arguments)}}
            for name, arguments in reply.tool_calls
        ]
    payload: dict[str, Any] = {
        "model": model,
        "created_at": "2025-01-01T00:00:00Z",
        "message": message,
        "done": done,
    }
    if done:
        payload["done_reason"] = reply.finish_reason
        if reply.usage is not None:
            payload["prompt_eval_count"], payload["eval_count"] = reply.usage
    return payload
