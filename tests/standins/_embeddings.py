"""A loopback stand-in of the embeddings APIs: Ollama's `POST /api/embed` and OpenAI's `POST /v1/embeddings`.

Vectors are deterministic (a bag of hashed words), so similar texts get similar vectors and a test can
check ranking; `fail_with` makes every request answer with an HTTP error of the API's shape.
"""

from __future__ import annotations

import json
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

DIM = 64


def vector(text: str) -> list[float]:
    """The stand-in's embedding of `text`: hashed lower-case words, unnormalised."""
    out = [0.0] * DIM
    for word in text.lower().split():
        out[zlib.crc32(word.strip(".,:;()`'\"").encode()) % DIM] += 1.0
    return out


@dataclass
class EmbeddingsStandIn:
    """Use as a context manager; `url` is the Ollama host or the OpenAI base URL (`.../v1`)."""

    api: Literal["ollama", "openai"]
    fail_with: tuple[int, str] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the stand-in first"
        root = f"http://127.0.0.1:{self._server.server_address[1]}"
        return root + "/v1" if self.api == "openai" else root

    @property
    def texts_embedded(self) -> int:
        """How many texts all requests asked to embed."""
        return sum(
            len(r["body"]["input"]) if isinstance(r["body"]["input"], list) else 1 for r in self.requests
        )

    def __enter__(self) -> EmbeddingsStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                stand_in.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                status, payload = stand_in._reply(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _reply(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        expected = "/api/embed" if self.api == "ollama" else "/v1/embeddings"
        if path != expected:
            return 404, {"error": f"no route {path}"}
        if self.fail_with is not None:
            status, message = self.fail_with
            if self.api == "ollama":
                return status, {"error": message}
            return status, {"error": {"message": message, "type": "invalid_request_error", "code": status}}
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        model = body.get("model", "")
        if self.api == "ollama":
            return 200, {"model": model, "embeddings": [vector(t) for t in texts]}
        data = [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)]
        return 200, {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
