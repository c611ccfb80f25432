"""What PSE itself puts on the wire for a setting: is a decoding constraint sent, are native tools offered?

Asked of the running code, not of a feature list: `pse_sends` runs the first turn of a task against a
loopback stand-in of an OpenAI-compatible server (one that, like llama.cpp's, applies a `grammar`
field) and reads the request it received. So the doctor,
the real-model tests and the bench know whether `PSE_CONSTRAIN` / `PSE_PROTOCOL=native` do anything in
this build, whichever way the constrained-decoding and native-protocol work implements them.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pse.config import Settings, with_overrides
from pse.models import SERVER_PROBES
from pse.roles import ROLES
from pse.runner import prepare_run, run_to_end

__all__ = ["CONSTRAINT_FIELDS", "WireFeatures", "pse_sends"]

CONSTRAINT_FIELDS = (
    "grammar",
    "json_schema",
    "response_format",
    "guided_grammar",
    "guided_json",
    "guided_regex",
)
"""Request fields that constrain decoding on the servers PSE talks to (llama.cpp, vLLM, OpenAI)."""
_PROBE_MODEL = "pse-wire-probe"  # no OpenAI model name: AutoGen would check the reply's model against it
_PROBE_REPLY = '<blocked reason_code="OUT_OF_SCOPE">wire probe: no work is done</blocked>'


@dataclass(frozen=True)
class WireFeatures:
    """What one model request of PSE held.

    Attributes:
        constraint: the field that carried a decoding constraint (`grammar`, `response_format`, ...), or None.
        tools: native function-call tools were offered (`tools` is not empty).
        fields: every top-level field of the request body.
    """

    constraint: str | None
    tools: bool
    fields: tuple[str, ...]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        self.bodies.append(body)
        # Like llama.cpp's server, the stand-in applies a `grammar` field: PSE's constraint probe (a
        # one-character grammar) gets the character it forces, so PSE goes on to send its own grammar.
        forced = re.fullmatch(r'root ::= "(\w)"', str(body.get("grammar", "")))
        message = {"role": "assistant", "content": forced.group(1) if forced else _PROBE_REPLY}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        payload = {
            "id": "probe",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "probe")),
            "choices": [choice],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


async def pse_sends(settings: Settings, task: str = "code-delivery") -> WireFeatures:
    """The first model request PSE makes for `task` under `settings` (protocol, constraint), as sent.

    Every role is pointed at a loopback stand-in (provider openai); the stand-in answers `<blocked>`,
    so the run stops after that one request, in a temporary runs directory.
    """
    bodies: list[dict[str, Any]] = []
    handler = type("ProbeHandler", (_Handler,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with tempfile.TemporaryDirectory(prefix="pse-wire-") as runs:
            per_role: dict[str, object] = {}
            for role in ROLES:
                own = role.lower()
                per_role |= {
                    f"{own}_provider": "openai",
                    f"{own}_base_url": url,
                    f"{own}_model": _PROBE_MODEL,
                }
            probe = with_overrides(
                settings,
                "wire probe",
                provider="openai",
                base_url=url,
                model=_PROBE_MODEL,
                runs_dir=Path(runs),
                model_max_retries=0,
                record=None,
                **per_role,
            )
            try:
                await run_to_end(prepare_run(task, probe))
            finally:
                SERVER_PROBES.forget(url)  # a stand-in on a passing port: no run should think it learned it
    finally:
        server.shutdown()
        server.server_close()
    # The role's turn is the request with its system message (a client may probe the server first).
    turns = [b for b in bodies if any(m.get("role") == "system" for m in b.get("messages", []))]
    first = turns[0] if turns else {}
    constraint = next((f for f in CONSTRAINT_FIELDS if first.get(f)), None)
    return WireFeatures(constraint, bool(first.get("tools")), tuple(sorted(first)))
