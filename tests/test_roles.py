"""A role is one object (`RoleSpec`), a crew is data (`CrewSpec`), and the places that use them read them.

Issue 30, item 2: a role's facts (description, prompt, what its final message owes, the states its phase
enters, its grammar) live in its spec, and the `single` baseline is a crew, not a flag the engine, the
team or the runner branches on.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest
from pydantic import ValidationError

from pse.config import Settings
from pse.engine._state import State, check_transition
from pse.engine._values import repair_request
from pse.protocol import TurnShape
from pse.roles import (
    ALL_ROLES,
    CREWS,
    PSE_CREW,
    ROLE_SPECS,
    ROLES,
    SINGLE_AGENT,
    SINGLE_CREW,
    Role,
    role_spec,
)
from pse.tasks import base_prompt
from pse.tasks._paths import prompts_dir
from pse.team import describe
from pse.toolagent import DEFAULT_GRANTS, Policy
from pse.tools import Tool

SRC = Path(__file__).resolve().parents[1] / "src" / "pse"


def test_every_participant_has_one_spec_named_as_it() -> None:
    assert list(ROLE_SPECS) == list(ALL_ROLES)
    assert all(spec.name == name for name, spec in ROLE_SPECS.items())
    with pytest.raises(
        ValueError, match="unknown role 'Critic'; roles are Planner, Specialist, Evaluator, Agent"
    ):
        role_spec("Critic")


def test_a_specs_prompt_exists_and_is_the_base_prompt() -> None:
    for name, spec in ROLE_SPECS.items():
        assert (prompts_dir() / spec.prompt).is_file()
        assert base_prompt(name) == (prompts_dir() / spec.prompt).read_text(encoding="utf-8").strip()
    assert role_spec(SINGLE_AGENT).prompt == "single.md"


def test_the_states_a_crews_phases_enter_follow_the_state_table() -> None:
    """A crew's phase entries are state names, and a first cycle's walk through them (a plan read moves
    to PLANNED) is a legal move at every step."""
    walked = {}
    for crew in CREWS.values():
        states = [State.START]
        for phase in crew.phases:
            states += [State(s) for s, _ in phase.enters if State(s) != states[-1]]
            if role_spec(phase.role).final == "plan":
                states.append(State.PLANNED)
            if phase.enters_after is not None:
                states.append(State(phase.enters_after[0]))
        for before, after in itertools.pairwise(states):
            check_transition(before, after)
        walked[crew.name] = [s.value for s in states]
    assert walked == {
        "pse": ["START", "PLANNED", "RUNNING", "REVIEWING"],
        "single": ["START", "PLANNED", "RUNNING", "REVIEWING"],
        "review": ["START", "PLANNED", "RUNNING", "REVIEWING"],
    }
    assert PSE_CREW.phases[0].enters == () and PSE_CREW.phases[2].enters == (
        ("REVIEWING", "Specialist reported; Evaluator started"),
    )


def test_a_roles_grammar_ends_with_what_its_final_message_is_read_as() -> None:
    for name, spec in ROLE_SPECS.items():
        assert spec.finals[0] == spec.final
        assert TurnShape(role=name).kinds() == spec.finals  # the grammar reads the spec, nothing else


def test_the_repair_request_says_what_the_spec_owes() -> None:
    asked = repair_request(SINGLE_AGENT, "no <verdict> found")
    assert asked == (
        "PSE could not read your last message: no <verdict> found. Your turn must end with "
        f"{role_spec(SINGLE_AGENT).owes}. Send that message now; nothing else is needed."
    )
    assert "on your own work" in role_spec(SINGLE_AGENT).owes


def test_autogen_shows_the_specs_description() -> None:
    assert (
        describe(Role.EVALUATOR) == "Judges each criterion against evidence it gathers itself. Never fixes."
    )
    assert describe(SINGLE_AGENT) == role_spec(SINGLE_AGENT).description
    assert describe("Stranger") == "Stranger"


def test_a_role_of_its_own_has_default_grants_and_a_borrowing_seat_holds_their_union() -> None:
    """The grants are the policy's table (roles sit below the tools, so a spec cannot name one); the
    Agent borrows the Specialist's and the Evaluator's, and its policy seat is built from `borrows`."""
    own = [name for name, spec in ROLE_SPECS.items() if not spec.borrows]
    assert own == list(ROLES) == list(DEFAULT_GRANTS)
    borrowed = role_spec(SINGLE_AGENT).borrows
    policy = Policy.default(Settings()).with_seat(SINGLE_AGENT, borrowed)
    held = dict(policy.tools_for(SINGLE_AGENT))
    assert held == {
        Tool.READ_FILE: "read-only",
        Tool.LIST_FILES: "read-only",
        Tool.WRITE_FILE: "read-write",
        Tool.BASH: "read-only",
        Tool.RUN_PYTEST: "read-only",
        Tool.RUN_RUFF: "read-only",
        Tool.RUN_CHECK: "read-only",
        Tool.SEARCH_KNOWLEDGE: "read-only",
    }
    grant = policy.grant(SINGLE_AGENT, Tool.RUN_PYTEST)
    assert grant is not None and grant.areas == ("workspace",)  # no evaluation area: it has no own tests


def test_the_crews_are_the_team_settings_values() -> None:
    assert all(Settings(team=name).crew is crew for name, crew in CREWS.items())
    with pytest.raises(ValidationError, match="no crew 'solo'; the crews are pse, single, review"):
        Settings(team="solo")
    assert Settings().crew is PSE_CREW and Settings(team="single").crew is SINGLE_CREW
    assert (PSE_CREW.speakers, PSE_CREW.reviewer, PSE_CREW.gated) == (ROLES, Role.EVALUATOR, True)
    assert (PSE_CREW.plans, PSE_CREW.independent_review, PSE_CREW.self_review) == (True, True, False)
    assert [p.role for p in PSE_CREW.phases_for("revise")] == [Role.SPECIALIST, Role.EVALUATOR]
    assert [p.role for p in PSE_CREW.phases_for("replan")] == list(ROLES)
    assert (SINGLE_CREW.speakers, SINGLE_CREW.reviewer, SINGLE_CREW.self_review) == (
        (SINGLE_AGENT,),
        SINGLE_AGENT,
        True,
    )
    assert (SINGLE_CREW.gated, SINGLE_CREW.plans, SINGLE_CREW.independent_review) == (False, False, False)
    assert all(speaker in ROLE_SPECS for crew in CREWS.values() for speaker in crew.speakers)


def _settings(node: ast.expr) -> bool:
    """Whether `node` reads as the settings (`settings`, `s`, `self.settings`): not a phase's AutoGen team."""
    return (isinstance(node, ast.Name) and node.id in ("settings", "s")) or (
        isinstance(node, ast.Attribute) and node.attr == "settings"
    )


def _team_branches(path: Path) -> list[str]:
    """Each place `path` names a team, reads the `team` setting, or names the single team's Agent."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in CREWS:
            found.append(f"{path.name}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "team" and _settings(node.value):
            found.append(f"{path.name}:{node.lineno}: settings.team")
        elif isinstance(node, ast.Name) and node.id == "SINGLE_AGENT":
            found.append(f"{path.name}:{node.lineno}: SINGLE_AGENT")
    return found


def test_the_engine_the_team_and_the_runner_read_the_crew_and_never_branch_on_the_team() -> None:
    found = [
        hit
        for room in ("engine", "team", "runner")
        for p in (SRC / room).rglob("*.py")
        for hit in _team_branches(p)
    ]
    assert found == []


def test_the_branch_check_sees_a_branch(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('def f(self, s):\n    return s.team == "single" or self.settings.team == "pse"\n')
    found = sorted(_team_branches(module))
    assert found == ["m.py:2: 'pse'", "m.py:2: 'single'", "m.py:2: settings.team", "m.py:2: settings.team"]
