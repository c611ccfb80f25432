"""Both local model families drive both reference tasks, through real tool calls, to an outcome.

Three configurations: unconstrained (what the models write on their own: measured and reported,
whatever it shows), constrained (`PSE_CONSTRAIN=grammar`: the issue's goal — never an ERROR caused by
format, and at least 99 % of role turns parsing on the first try; skipped until PSE sends a
constraint), and an Evaluator of another model family (Planner and Specialist on one model, the
Evaluator on the other), in both of those modes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.doctor import RunScore, WireFeatures
from pse.engine import load_trace
from pse.local import GEMMA3, SMOLLM2, LocalModel, LocalServer, local_run_settings
from pse.runner import prepare_run, run_to_end
from real_models._support import record

pytestmark = pytest.mark.real_model

TASKS = ("code-delivery", "incident-review")
OUTCOMES = {"PASSED", "ESCALATED", "TIMEOUT", "ERROR"}
FIRST_TRY_GOAL = 0.99


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
    constrain = _constrain(config, pse_constraint)
    path = await _run(local_server, tmp_path, task, doer, evaluator_model=judge.alias, constrain=constrain)
    trace = load_trace(path)
    assert (trace.settings["model"], trace.settings["evaluator_model"]) == (doer.alias, judge.alias)
    _check(record(f"{config}+judge", f"{doer.alias}→{judge.alias}", trace), config)
