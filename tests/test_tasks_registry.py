"""The task registry: discovery, the user's tasks directory, task loading, messages, seeding, prompts, reports."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from pse.config import load_settings
from pse.exceptions import ConfigError, TaskNotFoundError, UnregisteredTasksWarning, UserError
from pse.runner import registry_for
from pse.tasks import (
    TaskRegistry,
    base_prompt,
    builtin_tasks_dir,
    extract_report,
    prompts_dir,
    protocol_prompt,
    scaffold_task,
    titled_report,
)

BUILTIN = ["code-change", "code-delivery", "humaneval", "incident-review", "package-steps"]


def test_discover_finds_the_builtin_tasks() -> None:
    registry = TaskRegistry.discover()
    assert registry.names() == BUILTIN
    assert registry.problems == []
    task = registry.get("code-delivery")
    assert task.dir == builtin_tasks_dir() / "code-delivery"
    assert task.builtin is True
    assert task.config.required_checks == ["pytest", "ruff"]
    assert registry.description("incident-review").startswith("Find the main cause")


def test_unknown_task_lists_the_available_ones() -> None:
    with pytest.raises(
        TaskNotFoundError,
        match=r"no task named 'nope'; available: code-change, code-delivery, humaneval, incident-review",
    ):
        TaskRegistry.discover().get("nope")


def test_extra_dir_adds_tasks_and_wins_on_a_name_clash(tmp_path: Path) -> None:
    scaffold_task("mine", tmp_path)
    # A user task named like a built-in replaces it (scaffold refuses that name, so build it by hand).
    clone = tmp_path / "code-delivery"
    (clone / "checks").mkdir(parents=True)
    for item in (tmp_path / "mine").iterdir():
        if item.is_file():
            (clone / item.name).write_text(item.read_text())
    (clone / "checks" / "check_result.py").write_text((tmp_path / "mine/checks/check_result.py").read_text())
    with (tmp_path / "registry.toml").open("a") as handle:
        handle.write('\n[tasks.code-delivery]\npath = "code-delivery"\n')
    registry = TaskRegistry.discover(tmp_path)
    assert registry.names() == sorted([*BUILTIN, "mine"])
    assert registry.get("code-delivery").dir == clone
    assert registry.shadowed["code-delivery"].dir == builtin_tasks_dir() / "code-delivery"
    assert registry.get("mine").builtin is False


def test_the_settings_decide_the_tasks_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scaffold_task("from-env", tmp_path)
    monkeypatch.setenv("PSE_TASKS_DIR", str(tmp_path))
    assert "from-env" in registry_for(load_settings()).names()
    assert "from-env" not in TaskRegistry.discover().names()  # the registry itself reads no environment
    assert "from-env" not in registry_for(load_settings(tasks_dir=builtin_tasks_dir())).names()


def _unregistered_copy(tasks_dir: Path, name: str = "code-delivery") -> Path:
    """A user's copy of a built-in task folder, without a registry.toml next to it."""
    folder = tasks_dir / name
    shutil.copytree(builtin_tasks_dir() / "code-delivery", folder)
    return folder


def test_an_unregistered_copy_of_a_builtin_is_a_warning_and_running_it_an_error(tmp_path: Path) -> None:
    folder = _unregistered_copy(Path("tasks"))  # ./tasks, the default nobody configured
    with pytest.warns(UnregisteredTasksWarning) as caught:
        registry = registry_for(load_settings())
    assert [str(w.message) for w in caught] == [
        f"tasks directory {folder.parent.resolve()} has no registry.toml, so its task folder(s) code-delivery "
        f"are not used: create {folder.parent.resolve() / 'registry.toml'} with one [tasks.NAME] table per "
        "folder, e.g. [tasks.code-delivery]"
    ]
    assert registry.get("incident-review").builtin  # another built-in is unaffected
    with pytest.raises(ConfigError) as info:
        registry.get("code-delivery")
    assert str(info.value) == (
        f"{folder.resolve()} is a task folder named 'code-delivery', but "
        f"{folder.parent.resolve() / 'registry.toml'} does not exist, so `code-delivery` would run the "
        "built-in task instead of yours: add [tasks.code-delivery] to "
        f"{folder.parent.resolve() / 'registry.toml'} to run yours, or rename or remove the folder to run "
        "the built-in one"
    )


