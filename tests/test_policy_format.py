"""The policy format is one model: `pse validate` and a run judge every `[policy]` table alike.

Every shape docs/tools.md and docs/tasks.md show, valid or not, and a grid of others, goes to three
readers: `pse validate`, `Policy.with_overrides` on the raw table (what the run calls), and
`prepare_run` (a real run's start). Valid shapes pass all three; invalid ones fail all three, and
validate's problem and the run's error are the same line, the one the docs print.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.roles import ROLES
from pse.runner import prepare_run
from pse.tasks import scaffold_task, validate
from pse.toolagent import Grant, Policy
from pse.toolagent._defaults import BUILTIN_VOCABULARY
from pse.tools import Tool, builtin_tools

DOCS = Path(__file__).resolve().parents[1] / "docs"
TOOLS_MD = (DOCS / "tools.md").read_text(encoding="utf-8")
TASKS_MD = (DOCS / "tasks.md").read_text(encoding="utf-8")


def _policy_blocks(text: str) -> list[str]:
    # A block that declares an MCP server grants tools only a running server lists: tests/test_mcp_run.py
    # runs those (validate and a real run with the server).
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    return [block for block in blocks if "[policy." in block and "[mcp." not in block]


def _refusals(text: str) -> list[tuple[str, str]]:
    """The rows of the table 'in task.toml | `pse validate` and the run say': (task.toml text, message)."""
    table = text[text.index("| in task.toml |") :].split("\n\n")[0].splitlines()[2:]
    rows = []
    for row in table:
        toml_cell, said = row.strip("|").split(" | ")
        rows.append(("\n".join(re.findall(r"`([^`]*)`", toml_cell)), said.strip().strip("`")))
    return rows


VALID = _policy_blocks(TOOLS_MD) + _policy_blocks(TASKS_MD)
REFUSED = _refusals(TOOLS_MD)


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    scaffold_task("demo", root)
    return root


@pytest.fixture(scope="module")
def base_toml(tasks_dir: Path) -> str:
    return (tasks_dir / "demo" / "task.toml").read_text(encoding="utf-8")


def _with_policy(tasks_dir: Path, base_toml: str, policy_toml: str) -> Any:
    """Write the task's task.toml with `policy_toml` in it; return the policy as a run's TOML reader sees it."""
    # A top-level key must come before the first table, a table after the last top-level key.
    text = f"{base_toml}\n{policy_toml}\n" if policy_toml.startswith("[") else f"{policy_toml}\n{base_toml}"
    (tasks_dir / "demo" / "task.toml").write_text(text, encoding="utf-8")
    return tomllib.loads(text).get("policy")


def _validate_says(tasks_dir: Path) -> list[str]:
    return [f"{problem.message}; {problem.fix}" for problem in validate([tasks_dir], "demo")]


def _run_policy(raw: Any) -> Policy | list[str]:
    """What the run does with the table: the default policy of the run's tools, with the task's overrides."""
    try:
        return Policy.default(Settings(), builtin_tools()).with_overrides(raw)
    except ConfigError as exc:
        return str(exc).splitlines()


def _run_starts(tasks_dir: Path, tmp_path: Path) -> str | None:
    settings = Settings(
        provider="scripted", tasks_dir=tasks_dir, runs_dir=tmp_path / "runs", sandbox="fallback"
    )
    try:
        prepare_run("demo", settings)
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("policy_toml", VALID, ids=[f"docs-{i}" for i in range(len(VALID))])
def test_every_policy_the_docs_show_is_accepted_by_validate_and_the_run(
    tasks_dir: Path, base_toml: str, tmp_path: Path, policy_toml: str
) -> None:
    raw = _with_policy(tasks_dir, base_toml, policy_toml)
    assert _validate_says(tasks_dir) == []
    assert isinstance(_run_policy(raw), Policy)
    assert _run_starts(tasks_dir, tmp_path) is None


@pytest.mark.parametrize(("policy_toml", "message"), REFUSED, ids=[m.split(":")[0] for _, m in REFUSED])
def test_every_refusal_the_docs_show_is_what_validate_and_the_run_say(
    tasks_dir: Path, base_toml: str, tmp_path: Path, policy_toml: str, message: str
) -> None:
    raw = _with_policy(tasks_dir, base_toml, policy_toml)
    assert _validate_says(tasks_dir) == [message]
    assert _run_policy(raw) == [message]
    refused = _run_starts(tasks_dir, tmp_path)
    assert refused is not None and message.split("; ")[0] in refused


def test_the_docs_cover_the_shapes_and_the_tools_modes() -> None:
    assert len(VALID) == 3 and len(REFUSED) == 15
    by_modes: dict[tuple[str, ...], list[str]] = {}
    for tool, modes in BUILTIN_VOCABULARY.tool_modes.items():
        by_modes.setdefault(tuple(modes), []).append(tool)
    sentence = "; ".join(
        f"{', '.join(tools)} {' or '.join(modes)}{' only' if len(modes) == 1 else ''}"
        for modes, tools in sorted(by_modes.items(), key=lambda item: len(item[1]))
    )
    assert " ".join(f"Modes a tool can be granted in: {sentence}.".split()) in " ".join(TOOLS_MD.split())


def test_the_docs_example_means_what_its_comments_say() -> None:
    policy = _run_policy(tomllib.loads(VALID[0])["policy"])
    assert isinstance(policy, Policy)
    assert policy.grant("Specialist", "bash") == Grant("read-write", 30, "task.Specialist.bash")
    assert policy.decide("Planner", "bash").rule == "task.Planner.bash"
    assert policy.grant("Evaluator", "run_pytest") == Grant(
        "read-only", 5, "roles.Evaluator.run_pytest", ("workspace", "evaluation")
    )
    assert policy.grant("Evaluator", "bash") == Grant("read-write", 2, "task.Evaluator.bash")


ROLE_KEYS = [*ROLES, "planner", "EVALUATOR", "Judge"]
TOOL_KEYS = ["bash", "write_file", "run_check", "search_knowledge", "rm"]
SETTINGS = [
    '"read-only"', '"read-write"', '"deny"', '"allow"', "5", "[1]", "{ budget = 3 }", "{ budget = 0 }",
    '{ mode = "read-write", budget = 2 }', '{ mode = "deny", budget = 1 }', "{ budget = 2.5 }", "{}",
    '{ mode = "read-only", approval = "always" }',
]  # fmt: skip
GRID = [
    f"[policy.{role}]\n{tool} = {setting}"
    for role, tool, setting in itertools.product(ROLE_KEYS, TOOL_KEYS, SETTINGS)
]


def test_validate_and_the_run_agree_on_a_grid_of_shapes(tasks_dir: Path, base_toml: str) -> None:
    accepted = 0
    for policy_toml in GRID:
        raw = _with_policy(tasks_dir, base_toml, policy_toml)
        said, policy = _validate_says(tasks_dir), _run_policy(raw)
        if isinstance(policy, Policy):
            assert said == [], policy_toml
            accepted += 1
        else:
            assert said == policy and len(said) >= 1, policy_toml
            assert all(line.startswith("policy.") for line in said)
    # Per role: read-only (bash, run_check, search_knowledge) 3 + read-write (bash, write_file) 2 + deny 4
    # + read-write with a budget 2 = 11, x 3 roles = 33; a budget alone, of a tool the role holds (Planner
    # bash, search_knowledge; Specialist write_file, search_knowledge; Evaluator bash, run_check,
    # search_knowledge) = 7, x 2 budgets = 14; read-only with an approval (bash, run_check,
    # search_knowledge) 3 x 3 roles = 9.
    assert accepted == 33 + 14 + 9


def test_the_grid_accepts_exactly_the_meaningful_settings() -> None:
    accepted = {shape for shape in GRID if isinstance(_run_policy(tomllib.loads(shape)["policy"]), Policy)}
    for shape in accepted:
        role, tool = re.findall(r"\[policy\.(\w+)\]\n(\w+) =", shape)[0]
        assert role in ROLES and tool in set(Tool)
    assert "[policy.Planner]\nwrite_file = { budget = 3 }" not in accepted  # Planner holds no write_file
    assert "[policy.Specialist]\nwrite_file = { budget = 3 }" in accepted
