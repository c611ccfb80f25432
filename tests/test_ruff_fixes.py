"""write_file applies ruff's safe fixes to a Python file when the task requires ruff (`[verification] ruff_fix`).

Real ruff in the real sandbox, in both modes: the file on disk is fixed, the record keeps what the role
sent and names the codes, the configuration is the one `run_ruff` uses (the task's, never a role's), and
nothing else (other areas, other files, a fix that would not parse) is touched.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pse.config import Settings
from pse.protocol import render_tool_calls
from pse.runner import prepare_run, run_to_end
from pse.sandbox import bwrap_problem
from pse.toolagent import Policy, ToolExecutor

BWRAP_MISSING = bwrap_problem()
MODES = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"no bwrap: {BWRAP_MISSING}")
    ),
    "fallback",
]
ROOT = Path(__file__).resolve().parents[1]
UNUSED = 'import os\nimport sys\n\n\ndef name():\n    return f"quicksort"\n'
"""Two unused imports (F401) and an f-string without placeholders (F541): all three fixes are safe."""
CLEAN = 'def name():\n    return "quicksort"\n'


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _write(tmp_path: Path, mode: str, path: str, content: str, **executor: object) -> tuple[dict, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    settings = Settings(sandbox=mode)  # type: ignore[arg-type]
    ex = ToolExecutor(work, settings, Policy.default(settings), **executor)  # type: ignore[arg-type]
    record = ex.execute_sync(
        "Specialist", render_tool_calls([("write_file", {"path": path, "content": content})])
    )
    only = record.records[0]
    assert only.status == "ok", only.output
    return {"output": only.output, "facts": only.facts, "arguments": only.arguments}, work


def test_safe_fixes_are_applied_and_named_and_the_record_keeps_what_was_sent(
    tmp_path: Path, mode: str
) -> None:
    record, work = _write(tmp_path, mode, "name.py", UNUSED, ruff_fixes=True)
    assert (work / "name.py").read_text() == "\n\n" + CLEAN  # ruff removes the imports, not the blank lines
    assert record["facts"]["ruff_fixed"] == ["F401", "F541"]
    assert record["arguments"]["content"] == UNUSED  # the audit keeps the role's own text
    assert "note: ruff applied its safe fixes (F401, F541) to the file" in record["output"]


def test_a_clean_file_is_written_as_sent_with_no_fix_named(tmp_path: Path, mode: str) -> None:
    record, work = _write(tmp_path, mode, "name.py", CLEAN, ruff_fixes=True)
    assert (work / "name.py").read_text() == CLEAN
    assert "ruff_fixed" not in record["facts"] and "ruff applied" not in record["output"]


def test_without_the_setting_nothing_is_fixed(tmp_path: Path, mode: str) -> None:
    record, work = _write(tmp_path, mode, "name.py", UNUSED)
    assert (work / "name.py").read_text() == UNUSED
    assert "ruff_fixed" not in record["facts"]


def test_a_file_that_is_not_python_is_not_given_to_ruff(tmp_path: Path, mode: str) -> None:
    record, work = _write(tmp_path, mode, "notes.md", UNUSED, ruff_fixes=True)
    assert (work / "notes.md").read_text() == UNUSED and "ruff_fixed" not in record["facts"]


def test_a_file_that_does_not_parse_is_left_as_sent(tmp_path: Path, mode: str) -> None:
    broken = "import os\n\ndef name(:\n    return 1\n"
    record, work = _write(tmp_path, mode, "name.py", broken, ruff_fixes=True)
    assert (work / "name.py").read_text() == broken and "ruff_fixed" not in record["facts"]


def test_the_tasks_ruff_configuration_is_used_and_a_roles_is_not(tmp_path: Path, mode: str) -> None:
    unsorted = "import sys\nimport os\n\nprint(os.sep, sys.argv)\n"
    resorted = "import os\nimport sys\n\nprint(os.sep, sys.argv)\n"
    only_pyflakes = '[lint]\nselect = ["F"]\n'  # no isort rule (I001 is one of ruff's defaults)
    work = tmp_path / "work"
    work.mkdir()
    (work / "ruff.toml").write_text(only_pyflakes)  # the task's own, declared
    record, _ = _write(tmp_path, mode, "kept.py", unsorted, ruff_fixes=True, check_config=["ruff.toml"])
    assert (work / "kept.py").read_text() == unsorted and "ruff_fixed" not in record["facts"]
    # A role cannot bring that configuration: its write is refused, and ruff keeps its defaults.
    (work / "ruff.toml").unlink()
    settings = Settings(sandbox=mode)  # type: ignore[arg-type]
    ex = ToolExecutor(work, settings, Policy.default(settings), ruff_fixes=True)
    records = ex.execute_sync(
        "Specialist",
        render_tool_calls(
            [
                ("write_file", {"path": "ruff.toml", "content": only_pyflakes}),
                ("write_file", {"path": "fixed.py", "content": unsorted}),
            ]
        ),
    ).records
    assert records[0].status == "denied" and not (work / "ruff.toml").exists()
    assert (work / "fixed.py").read_text() == resorted and records[1].facts["ruff_fixed"] == ["I001"]


def test_a_run_records_the_fix_and_the_evaluators_ruff_passes_on_the_fixed_file(
    tmp_path: Path, mode: str
) -> None:
    demo = json.loads((ROOT / "tasks" / "code-delivery" / "cassette.json").read_text())["turns"]
    files = {"quicksort.py": "import os\n" + _fixed_quicksort(), "test_quicksort.py": _demo_tests()}
    turns = [
        demo[0],
        {
            "role": "Specialist",
            "content": render_tool_calls(
                [("write_file", {"path": p, "content": c}) for p, c in files.items()]
            ),
        },
        {"role": "Specialist", "content": "<report>Artifacts: quicksort.py, test_quicksort.py</report>"},
        {
            "role": "Evaluator",
            "content": render_tool_calls([("run_pytest", {"target": "."}), ("run_ruff", {})]),
        },
        demo[8],
    ]
    cassette = tmp_path / "fix.json"
    cassette.write_text(json.dumps({"turns": turns}))
    settings = Settings(
        provider="scripted", cassette=cassette, runs_dir=tmp_path / "runs", sandbox=mode,
        max_partial_retries=0, max_fail_retries=0, replay_strict=False,
    )  # type: ignore[arg-type]  # fmt: skip
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    trace = json.loads(Path(summary.trace).read_text())
    calls = trace["cycles"][0]["tool_calls"]
    written = next(c for c in calls if c["tool"] == "write_file" and c["arguments"]["path"] == "quicksort.py")
    assert "F401" in written["facts"]["ruff_fixed"]
    ruff = [c for c in calls if c["tool"] == "run_ruff"][-1]
    assert ruff["status"] == "ok" and ruff["facts"]["findings"] == 0
    assert not (Path(summary.trace).parent / "workspace" / "quicksort.py").read_text().startswith("import os")


def _demo_files() -> dict[str, str]:
    from pse.protocol import ToolCall, parse_tool_calls
    from pse.tools import builtin_tools

    demo = json.loads((ROOT / "tasks" / "code-delivery" / "cassette.json").read_text())["turns"]
    calls = parse_tool_calls(demo[1]["content"], {s.name: s.signature for s in builtin_tools()}).items
    return {c.arguments["path"]: c.arguments["content"] for c in calls if isinstance(c, ToolCall)}


def _fixed_quicksort() -> str:
    return (
        _demo_files()["quicksort.py"]
        .replace("larger = [", "equal = [i for i in items if i == pivot]\n    larger = [")
        .replace("pivot, *quicksort(larger)", "*equal, *quicksort(larger)")
    )


def _demo_tests() -> str:
    return _demo_files()["test_quicksort.py"]
