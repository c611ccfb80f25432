"""Real models: each local model × protocol, full runs of both reference tasks on a loopback llama.cpp server.

Protocols: `dsml` (the XML protocol, unconstrained), `dsml+grammar` (`PSE_CONSTRAIN=grammar`) and
`native` (`PSE_PROTOCOL=native`, where the server returns native tool calls). A protocol that this
PSE does not put on the wire yet (read off a stand-in by `pse_sends`) is skipped with a note, as is
the whole section when the `local` extra is not installed. Per model and protocol: the share of
role turns that parsed on the first try and after a repair (over both runs), and each run's outcome,
cycles, tokens and wall time; per model, the generation speed of one fixed request.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
import time
from functools import reduce
from pathlib import Path
from typing import Any

import httpx

from pse.config import load_settings
from pse.doctor import ParseShare, native_tool_support, pse_sends, score_run
from pse.engine import load_trace
from pse.local import LOCAL_MODELS, SHORT_RUN, LocalModel, LocalServer, local_run_settings
from pse.roles import ROLES
from pse.runner import prepare_run, run_to_end

TASKS = ("code-delivery", "incident-review")
_SPEED_TOKENS = 64


def _speed(server: LocalServer, model: LocalModel) -> float:
    """Completion tokens per second of one request for exactly 64 tokens (the model loaded first)."""
    body = {"model": model.alias, "max_tokens": _SPEED_TOKENS, "min_tokens": _SPEED_TOKENS, "temperature": 0}
    warm = {**body, "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 1, "min_tokens": 0}
    httpx.post(f"{server.url}/chat/completions", json=warm, timeout=300).raise_for_status()
    counting = [{"role": "user", "content": "Count from 1 to 200, one number per line."}]
    started = time.perf_counter()
    reply = httpx.post(f"{server.url}/chat/completions", json={**body, "messages": counting}, timeout=300)
    reply.raise_for_status()
    return round(reply.json()["usage"]["completion_tokens"] / (time.perf_counter() - started), 1)


async def _protocols(server: LocalServer, model: LocalModel) -> dict[str, dict[str, object] | str]:
    """protocol → its setting overrides, or why it is skipped."""
    grammar = {"constrain": "grammar", **{f"{r.lower()}_constrain": "grammar" for r in ROLES}}
    found: dict[str, dict[str, object] | str] = {"dsml": {"constrain": "off"}}
    constrained = await pse_sends(load_settings(**grammar))
    found["dsml+grammar"] = grammar if constrained.constraint else "skipped: this PSE sends no constraint yet"
    native = await pse_sends(load_settings(protocol="native"))
    if not native.tools:
        found["native"] = "skipped: PSE_PROTOCOL=native offers no tools in this PSE yet"
    else:
        spec = load_settings(provider="openai", base_url=server.url, model=model.alias).model_spec(ROLES[0])
        probe = await native_tool_support(spec, 300)
        found["native"] = {"protocol": "native"} if probe.support == "yes" else f"skipped: {probe.detail}"
    return found


async def _runs(
    server: LocalServer, model: LocalModel, overrides: dict[str, object], tmp: Path
) -> dict[str, Any]:
    scores = []
    for task in TASKS:
        settings = local_run_settings(server.url, model.alias, tmp / model.alias / task, **overrides)
        summary = await run_to_end(prepare_run(task, settings))
        scores.append(score_run(load_trace(Path(summary.trace))))
    parse: ParseShare = reduce(lambda a, b: a + b, (s.parse for s in scores), ParseShare())
    return {
        "parse": {k: v for k, v in parse.as_dict().items() if k != "problems"},
        "runs": [
            {k: v for k, v in s.as_dict().items() if k not in ("parse", "outcome_reason")}
            | {"outcome_reason": s.outcome_reason[:160], "first_try": f"{s.parse.first_try}/{s.parse.turns}"}
            for s in scores
        ],
    }


def run_real_models() -> dict[str, Any]:
    """The real-model figures, or a note saying why there are none."""
    if importlib.util.find_spec("llama_cpp") is None:
        return {
            "skipped": "the local extra is not installed: pip install 'pse[local]' (make test-models does)"
        }
    figures: dict[str, Any] = {"budget": dict(SHORT_RUN), "models": {}}
    with tempfile.TemporaryDirectory(prefix="pse-bench-real-") as tmp, LocalServer() as server:
        figures["server_startup_s"] = round(server.startup_s, 2)
        for model in LOCAL_MODELS:
            row: dict[str, Any] = {"tokens_per_s": _speed(server, model), "protocols": {}}
            for protocol, overrides in asyncio.run(_protocols(server, model)).items():
                row["protocols"][protocol] = (
                    overrides
                    if isinstance(overrides, str)
                    else asyncio.run(_runs(server, model, overrides, Path(tmp)))
                )
            figures["models"][model.alias] = row
    return figures
