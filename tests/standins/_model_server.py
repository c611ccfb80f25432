"""A loopback stand-in of a llama.cpp-style OpenAI server, for `pse doctor`'s tests.

It lists its models (`GET /v1/models`, with llama.cpp's `meta.n_ctx_train`), honours a GBNF
`grammar` of the form `root ::= "literal"` when `grammar` is on, answers `tools` with `tool_calls`
when `tools` is on, and otherwise answers each chat request with its model's reply function.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from standins._server import ChatStandIn, RecordedRequest

Answer = Callable[[dict[str, Any]], str]
_LITERAL = re.compile(r'^root ::= "(.*)"$')


@dataclass
class ModelServerStandIn:
    """Use as a context manager; `url` is the base URL (`http://127.0.0.1:PORT/v1`)."""

    models: dict[str, Answer]
    grammar: bool = True
    tools: bool = False
    context: int | None = 8192
    requests: list[RecordedRequest] = field(default_factory=list)
    refuse_grammars_over: int | None = None
    """A grammar longer than this gets HTTP 400, as llama.cpp's server answers a grammar it cannot parse."""
    die_on_grammars_over: int | None = None
    """A grammar longer than this stops the whole server without an answer, as llama-cpp-python's does."""
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the stand-in first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chats(self, model: str) -> list[dict[str, Any]]:
        """The chat request bodies that named `model`."""
        return [
            r.body for r in self.requests if r.path.endswith("/chat/completions") and r.body["model"] == model
        ]

    def __enter__(self) -> ModelServerStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stand_in.requests.append(RecordedRequest("GET", self.path, dict(self.headers), {}))
                if self.path != "/v1/models":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                meta = {"n_ctx_train": stand_in.context} if stand_in.context else {}
                data = [{"id": name, "object": "model", "meta": meta} for name in stand_in.models]
                self._send(200, {"object": "list", "data": data})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                stand_in.requests.append(RecordedRequest("POST", self.path, dict(self.headers), body))
                grammar = str(body.get("grammar") or "")
                if stand_in.die_on_grammars_over is not None and len(grammar) > stand_in.die_on_grammars_over:
                    self.close_connection = True
                    stand_in._die()
                    return
                if stand_in.refuse_grammars_over is not None and len(grammar) > stand_in.refuse_grammars_over:
                    self._send(400, {"error": {"message": "failed to parse grammar"}})
                    return
                answer = stand_in.models.get(str(body.get("model")))
                if answer is None:
                    self._send(404, {"error": {"message": f"model {body.get('model')!r} not found"}})
                    return
                self._send(200, stand_in._completion(body, answer))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                ChatStandIn._send_json(self, status, payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()  # closing an already closed socket (`_die`) is harmless

    def _die(self) -> None:
        """Stop listening at once (later connections are refused), from a handler's thread."""
        server = self._server
        if server is not None:
            threading.Thread(target=server.shutdown, daemon=True).start()
            server.socket.close()

    def _completion(self, body: dict[str, Any], answer: Answer) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": answer(body)}
        literal = _LITERAL.match(str(body.get("grammar", "")))
        if self.grammar and literal:
            message["content"] = literal.group(1)
        if self.tools and body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            call = {"id": "call-1", "type": "function", "function": {"name": name, "arguments": "{}"}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        text = message["content"] or ""
        return {
            "id": "chatcmpl-model-server",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 20, "completion_tokens": len(text.split()) + 1, "total_tokens": 21},
        }
