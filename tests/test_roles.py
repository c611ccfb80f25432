"""A role is one object (`RoleSpec`), and the places that use a role's facts read them from it.

Issue 30, item 2: a role's facts (description, prompt, what its final message owes, the states its phase
enters, its grammar) live in its spec.
"""

from __future__ import annotations

import itertools

import pytest

from pse.config import Settings
from pse.engine._finals import repair_request
from pse.engine._state import State, check_transition
from pse.protocol import TurnShape
from pse.roles import (
    ALL_ROLES,
    ROLE_SPECS,
    ROLES,
    SINGLE_AGENT,
    Role,
    role_spec,
)
from pse.tasks import base_prompt
from pse.tasks._paths import prompts_dir
from pse.team import describe
from pse.toolagent import DEFAULT_GRANTS, Policy
from pse.tools import Tool


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


def test_the_states_a_phase_enters_follow_the_state_table() -> None:
    """The entries are state names: each one is a `State`, and each entry a legal move from the last."""
    assert [s for s, _ in role_spec(SINGLE_AGENT).enters] == ["PLANNED", "RUNNING"]
    check_transition(State.START, State.PLANNED)
    for spec in ROLE_SPECS.values():
        states = [State(s) for s, _ in spec.enters] + (
            [State(spec.enters_after[0])] if spec.enters_after is not None else []
        )
        for before, after in itertools.pairwise(states):
            check_transition(before, after)
    assert role_spec(Role.PLANNER).enters == () and role_spec(Role.EVALUATOR).enters == (
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
    Agent borrows the Specialist's and the Evaluator's, as its policy seat holds them."""
    own = [name for name, spec in ROLE_SPECS.items() if not spec.borrows]
    assert own == list(ROLES) == list(DEFAULT_GRANTS)
    assert role_spec(SINGLE_AGENT).borrows == (Role.SPECIALIST, Role.EVALUATOR)
    policy = Policy.default(Settings()).with_single_agent(SINGLE_AGENT)
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
