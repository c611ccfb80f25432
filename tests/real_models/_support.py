"""What the real-model tests share: the figures each run measured, collected for the session summary."""

from __future__ import annotations

import json
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from pse.doctor import RunScore, score_run
from pse.trace import Trace

FIGURES: list[dict[str, Any]] = []
"""What each run measured, in order; printed and saved at the end of the session."""


def record(config: str, models: str, trace: Trace) -> RunScore:
    """Score a finished run and keep its figures for the session's summary."""
    score = score_run(trace)
    wall = score.wall_s or 0.0
    speed = round(trace.tokens.completion / wall, 1) if wall > 0 else None
    FIGURES.append({"config": config, "models": models, **score.as_dict(), "completion_tokens_per_s": speed})
    return score


class UsageProxy:
    """A loopback proxy in front of the local server that keeps the usage of every answer it delivered.

    A request whose client hung up before the answer came (PSE cancelling at a deadline) is not
    delivered: its usage is kept apart in `undelivered`. PSE's one-token constraint probes are calls of
    the run like any other (issue 47: the trace counts them among the role's calls); `probes` says how
    many there were.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.delivered: list[tuple[int, int]] = []
        self.undelivered: list[tuple[int, int]] = []
        self.probes = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._relay(httpx.get(proxy.upstream + self.path.removeprefix("/v1"), timeout=300))

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                path = proxy.upstream + self.path.removeprefix("/v1")
                reply = httpx.post(
                    path, content=body, headers={"Content-Type": "application/json"}, timeout=300
                )
                usage = reply.json().get("usage") if reply.status_code == 200 else None
                counts = (usage["prompt_tokens"], usage["completion_tokens"]) if usage else None
                if json.loads(body).get("max_tokens") == 1:  # PSE's constraint probe, counted as a call
                    proxy.probes += 1
                if self._client_gone():
                    if counts:
                        proxy.undelivered.append(counts)
                    return
                if counts:  # noted before the client can read it: the test reads right after the run
                    proxy.delivered.append(counts)
                self._relay(reply)

            def _client_gone(self) -> bool:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""

            def _relay(self, reply: httpx.Response) -> None:
                self.send_response(reply.status_code)
                self.send_header("Content-Type", reply.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> UsageProxy:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
