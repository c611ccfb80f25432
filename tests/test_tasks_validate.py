"""`validate` reports every problem at once, with the file and the fix; `scaffold_task` makes valid tasks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pse.exceptions import TaskNotFoundError, UserError
from pse.tasks import Problem, TaskRegistry, builtin_tasks_dir, scaffold_task, validate
from pse.toolagent import ToolOverride


def _messages(problems: list[Problem]) -> list[str]:
    return [p.message for p in problems]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    scaffold_task("demo", root)
    return root


def test_builtin_tasks_are_valid() -> None:
    assert validate(TaskRegistry.discover()) == []
    assert validate([builtin_tasks_dir()], "incident-review") == []


def test_scaffolded_task_is_valid(tasks_dir: Path) -> None:
    assert validate([tasks_dir]) == []
    assert validate(TaskRegistry.discover(tasks_dir), "demo") == []


def test_missing_prompt_file(tasks_dir: Path) -> None:
    (tasks_dir / "demo" / "specialist.md").unlink()
    [problem] = validate([tasks_dir])
    assert problem.file == str(tasks_dir / "demo" / "specialist.md")
    assert problem.message == "Specialist prompt file missing"
    assert "create specialist.md" in problem.fix


def test_policy_problems_name_the_key_and_the_fix(tasks_dir: Path) -> None:
    with (tasks_dir / "demo" / "task.toml").open("a") as handle:
        handle.write(
            '\n[policy.Specialist]\nrm_rf = "allow"\nbash = "read-only"\n[policy.Judge]\nread_file = "deny"\n'
        )
    problems = validate([tasks_dir])
    assert {p.file for p in problems} == {str(tasks_dir / "demo" / "task.toml")}
    assert [(p.message, p.fix) for p in problems] == [
        ("policy.Specialist.rm_rf: unknown tool 'rm_rf'", "tools are read_file, list_files, write_file, bash, run_pytest, run_ruff, run_check, search_knowledge"),
        ("policy.Specialist.rm_rf: unknown mode 'allow'", "use one of read-only, read-write, deny"),
        ("policy.Judge: unknown role 'Judge'", "use one of Planner, Specialist, Evaluator"),
    ]  # fmt: skip


def test_policy_role_names_are_spelled_once(tasks_dir: Path) -> None:
    with (tasks_dir / "demo" / "task.toml").open("a") as handle:
        handle.write('\n[policy.planner]\nbash = "deny"\n')
    [problem] = validate([tasks_dir])
    assert problem.message == "policy.planner: unknown role 'planner'"
    assert problem.fix == "write Planner: roles are spelled Planner, Specialist, Evaluator"


def test_policy_is_read_as_the_toolagent_reads_it(tasks_dir: Path) -> None:
    with (tasks_dir / "demo" / "task.toml").open("a") as handle:
        handle.write(
            '\n[policy.Specialist]\nbash = { mode = "read-only", budget = 5 }\nwrite_file = "deny"\n'
        )
    assert validate([tasks_dir]) == []
    policy = TaskRegistry.discover(tasks_dir).get("demo").config.policy
    assert list(policy.settings()) == [
        ("Specialist", "bash", ToolOverride(mode="read-only", budget=5)),
        ("Specialist", "write_file", ToolOverride(mode="deny")),
    ]


def test_bad_values_and_unknown_keys_name_the_field(tasks_dir: Path) -> None:
    toml = tasks_dir / "demo" / "task.toml"
    _edit(toml, 'expected_outputs = ["result.md"]', 'expected_outputs = ["/etc/passwd"]\nexpectd = 1')
    with toml.open("a") as handle:
        handle.write("\n[limits]\nmax_partial_retries = -1\nturns_per_cycle = 2\n")
    messages = _messages(validate([tasks_dir]))
    assert len(messages) == 4, messages
    assert any(
        m.startswith("expected_outputs: Value error, path '/etc/passwd' must be a relative") for m in messages
    )
    assert "unknown key 'expectd'" in messages
    assert "limits.max_partial_retries: -1 is out of range (it must be at least 0)" in messages
    assert "limits.turns_per_cycle: 2 is out of range (it must be at least 3)" in messages


def test_pytest_plugins_must_be_names_and_installed(tasks_dir: Path, tmp_path: Path) -> None:
    toml = tasks_dir / "demo" / "task.toml"
    with toml.open("a") as handle:
        handle.write('\n[verification]\npytest_plugins = ["asyncio", "no:asyncio", "not_installed_xyz"]\n')
    messages = _messages(validate([tasks_dir]))
    assert len(messages) == 1 and "'no:asyncio' is not a plugin name" in messages[0], messages
    _edit(toml, '"no:asyncio", ', "")
    [problem] = validate([tasks_dir])
    assert (
        problem.message
        == "pytest plugin 'not_installed_xyz' ([verification] pytest_plugins) is not installed"
    )
    assert problem.fix == "install it next to PSE, or remove it from pytest_plugins"
    # A run of it is refused before anything starts, with the same fix.
    from pse.config import load_settings
    from pse.exceptions import ConfigError
    from pse.runner import prepare_run

    settings = load_settings(tasks_dir=tasks_dir, runs_dir=tmp_path / "runs", sandbox="fallback")
    with pytest.raises(ConfigError, match=r"'not_installed_xyz' .* is not installed\s+fix: install it"):
        prepare_run("demo", settings)
    assert not any((tmp_path / "runs").glob("*/trace.json"))


def test_registry_entry_without_folder_and_folder_without_entry(tasks_dir: Path) -> None:
    with (tasks_dir / "registry.toml").open("a") as handle:
        handle.write('\n[tasks.ghost]\npath = "ghost"\n')
    (tasks_dir / "stray").mkdir()
    (tasks_dir / "stray" / "planner.md").write_text("x")
    (tasks_dir / "notes").mkdir()  # no task files: not a task folder, not reported
    problems = validate([tasks_dir])
    assert _messages(problems) == [
        "folder 'stray' has no registry entry",
        f"task 'ghost' is registered but its folder {tasks_dir / 'ghost'} does not exist",
    ]
    assert problems[0].fix == f'add [tasks.stray] with path = "stray" to {tasks_dir / "registry.toml"}'
    assert problems[1].file == str(tasks_dir / "registry.toml")


def test_declared_check_script_missing_and_required_check_undeclared(tasks_dir: Path) -> None:
    (tasks_dir / "demo" / "checks" / "check_result.py").unlink()
    _edit(
        tasks_dir / "demo" / "task.toml",
        'required_checks = ["result"]',
        'required_checks = ["result", "mypy"]',
    )
    problems = validate([tasks_dir])
    assert _messages(problems) == [
        "required check 'mypy' is neither built-in (pytest, ruff) nor declared (declared: result)",
        "check 'result' runs checks/check_result.py, which does not exist",
    ]
    assert problems[0].fix.startswith('Declare it: [checks] mypy = "{python} {task_dir}/checks/mypy.py"')


def test_undeclared_check_is_reported_even_when_another_field_is_invalid(tasks_dir: Path) -> None:
    _edit(
        tasks_dir / "demo" / "task.toml",
        'required_checks = ["result"]',
        'required_checks = ["nope"]\nseed = 3',
    )
    messages = _messages(validate([tasks_dir]))
    assert len(messages) == 2
    assert messages[0].startswith("seed: Input should be a valid list")
    assert (
        messages[1]
        == "required check 'nope' is neither built-in (pytest, ruff) nor declared (declared: result)"
    )


def test_missing_or_malformed_cassette(tasks_dir: Path) -> None:
    cassette = tasks_dir / "demo" / "cassette.json"
    cassette.write_text("{not json")
    [problem] = validate([tasks_dir])
    assert problem.message.startswith("cassette is not readable JSON")
    cassette.write_text(json.dumps({"version": 1}))
    assert _messages(validate([tasks_dir])) == ["cassette has no 'turns' list"]
    cassette.unlink()
    [problem] = validate([tasks_dir])
    assert problem.message == f"cassette 'cassette.json' does not exist ({cassette})"
    # the real path, as the other warnings name it (issue 47): `--record cassette.json` wrote into the cwd
    assert problem.fix == f"record one with `pse run demo --record {cassette}` or remove the cassette key"


def test_missing_task_toml_and_broken_toml(tasks_dir: Path) -> None:
    toml = tasks_dir / "demo" / "task.toml"
    toml.write_text("description = \n")
    [problem] = validate([tasks_dir])
    assert (
        problem.message
        == 'not valid TOML at line 1, column 15: the value is not TOML (text needs quotes: "…")'
    )
    assert problem.file == str(toml) and problem.fix == "fix line 1: description ="
    toml.unlink()
    assert _messages(validate([tasks_dir])) == ["task config missing"]


def test_malformed_registry(tmp_path: Path) -> None:
    (tmp_path / "registry.toml").write_text("[tasks.a]\npaht = 'a'\n")
    [problem] = validate([tmp_path])
    assert (problem.message, problem.fix) == (
        "unknown key 'tasks.a.paht'",
        "did you mean 'path'? ([tasks.a] takes: path)",
    )
    (tmp_path / "registry.toml").write_text("[tasks\n")
    [problem] = validate([tmp_path])
    assert "not valid TOML" in problem.message


def test_validate_one_unknown_task(tasks_dir: Path) -> None:
    with pytest.raises(TaskNotFoundError):
        validate([tasks_dir], "nope")


RULES_OK = """
[sources.m]
path = "data/m.csv"
timestamp = "ts"