def test_a_configured_directory_without_registry_warns_too(tmp_path: Path) -> None:
    _unregistered_copy(tmp_path, "mine")
    with pytest.warns(UnregisteredTasksWarning, match=rf"{tmp_path} has no registry.toml.*folder\(s\) mine"):
        registry = registry_for(load_settings(tasks_dir=tmp_path))
    assert registry.names() == BUILTIN
    with pytest.raises(TaskNotFoundError):
        registry.get("mine")


def test_a_registry_that_leaves_out_a_builtin_copy_refuses_it_without_a_warning(tmp_path: Path) -> None:
    scaffold_task("mine", tmp_path)
    _unregistered_copy(tmp_path)
    registry = TaskRegistry.discover(tmp_path)  # filterwarnings=error: any warning fails here
    assert registry.unregistered == {"code-delivery": tmp_path / "code-delivery"}
    with pytest.raises(
        ConfigError, match=r"registry.toml does not register it, so `code-delivery` would run"
    ):
        registry.get("code-delivery")


def test_a_dot_tasks_folder_of_something_else_is_left_alone() -> None:
    (Path("tasks") / "notes").mkdir(parents=True)
    (Path("tasks") / "todo.txt").write_text("not PSE's")
    registry = registry_for(load_settings())  # no warning, no problem
    assert (registry.names(), registry.problems, len(registry.dirs)) == (BUILTIN, [], 1)


def test_missing_extra_dir_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist; create it"):
        TaskRegistry.discover(tmp_path / "nowhere")


def test_get_refuses_an_invalid_task_and_lists_its_problems(tmp_path: Path) -> None:
    folder = scaffold_task("broken", tmp_path)
    (folder / "evaluator.md").unlink()
    with pytest.raises(
        ConfigError, match=r"(?s)task 'broken' is invalid:.*Evaluator prompt file missing.*pse validate"
    ):
        TaskRegistry.discover(tmp_path).get("broken")


def test_task_message_has_goal_outputs_checks_and_no_absolute_paths() -> None:
    registry = TaskRegistry.discover()
    message = registry.get("incident-review").task_message({"service": "payment-api"}, "# Rules summary\nx")
    assert message.startswith("# Task: incident-review\n\n## Goal\n")
    assert "- service: payment-api" in message
    assert "- incident_report.md\n- evidence_index.json" in message
    assert '- evidence_index: run_check(name="evidence_index")' in message
    assert "- data/gateway.jsonl" in message and "- rules_summary.md" in message
    assert message.endswith("## Rules summary (computed without a model)\n# Rules summary\nx\n")
    inputs = {
        "humaneval": {"PROBLEM": 'def f(x):\n    """Return x."""\n', "ENTRY_POINT": "f"},
        "code-change": {"REQUEST": "rename f to g"},
    }
    for name in BUILTIN:
        text = registry.get(name).task_message(inputs.get(name))
        assert str(builtin_tasks_dir()) not in text and sys.executable not in text
        assert not re.search(r"(^|\s)/[\w.-]+/", text), "absolute path in the task message"
        assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d", text), "a time in the task message"
        assert text == registry.get(name).task_message(inputs.get(name)), "the message must be deterministic"


def test_inputs_are_checked_and_defaulted() -> None:
    task = TaskRegistry.discover().get("incident-review")
    assert task.resolve_inputs() == {"service": "payment-api"}
    assert task.resolve_inputs({"service": "refund-api"}) == {"service": "refund-api"}
    with pytest.raises(
        UserError, match=r"^task 'incident-review' has no input window; its inputs are: service$"
    ):
        task.resolve_inputs({"window": "1h"})


