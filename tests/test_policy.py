"""The per-role policy: the full default matrix and task overrides (their format: test_policy_format.py)."""

from __future__ import annotations

import pytest

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.roles import ROLES
from pse.toolagent import Grant, Policy, PolicyDecision, PolicyOverrides
from pse.tools import ToolOutcome, ToolSpec, builtin_tools

TOOLS = [
    "read_file",
    "list_files",
    "write_file",
    "bash",
    "run_pytest",
    "run_ruff",
    "run_check",
    "search_knowledge",
]
# The ARCHITECTURE.md table, written out independently of the code: None = denied.
EXPECTED = {
    "Planner": ["read-only", "read-only", None, "read-only", None, None, None, "read-only"],
    "Specialist": ["read-only", "read-only", "read-write", None, None, None, None, "read-only"],
    "Evaluator": [
        "read-only",
        "read-only",
        None,
        "read-only",
        "read-only",
        "read-only",
        "read-only",
        "read-only",
    ],
}
MATRIX = [(role, tool, modes[i]) for role, modes in EXPECTED.items() for i, tool in enumerate(TOOLS)]


@pytest.fixture
def policy() -> Policy:
    return Policy.default(Settings(tool_calls_per_cycle=7))


@pytest.mark.parametrize(("role", "tool", "mode"), MATRIX, ids=[f"{r}-{t}" for r, t, _ in MATRIX])
def test_default_matrix(policy: Policy, role: str, tool: str, mode: str | None) -> None:
    decision = policy.decide(role, tool)
    if mode is None:
        assert decision == PolicyDecision(False, "policy.default_deny")
    else:
        reaches_evaluation = role == "Evaluator" and tool in ("read_file", "list_files", "run_pytest")
        areas = ("workspace", "evaluation") if reaches_evaluation else ("workspace",)
        assert decision == PolicyDecision(
            True, f"roles.{role}.{tool}", Grant(mode, 7, f"roles.{role}.{tool}", areas)
        )  # type: ignore[arg-type]


def test_tools_for_lists_grants_in_table_order(policy: Policy) -> None:
    assert policy.tools_for("Specialist") == [
        ("read_file", "read-only"), ("list_files", "read-only"), ("write_file", "read-write"),
        ("search_knowledge", "read-only"),
    ]  # fmt: skip
    assert policy.tools_for("ToolAgent") == []


def test_unknown_requester_is_denied(policy: Policy) -> None:
    assert policy.decide("user", "read_file") == PolicyDecision(False, "policy.unknown_requester")
    assert policy.decide("ToolAgent", "bash").allowed is False


def test_overrides_widen_narrow_and_budget(policy: Policy) -> None:
    task = policy.with_overrides(
        {
            "Specialist": {"bash": {"mode": "read-write", "budget": 2}, "run_pytest": "read-only"},
            "Planner": {"bash": "deny"},
            "Evaluator": {"bash": {"mode": "read-write", "budget": 0}, "run_pytest": {"budget": 5}},
        }
    )
    assert task.decide("Specialist", "bash") == PolicyDecision(True, "task.Specialist.bash", Grant("read-write", 2, "task.Specialist.bash"))  # fmt: skip
    assert task.grant("Specialist", "run_pytest") == Grant("read-only", 7, "task.Specialist.run_pytest")
    assert task.decide("Planner", "bash") == PolicyDecision(False, "task.Planner.bash")
    assert task.grant("Evaluator", "run_pytest") == Grant(
        "read-only", 5, "roles.Evaluator.run_pytest", ("workspace", "evaluation")
    )
    assert task.grant("Evaluator", "bash") == Grant("read-write", 0, "task.Evaluator.bash")
    assert policy.decide("Planner", "bash").allowed is True  # the default policy is untouched
    assert policy.with_overrides(None) is policy and policy.with_overrides({}) is policy


def test_a_new_mode_keeps_the_budget_a_denial_forgets_it(policy: Policy) -> None:
    budgeted = policy.with_overrides({"Evaluator": {"run_pytest": {"budget": 3}}})
    widened = budgeted.with_overrides({"Evaluator": {"run_pytest": "read-only"}})
    assert widened.grant("Evaluator", "run_pytest") == Grant(
        "read-only", 3, "task.Evaluator.run_pytest", ("workspace", "evaluation")
    )
    regranted = widened.with_overrides({"Evaluator": {"run_pytest": "deny"}}).with_overrides(
        {"Evaluator": {"run_pytest": "read-only"}}
    )
    assert regranted.grant("Evaluator", "run_pytest") == Grant("read-only", 7, "task.Evaluator.run_pytest")


def test_overrides_are_checked_against_the_policys_own_tools(policy: Policy) -> None:
    registry = builtin_tools()
    registry.register(ToolSpec("noop", "Nothing.", (), lambda ctx: ToolOutcome("ok", "")))
    wider = Policy.default(Settings(), registry).with_overrides({"Planner": {"noop": "read-only"}})
    assert wider.grant("Planner", "noop") == Grant("read-only", 30, "task.Planner.noop")
    with pytest.raises(ConfigError, match=r"^policy.Planner.noop: unknown tool 'noop'; tools are read_file"):
        policy.with_overrides({"Planner": {"noop": "read-only"}})


def test_a_task_config_policy_is_applied_as_its_dict(policy: Policy) -> None:
    raw = {"Specialist": {"bash": "read-write"}, "Evaluator": {"run_pytest": {"budget": 5}}}
    from_model = policy.with_overrides(PolicyOverrides.model_validate(raw))
    from_dict = policy.with_overrides(raw)
    grants = [(role, tool) for role in ROLES for tool in TOOLS]
    assert [from_model.grant(*key) for key in grants] == [from_dict.grant(*key) for key in grants]
    assert from_model.grant("Evaluator", "run_pytest").budget == 5  # type: ignore[union-attr]


def test_every_problem_is_one_line_naming_the_key(policy: Policy) -> None:
    with pytest.raises(ConfigError) as info:
        policy.with_overrides({"Planner": {"bash": "write", "read_file": {"budget": -1}}, "judge": {}})
    assert str(info.value).splitlines() == [
        "policy.Planner.bash: unknown mode 'write'; use one of read-only, read-write, deny",
        "policy.Planner.read_file: a budget is a whole number of calls >= 0, got -1; write e.g. budget = 5",
        "policy.judge: unknown role 'judge'; use one of Planner, Specialist, Evaluator",
    ]
