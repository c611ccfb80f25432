"""The per-role policy: the full default matrix, task overrides and their validation."""

from __future__ import annotations

import pytest

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.toolagent import Grant, Policy, PolicyDecision

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
            "Specialist": {"bash": "read-write", "run_pytest": "read-only"},
            "Planner": {"bash": "deny"},
            "Evaluator": {"bash": "read-write"},
            "budgets": {"Evaluator": {"run_pytest": 5, "bash": 0}, "Specialist": {"bash": 2}},
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


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"Planer": {"bash": "deny"}}, "tools.Planer: unknown role 'Planer'; roles are Planner, Specialist, Evaluator"),
        ({"Planner": {"rm": "deny"}}, "tools.Planner.rm: unknown tool 'rm'; tools are bash, list_files"),
        ({"Planner": {"bash": "write"}}, "tools.Planner.bash: unknown mode 'write'; use one of read-only, read-write, deny"),
        ({"Planner": {"write_file": "read-only"}}, "tools.Planner.write_file: write_file can be granted read-write only"),
        ({"Planner": {"read_file": "read-write"}}, "tools.Planner.read_file: read_file can be granted read-only only"),
        ({"Evaluator": {"run_check": "read-write"}}, "run_check can be granted read-only only"),
        ({"Planner": "deny"}, "tools.Planner must map tool names to modes"),
        ({"budgets": {"Evaluator": {"run_pytest": -1}}}, "tools.budgets.Evaluator.run_pytest: a budget is a whole number"),
        ({"budgets": {"Evaluator": {"run_pytest": True}}}, "a budget is a whole number of calls >= 0, got True"),
        ({"budgets": {"Planner": {"write_file": 3}}}, "tools.budgets.Planner.write_file: Planner has no write_file grant"),
        ({"budgets": {"Boss": {"bash": 3}}}, "tools.budgets.Boss: unknown role 'Boss'"),
        ({"budgets": [1]}, "tools.budgets must map roles"),
    ],
)  # fmt: skip
def test_invalid_overrides_name_the_key(policy: Policy, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        policy.with_overrides(overrides)
    assert message in str(info.value)


def test_as_table(policy: Policy) -> None:
    assert policy.as_table()["Specialist"]["write_file"] == "read-write (budget 7)"
