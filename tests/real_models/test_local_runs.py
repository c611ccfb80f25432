"""Both local model families drive both reference tasks, through real tool calls, to an outcome.

Three configurations: unconstrained (what the models write on their own: measured and reported,
whatever it shows), constrained (`PSE_CONSTRAIN=grammar`: the issue's goal — never an ERROR caused by
format, and at least 99 % of role turns parsing on the first try; skipped until PSE sends a
constraint), and an Evaluator of another model family (Planner and Specialist on one model, the
Evaluator on the other), in both of those modes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pse.doctor import RunScore, WireFeatures
from pse.engine import load_trace
from pse.local import GEMMA3, SMOLLM2, LocalModel, LocalServer, local_run_settings
from pse.runner import prepare_run, run_to_end
from real_models._support import FIGURES, UsageProxy, record

pytestmark = pytest.mark.real_model

TASKS = ("code-delivery", "incident-review")
OUTCOMES = {"PASSED", "ESCALATED", "TIMEOUT", "ERROR"}
FIRST_TRY_GOAL = 0.99


FULL = os.environ.get("PSE_TEST_MODELS") == "full"
"""`make test-models-full`: every model × task × config. `make test-models` (in CI, on 2 cores) keeps one
run per model and task pairing, grammar on: the tiny models' runs end on their caps (about 100 s each),
and the whole matrix alone took longer than the rest of CI together."""
IN_CI = {
    ("smollm2-135m", "code-delivery", "grammar"),
    ("gemma3-270m", "incident-review", "grammar"),
    ("code-delivery-smollm2-judged-by-gemma3", "grammar"),
}


def _in_this_session(*case: str) -> None:
    if not FULL and case not in IN_CI:
        pytest.skip("one of the full matrix: run `make test-models-full` (PSE_TEST_MODELS=full)")


def _constrain(config: str, features: WireFeatures) -> str:
    if config == "grammar" and features.constraint is None:
        pytest.skip(
            "this PSE sends no decoding constraint yet: PSE_CONSTRAIN=grammar changes nothing on the wire "
            f"(the request holds {', '.join(features.fields)})"
        )
    return "grammar" if config == "grammar" else "off"


async def _run(server: LocalServer, tmp_path: Path, task: str, doer: LocalModel, **overrides: object) -> Path:
    settings = local_run_settings(server.url, doer.alias, tmp_path / "runs", **overrides)
    summary = await run_to_end(prepare_run(task, settings))
    return Path(summary.trace)


def _check(score: RunScore, config: str) -> None:
    """What every run must show, and, constrained, the issue's goal."""
    assert score.outcome in OUTCOMES, score.outcome_reason
    assert score.cycles >= 1 and score.tokens > 0  # the models really answered, with the server's usage
    parse = score.parse
    assert parse.turns >= 1 and 0 <= parse.first_try <= parse.after_repair <= parse.turns
    if config == "grammar":
        assert not score.format_error, score.outcome_reason
        assert parse.first_try_share is not None and parse.first_try_share >= FIRST_TRY_GOAL, parse.problems
        assert score.tool_calls >= 1, "constrained, a run must reach a real tool call"


@pytest.mark.parametrize("config", ["unconstrained", "grammar"])
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("model", [SMOLLM2, GEMMA3], ids=lambda m: m.alias)
async def test_a_local_model_drives_a_reference_task_to_an_outcome(
    local_server: LocalServer,
    pse_constraint: WireFeatures,
    tmp_path: Path,
    model: LocalModel,
    task: str,
    config: str,
) -> None:
    _in_this_session(model.alias, task, config)
    constrain = _constrain(config, pse_constraint)
    trace = load_trace(await _run(local_server, tmp_path, task, model, constrain=constrain))
    assert trace.settings["model"] == model.alias and trace.settings["constrain"] == constrain
    _check(record(config, model.alias, trace), config)


@pytest.mark.parametrize("config", ["unconstrained", "grammar"])
@pytest.mark.parametrize(
    ("task", "doer", "judge"),
    [("code-delivery", SMOLLM2, GEMMA3), ("incident-review", GEMMA3, SMOLLM2)],
    ids=["code-delivery-smollm2-judged-by-gemma3", "incident-review-gemma3-judged-by-smollm2"],
)
async def test_with_an_evaluator_of_another_family_a_run_reaches_an_outcome(
    local_server: LocalServer,
    pse_constraint: WireFeatures,
    tmp_path: Path,
    task: str,
    doer: LocalModel,
    judge: LocalModel,
    config: str,
) -> None:
    assert doer.family != judge.family
    _in_this_session(f"{task}-{doer.alias.split('-')[0]}-judged-by-{judge.alias.split('-')[0]}", config)
    constrain = _constrain(config, pse_constraint)
    path = await _run(local_server, tmp_path, task, doer, evaluator_model=judge.alias, constrain=constrain)
    trace = load_trace(path)
    assert (trace.settings["model"], trace.settings["evaluator_model"]) == (doer.alias, judge.alias)
    _check(record(f"{config}+judge", f"{doer.alias}→{judge.alias}", trace), config)


async def test_the_run_limit_holds_against_a_real_model_and_every_answered_request_is_counted(
    local_server: LocalServer, tmp_path: Path
) -> None:
    """#12's bar against llama.cpp: `PSE_RUN_TIMEOUT_S=10` ends the run TIMEOUT, and the trace holds
    exactly the usage the server reported for each answer PSE received (read on a proxy between them);
    the call the deadline cut is there too, estimated and marked so. Turns of at most 384 tokens and
    no turn cap to speak of, so the run is still working at 10 s. (The exact count with many answered
    calls is tests/test_budgets_and_windows.py's, on a stand-in.) PSE's one-token constraint probe, sent
    when it has not learned the server yet, is one of those calls: the trace counts it (issue 47)."""
    with UsageProxy(local_server.url) as proxy:
        settings = local_run_settings(
            proxy.url,
            GEMMA3.alias,
            tmp_path / "runs",
            constrain="grammar",
            run_timeout_s=10,
            model_max_tokens=384,
            turns_per_cycle=40,
        )
        started = time.monotonic()
        summary = await run_to_end(prepare_run("code-delivery", settings))
        elapsed = time.monotonic() - started
    assert (summary.outcome, summary.outcome_reason) == (
        "TIMEOUT",
        "run wall-clock limit reached (PSE_RUN_TIMEOUT_S)",
    ), "the run must still be working at 10 s"
    # The limit, not the work, ended it (the work takes minutes at 384 tokens a turn): a bound that loaded
    # machines keep. How close to 10 s it ended is a measurement (FIGURES, below), not a test's bar: a
    # 12 s bar failed once beside the start-up of the next model server.
    assert elapsed < 60, f"a 10 s run took {elapsed:.1f} s"
    by_role = load_trace(Path(summary.trace)).tokens.by_role.values()
    reported = sum(t.prompt + t.completion for t in by_role) - sum(t.estimated for t in by_role)
    # Usually the Planner's turn is answered (8 s here, with the model's first load); on a slower
    # machine none may be, and then no reported token may appear either.
    assert reported == sum(p + c for p, c in proxy.delivered), proxy.delivered
    # The call the deadline cut is estimated, not dropped; unless its answer came while the run settled
    # its calls (SETTLE_S): then the proxy delivered it and it is counted in full, like every other.
    assert sum(t.estimated for t in by_role) > 0 or sum(t.calls for t in by_role) == len(proxy.delivered)
    FIGURES.append(
        {"run_limit": {"limit_s": 10, "wall_s": round(elapsed, 2), "answered": len(proxy.delivered)}}
    )