def test_required_input_without_value_is_a_user_error(tmp_path: Path) -> None:
    folder = scaffold_task("needs-input", tmp_path)
    with (folder / "task.toml").open("a") as handle:
        handle.write('\n[inputs.topic]\ndescription = "what to write about"\nrequired = true\n')
    task = TaskRegistry.discover(tmp_path).get("needs-input")
    with pytest.raises(UserError, match=r"needs input .topic.*pass --input topic=VALUE"):
        task.task_message({})
    assert "- topic: cats" in task.task_message({"topic": "cats"})


def test_the_task_message_shows_inputs_raw_and_does_not_list_their_files() -> None:
    """A small model that read a JSON copy of the inputs copied its escaped text into the file it wrote
    (issue 29's HumanEval runs: `\\"\\"\\"` and `\\n` in solution.py); the message shows every input raw,
    and the inputs' own files (raw too) are not listed: a small model reads what is listed."""
    problem = 'def add(a, b):\n    """Sum."""\n'
    message = (
        TaskRegistry.discover().get("humaneval").task_message({"PROBLEM": problem, "ENTRY_POINT": "add"})
    )
    assert "inputs/" not in message and "inputs.json" not in message
    assert '```\ndef add(a, b):\n    """Sum."""\n```' in message and "- ENTRY_POINT: add" in message
    incident = TaskRegistry.discover().get("incident-review")
    message = incident.task_message({"service": "payment-api"})
    assert "inputs/" not in message and "- service: payment-api" in message
    assert "- data/metrics.csv" in message and "inputs/service" in incident.seed_listing()  # still seeded


def test_seed_workspace_copies_data_and_writes_inputs_and_rules_summary(tmp_path: Path) -> None:
    task = TaskRegistry.discover().get("incident-review")
    written = task.seed_workspace(tmp_path / "ws", {"service": "payment-api"})
    assert written == [
        "data/db_pool.csv", "data/gateway.jsonl", "data/metrics.csv", "data/releases.json",
        "evidence_index.schema.json", "inputs/service", "rules_summary.json", "rules_summary.md",
    ]  # fmt: skip
    assert all((tmp_path / "ws" / path).is_file() for path in written)
    assert not (tmp_path / "ws" / "data" / "generate.py").exists(), (
        "the generator tells the story: not seeded"
    )
    assert (tmp_path / "ws" / "inputs" / "service").read_text() == "payment-api"  # raw, no escaping
    assert (tmp_path / "ws" / "data" / "metrics.csv").read_bytes() == (
        task.dir / "data/metrics.csv"
    ).read_bytes()
    delivery = TaskRegistry.discover().get("code-delivery")
    assert delivery.seed_workspace(tmp_path / "ws2") == ["test_acceptance.py"]  # its own acceptance tests
    assert (tmp_path / "ws2" / "test_acceptance.py").read_bytes() == (
        delivery.dir / "test_acceptance.py"
    ).read_bytes()


def test_resolved_checks_fill_and_quote_placeholders(tmp_path: Path) -> None:
    folder = scaffold_task("spaced", tmp_path / "dir with space")
    task = TaskRegistry.discover(tmp_path / "dir with space").get("spaced")
    assert task.resolved_checks() == {"result": f"{sys.executable} -I {{task_dir}}/checks/check_result.py"}
    assert task.resolved_checks(folder) == {
        "result": f"{sys.executable} -I '{folder}'/checks/check_result.py"
    }


def test_prompts_teach_the_protocol_and_compose_in_order() -> None:
    assert (prompts_dir() / "protocol.md").is_file()
    protocol = protocol_prompt()
    # Formats are taught with placeholders a small model cannot mistake for values (issue 29).
    assert '<invoke name="TOOL">' in protocol and '<blocked reason_code="REASON_CODE">' in protocol
    assert '<criterion id="AC1">' in base_prompt("Planner") and "<plan>" in base_prompt("planner")
    assert '<verdict status="STATUS">' in base_prompt("Evaluator")
    assert "<report>" in base_prompt("Specialist")
    task = TaskRegistry.discover().get("code-delivery")
    system = task.system_prompt("Evaluator")
    assert system.index("# PSE protocol") < system.index("# Role: Evaluator") < system.index("## This task")
    with pytest.raises(ValueError, match="unknown role 'Judge'"):
        base_prompt("Judge")


