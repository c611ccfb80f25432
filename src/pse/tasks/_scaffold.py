"""`pse new NAME`: a small, valid task with a registry entry and a cassette that runs to PASSED."""

from __future__ import annotations

import json
from pathlib import Path

from pse.exceptions import UserError
from pse.roles import Role
from pse.tasks._config import TASK_NAME_RE
from pse.tasks._paths import builtin_tasks_dir
from pse.tasks._task import read_toml

__all__ = ["scaffold_task"]

_TASK_TOML = '''description = "{name}: write result.md with a title and a short list (scaffolded; edit me)."
goal = """
Write `result.md` in the workspace: a Markdown file whose first line is a level-1 heading naming the
task `{name}`, followed by at least three bullet lines.
"""
expected_outputs = ["result.md"]
required_checks = ["result"]
cassette = "cassette.json"

[checks]
result = "{{python}} {{task_dir}}/checks/check_result.py"

[report]
file = "result.md"
'''

_CHECK = '''"""Check of the scaffolded task: result.md starts with a level-1 heading and has 3+ bullets."""

import pathlib
import sys

path = pathlib.Path("result.md")
if not path.is_file():
    sys.exit("result.md: missing; write it in the workspace root")
lines = path.read_text(encoding="utf-8").splitlines()
problems = []
if not lines or not lines[0].startswith("# "):
    problems.append("result.md: the first line must be a level-1 heading ('# ...')")
bullets = [line for line in lines if line.startswith("- ")]
if len(bullets) < 3:
    problems.append(f"result.md: {len(bullets)} bullet line(s), want at least 3")
if problems:
    sys.exit("\\n".join(problems))
print(f"result.md ok: heading and {len(bullets)} bullets")
'''

_PROMPTS = {
    "planner.md": "## This task: {name}\n\nPlan one output, `result.md`; check `result` is a criterion.\n",
    "specialist.md": "## This task: {name}\n\nWrite `result.md` with `write_file`; keep it short.\n",
    "evaluator.md": "## This task: {name}\n\nRead `result.md` and run `run_check` with name `result`.\n",
}

_RESULT = "# {name}\n\n- scaffolded by `pse new`\n- written by the Specialist\n- checked by the Evaluator\n"


def _cassette(name: str) -> dict[str, object]:
    result = _RESULT.format(name=name)
    turns = [
        (
            Role.PLANNER,
            "<plan>\n  <goal>Write result.md: a level-1 heading naming the task, then three or more bullets"
            '</goal>\n  <step id="S1">Write result.md</step>\n'
            '  <criterion id="AC1">result.md starts with a level-1 heading naming the task</criterion>\n'
            '  <criterion id="AC2">result.md has at least three bullet lines</criterion>\n'
            '  <criterion id="AC3">the check result passes</criterion>\n'
            '  <output path="result.md"/>\n</plan>',
        ),
        (
            Role.SPECIALIST,
            '<tool_calls>\n<invoke name="write_file">\n<parameter name="path">result.md</parameter>\n'
            f'<parameter name="content">{result}</parameter>\n</invoke>\n</tool_calls>',
        ),
        (
            Role.SPECIALIST,
            "<report>\nArtifacts: result.md\nEvidence: write_file ok\nAssumptions: none\n"
            "Unresolved: none\n</report>",
        ),
        (
            Role.EVALUATOR,
            '<tool_calls>\n<invoke name="read_file">\n<parameter name="path">result.md</parameter>\n'
            '</invoke>\n<invoke name="run_check">\n<parameter name="name">result</parameter>\n'
            "</invoke>\n</tool_calls>",
        ),
        (
            Role.EVALUATOR,
            '<verdict status="PASS">\n  <reason_code>ALL_MET</reason_code>\n'
            f'  <criterion id="AC1" met="true">first line is "# {name}"</criterion>\n'
            '  <criterion id="AC2" met="true">3 bullet lines</criterion>\n'
            '  <criterion id="AC3" met="true">check result: result.md ok</criterion>\n'
            "  <summary>All 3 criteria met.</summary>\n</verdict>",
        ),
    ]
    return {"version": 1, "turns": [{"role": role, "content": content} for role, content in turns]}


def scaffold_task(name: str, tasks_dir: Path) -> Path:
    """Create `tasks_dir/NAME/` (prompts, task.toml, a check, a cassette) and its registry entry.

    Returns:
        The new task folder.

    Never writes into PSE's own tasks directory (a checkout's `tasks/`, run from the checkout's root):
    its `registry.toml` is PSE's, tracked with its source, not the user's.

    Raises:
        UserError: the name is invalid, taken by a built-in task, already registered, or its folder
            exists; or `tasks_dir` is PSE's own tasks directory.
    """
    if not TASK_NAME_RE.fullmatch(name) or len(name) > 40:
        raise UserError(
            f"invalid task name {name!r}: use lowercase letters, digits and single hyphens, starting with a "
            "letter, at most 40 characters (e.g. 'weekly-report')"
        )
    builtin = builtin_tasks_dir()
    if tasks_dir.resolve() == builtin.resolve():
        raise UserError(
            f"{tasks_dir} is PSE's own tasks directory (the built-in tasks, with PSE's registry.toml), not "
            "yours: pass --tasks-dir DIR or set PSE_TASKS_DIR to where your tasks live (e.g. "
            "--tasks-dir ~/pse-tasks), or run `pse new` from another folder (it writes to ./tasks there)"
        )
    if (builtin / name).exists():
        raise UserError(f"task name {name!r} is taken by a built-in task; choose another name")
    registry_file = tasks_dir / "registry.toml"
    if registry_file.is_file() and name in read_toml(registry_file).get("tasks", {}):
        raise UserError(f"task {name!r} is already registered in {registry_file}; choose another name")
    folder = tasks_dir / name
    if folder.exists():
        raise UserError(f"{folder} already exists; choose another name or remove the folder")
    (folder / "checks").mkdir(parents=True)
    (folder / "task.toml").write_text(_TASK_TOML.format(name=name), encoding="utf-8")
    (folder / "checks" / "check_result.py").write_text(_CHECK, encoding="utf-8")
    for filename, text in _PROMPTS.items():
        (folder / filename).write_text(text.format(name=name), encoding="utf-8")
    cassette = json.dumps(_cassette(name), indent=1, ensure_ascii=False) + "\n"
    (folder / "cassette.json").write_text(cassette, encoding="utf-8")
    existing = registry_file.read_text(encoding="utf-8") if registry_file.is_file() else ""
    separator = (
        "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
    )
    registry_file.write_text(f'{existing}{separator}[tasks.{name}]\npath = "{name}"\n', encoding="utf-8")
    return folder