[[rules]]
id = "hot"
kind = "threshold"
source = "m"
column = "v"
op = ">"
value = 5
"""


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("[[rules]\n", "not valid TOML"),
        (
            RULES_OK.replace('kind = "threshold"', 'kind = "magic"'),
            "rules[1 'hot']: kind 'magic' is not one of",
        ),
        (RULES_OK.replace('source = "m"', 'source = "x"'), "rule 'hot' uses unknown source 'x'"),
        (RULES_OK.replace('column = "v"', 'column = "w"'), "rule 'hot': source 'm' has no column 'w'"),
        (
            RULES_OK.replace("data/m.csv", "data/none.csv"),
            "source 'm': rules source 'data/none.csv' not found",
        ),
        (RULES_OK + RULES_OK[RULES_OK.index("[[rules]]") :], "rule id 'hot' is used more than once"),
        (
            RULES_OK.replace('timestamp = "ts"', 'timestamp = "time"'),
            "source 'm' has no timestamp column 'time'",
        ),
        (
            RULES_OK.replace('timestamp = "ts"\n', "")
            + '[[rules]]\nid = "g"\nkind = "time_gaps"\nsource = "m"\n'
            "max_gap_s = 60\n",
            "rule 'g' needs timestamps but source 'm' declares none",
        ),
    ],
)
def test_malformed_rules_file(tasks_dir: Path, rules: str, expected: str) -> None:
    (tasks_dir / "demo" / "data").mkdir()
    (tasks_dir / "demo" / "data" / "m.csv").write_text("ts,v\n2026-01-01T00:00:00+00:00,1\n")
    (tasks_dir / "demo" / "rules.toml").write_text(rules)
    problems = validate([tasks_dir])
    assert len(problems) == 1, problems
    assert expected in problems[0].message
    assert problems[0].file == str(tasks_dir / "demo" / "rules.toml")


def test_every_problem_at_once(tasks_dir: Path) -> None:
    (tasks_dir / "demo" / "planner.md").unlink()
    (tasks_dir / "demo" / "cassette.json").unlink()
    with (tasks_dir / "demo" / "task.toml").open("a") as handle:
        handle.write('\n[policy.Evaluator]\nwrite_files = "read-write"\n')
    with (tasks_dir / "registry.toml").open("a") as handle:
        handle.write("\n[tasks.ghost]\n")
    assert (
        len(validate([tasks_dir])) == 3
    )  # planner.md, policy, ghost (cassette only checked on a valid config)
    _edit(tasks_dir / "demo" / "task.toml", '[policy.Evaluator]\nwrite_files = "read-write"\n', "")
    assert len(validate([tasks_dir])) == 3  # planner.md, cassette, ghost


def test_scaffold_refuses_bad_and_taken_names(tasks_dir: Path) -> None:
    for bad in ("Demo", "1task", "my_task", "a--b", "-x", "x" * 41, ""):
        with pytest.raises(UserError, match="invalid task name"):
            scaffold_task(bad, tasks_dir)
    with pytest.raises(UserError, match="already registered"):
        scaffold_task("demo", tasks_dir)
    with pytest.raises(UserError, match="taken by a built-in task"):
        scaffold_task("code-delivery", tasks_dir)
    (tasks_dir / "orphan").mkdir()
    with pytest.raises(UserError, match="orphan already exists"):
        scaffold_task("orphan", tasks_dir)


def test_scaffold_appends_to_an_existing_registry(tasks_dir: Path) -> None:
    scaffold_task("second", tasks_dir)
    assert TaskRegistry.discover(tasks_dir).names() == [
        "code-change",
        "code-delivery",
        "demo",
        "humaneval",
        "incident-review",
        "package-steps",
        "second",
    ]
    assert (tasks_dir / "registry.toml").read_text().count("[tasks.") == 2
    assert validate([tasks_dir]) == []


def test_scaffold_cassette_writes_what_its_check_accepts(tasks_dir: Path, tmp_path: Path) -> None:
    task = TaskRegistry.discover(tasks_dir).get("demo")
    turns = json.loads(task.cassette_path.read_text())["turns"]  # type: ignore[union-attr]
    assert [t["role"] for t in turns] == ["Planner", "Specialist", "Specialist", "Evaluator", "Evaluator"]
    path, content = re.search(
        r'<parameter name="path">(.*?)</parameter>\s*<parameter name="content">(.*?)</parameter>',
        turns[1]["content"],
        re.S,
    ).groups()  # type: ignore[union-attr]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    check = task.resolved_checks(task.dir)["result"]
    failing = subprocess.run(check, shell=True, cwd=workspace, capture_output=True, text=True)
    assert failing.returncode == 1 and "result.md: missing" in failing.stderr
    (workspace / path).write_text(content)
    passing = subprocess.run(check, shell=True, cwd=workspace, capture_output=True, text=True)
    assert passing.returncode == 0, passing.stderr
    assert passing.stdout == "result.md ok: heading and 3 bullets\n"
    assert sys.executable in check