def test_extract_report_from_a_workspace_file(tmp_path: Path) -> None:
    task = TaskRegistry.discover().get("incident-review")
    assert extract_report(task, tmp_path, "<report>ignored</report>") is None
    (tmp_path / "incident_report.md").write_text("# Review\n\nbody\n\n")
    assert extract_report(task, tmp_path, None) == "# Review\n\nbody\n"


def test_extract_report_from_a_tagged_section() -> None:
    task = TaskRegistry.discover().get("code-delivery")
    message = "Intro <report>first</report> then <report>\nArtifacts: quicksort.py\n</report> bye"
    assert extract_report(task, Path("."), message) == "Artifacts: quicksort.py\n"
    assert extract_report(task, Path("."), "no tags here") is None
    assert extract_report(task, Path("."), "<report>  </report>") is None
    assert extract_report(task, Path("."), None) is None


def test_a_tagged_report_is_titled_with_its_task_outcome_run_and_why() -> None:
    titled = titled_report(
        "Artifacts: quicksort.py\n",
        task="code-delivery",
        run_id="r1",
        outcome="ESCALATED",
        reason="PARTIAL (TESTS_FAILING)\n with every retry used",
        why="cycle 1: Evaluator PARTIAL → ESCALATED",
    )
    assert titled == (
        "# code-delivery: ESCALATED\n\n- run: `r1`\n- outcome: ESCALATED — PARTIAL (TESTS_FAILING) with every "
        "retry used\n- why: cycle 1: Evaluator PARTIAL → ESCALATED\n\n## The Specialist's last report\n\n"
        "Artifacts: quicksort.py\n"
    )
    bare = titled_report("x", task="t", run_id="r", outcome="AWAITING_APPROVAL", reason=" ", why="")
    assert bare.splitlines()[:4] == [
        "# t: AWAITING_APPROVAL",
        "",
        "- run: `r`",
        "- outcome: AWAITING_APPROVAL",
    ]


def test_extract_report_refuses_a_file_outside_the_workspace(tmp_path: Path) -> None:
    folder = scaffold_task("escape", tmp_path / "tasks")
    toml = (folder / "task.toml").read_text().replace('file = "result.md"', 'file = "link.md"')
    (folder / "task.toml").write_text(toml)
    task = TaskRegistry.discover(tmp_path / "tasks").get("escape")
    (tmp_path / "secret.md").write_text("secret")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link.md").symlink_to(tmp_path / "secret.md")
    assert extract_report(task, workspace, None) is None


def test_a_task_that_gives_no_tests_holds_its_evaluator_to_tests_of_its_own(tmp_path: Path) -> None:
    """`[verification] independent_tests` unset: on where pytest is required and the task gives no tests
    (held-out merge-intervals passed on the Specialist's one test, over a `merge` that sorts its caller's
    list in place); off where the task's or a repository's tests are the evidence, or it runs in steps."""
    from types import SimpleNamespace
    from typing import Any

    from pse.runner import own_tests
    from pse.tasks import TaskConfig

    def task(**config: object) -> Any:  # own_tests reads a task's config alone
        fields = {"description": "d", "goal": "Write m.py and its tests.", "required_checks": ["pytest"]}
        return SimpleNamespace(config=TaskConfig.model_validate({**fields, **config}))

    assert own_tests(task()) is True
    assert own_tests(task(verification={"independent_tests": False})) is False
    assert own_tests(task(required_checks=["ruff"])) is False
    assert own_tests(task(required_checks=["ruff"], verification={"independent_tests": True})) is True
    assert own_tests(task(execution="steps")) is False
    assert own_tests(task(), repository=True) is False
    (tmp_path / "pkg").mkdir()
    (tmp_path / "m.py").write_text("x = 1\n")
    assert own_tests(task(), tmp_path) is True
    (tmp_path / "pkg" / "test_m.py").write_text("def test_x():\n    pass\n")
    assert own_tests(task(), tmp_path) is False  # an instance's files hold a test
    for seeded in (["test_acceptance.py"], ["data"], ["tests/"]):
        assert own_tests(task(seed=seeded)) is False, seeded
