"""The run's builders each make one value from a `RunFrame`, with no task folder and no `prepare_run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.config import load_settings
from pse.engine import ApprovalDesk, RunEvents
from pse.exceptions import UserError
from pse.roles import Role
from pse.runner import prepare_task
from pse.runner._clients import RunClients
from pse.runner._fit import RunFit
from pse.runner._frame import RunFrame
from pse.runner._script import open_script
from pse.runner._tools import build_tools
from pse.testing import FunctionModel, in_memory_task
from pse.toolagent import run_tools
from pse.tools import builtin_tools

TASK = in_memory_task({"goal": "Write a.txt saying hi.", "expected_outputs": ["a.txt"]})


def _frame(tmp_path: Path, **settings: object) -> RunFrame:
    workspace = tmp_path / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    loaded = load_settings(runs_dir=tmp_path / "runs", sandbox="fallback", **settings)
    return RunFrame(TASK, loaded, tmp_path, workspace, RunEvents("r1"))


def test_the_frame_holds_the_crew_and_no_interrupted_cycle_for_a_new_run(tmp_path: Path) -> None:
    frame = _frame(tmp_path)
    assert frame.speakers == (Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR) and frame.again is None
    single = _frame(tmp_path, team="single")
    assert len(single.speakers) == 1


def test_a_scripted_role_without_a_cassette_is_refused_by_the_script(tmp_path: Path) -> None:
    frame = _frame(tmp_path)
    with pytest.raises(UserError, match="has no cassette and no model is configured"):
        open_script(
            TASK,
            frame.settings,
            frame.crew,
            [Role.PLANNER],
            player=None,
            positions=None,
            events=frame.events,
            fit=RunFit({}, None),
        )
    script = open_script(
        TASK,
        frame.settings,
        frame.crew,
        [],
        player=None,
        positions=None,
        events=frame.events,
        fit=RunFit({}, None),
    )
    assert (script.player, script.recorder, script.loaded, script.replay) == (None, None, None, None)
    assert script.tool_runner is run_tools  # nothing replayed, nothing recorded: the sandbox runs the calls


def test_the_tools_and_the_clients_are_built_from_the_frame(tmp_path: Path) -> None:
    frame = _frame(tmp_path)
    registry = builtin_tools()
    approvals = ApprovalDesk(tmp_path, 1.0)
    tools = build_tools(frame, registry, mcp=None, runner=run_tools, approvals=approvals, repository=None)
    assert tools.executor.workspace == frame.workspace.resolve() and tools.evaluation_dir is None
    assert tools.policy.decide(Role.SPECIALIST, "write_file").allowed
    assert not tools.policy.decide(Role.PLANNER, "write_file").allowed
    script = open_script(
        TASK,
        frame.settings,
        frame.crew,
        [],
        player=None,
        positions=None,
        events=frame.events,
        fit=RunFit({}, None),
    )
    given = {role: FunctionModel(lambda messages: "ok") for role in frame.speakers}
    clients = RunClients(frame, script, tools.policy, registry, given)
    assert list(clients.clients) == list(frame.speakers)
    step = clients.for_step(Role.SPECIALIST, "S1")
    assert clients.for_step(Role.SPECIALIST, "S1") is step  # one client per `ROLE@STEP`, built once
    assert list(clients.clients) == [*frame.speakers, "Specialist@S1"]


@pytest.mark.parametrize("hard_gates", [True, False])
def test_the_gates_hold_a_pass_unless_the_settings_ablate_them(tmp_path: Path, hard_gates: bool) -> None:
    """`GatePolicy.enforced` comes from the settings alone (PSE_HARD_GATES): nothing a role writes reaches
    it, and it is on unless a person turns it off for an ablation."""
    model = FunctionModel(lambda messages: "unused")
    settings = load_settings(runs_dir=tmp_path / "runs", sandbox="fallback", hard_gates=hard_gates)
    models = {role: model for role in (Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR)}
    prepared = prepare_task(TASK, settings, models=models)
    assert prepared.engine.setup.gates.enforced is hard_gates
    assert prepared.engine.setup.gates.expected_outputs == ["a.txt"]
