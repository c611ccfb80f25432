"""MCP servers in a whole run and in `task.toml`: a task declares a server, a run starts it in the
sandbox, offers a role only what it is granted, audits every call in the trace and stops the server at
the end; `pse validate` and a run refuse the same mistakes, with the same message."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_support import SERVER_DIR
from pse.config import load_settings
from pse.exceptions import ConfigError
from pse.protocol import render_tool_calls
from pse.runner import PreparedRun, prepare_run, run_to_end
from pse.tasks import TaskConfig, TaskRegistry, validate

TASK = "mcp-demo"
SERVER = """
[mcp.notes]
command = ["{python}", "{task_dir}/servers/notes_server.py"]
env = { NOTES_LANG = "en" }

[policy.Specialist]
"mcp.notes.add" = "read-only"
"""


def _task(tmp_path: Path, extra: str = SERVER) -> Path:
    """TMP/tasks/mcp-demo: the code-delivery demo with the notes server, its Specialist granted `add`;
    the cassette's Specialist calls add (granted) and echo (not) in its first tool_calls message."""
    tasks = tmp_path / "tasks"
    demo = TaskRegistry.discover(None).get("code-delivery")
    folder = tasks / TASK
    shutil.copytree(demo.dir, folder)
    (folder / "servers").mkdir()
    shutil.copy(SERVER_DIR / "notes_server.py", folder / "servers" / "notes_server.py")
    with (folder / "task.toml").open("a", encoding="utf-8") as toml:
        toml.write(extra)
    (tasks / "registry.toml").write_text(f'[tasks.{TASK}]\npath = "{TASK}"\n')
    turns = json.loads((folder / "cassette.json").read_text())["turns"]
    block = render_tool_calls([("mcp.notes.add", {"a": "2", "b": "40"}), ("mcp.notes.echo", {"text": "hi"})])
    invokes = block.split("<tool_calls>", 1)[1].rsplit("</tool_calls>", 1)[0].lstrip("\n")
    first = turns[1]["content"]
    assert turns[1]["role"] == "Specialist" and "</tool_calls>" in first
    cut = first.rindex("</tool_calls>")
    turns[1] = {**turns[1], "content": first[:cut] + invokes + first[cut:]}
    (folder / "cassette.json").write_text(json.dumps({"version": 1, "turns": turns}))
    return tasks


@pytest.mark.parametrize("mode", ["bwrap", "fallback"])
def test_a_run_offers_audits_and_stops_an_mcp_server(tmp_path: Path, mode: str) -> None:
    from mcp_support import BWRAP_MISSING

    if mode == "bwrap" and BWRAP_MISSING is not None:
        pytest.skip(BWRAP_MISSING)
    settings = load_settings(runs_dir=tmp_path / "runs", tasks_dir=_task(tmp_path), sandbox=mode)
    prepared: list[PreparedRun] = []

    async def run() -> Any:
        prepared.append(prepare_run(TASK, settings))
        return await run_to_end(prepared[0])

    summary = asyncio.run(run())
    assert summary.outcome == "PASSED"  # the demo's outcome: the server changed nothing else
    trace = json.loads((settings.runs_dir / summary.run_id / "trace.json").read_text())
    mcp_calls = [c for cycle in trace["cycles"] for c in cycle["tool_calls"] if c["tool"].startswith("mcp.")]
    assert [(c["requester"], c["tool"], c["decision"], c["rule"], c["status"], c["output"]) for c in mcp_calls] == [
        ("Specialist", "mcp.notes.add", "allowed", "task.Specialist.mcp.notes.add", "ok", "42"),
        ("Specialist", "mcp.notes.echo", "denied", "policy.default_deny", "denied",
         "Specialist may not call mcp.notes.echo (policy: policy.default_deny)"),
    ]  # fmt: skip
    assert mcp_calls[0]["sandbox"] == ("bwrap-ro" if mode == "bwrap" else "fallback-copy")
    system = {role.name: role.system_message for role in prepared[0].engine.setup.team.roles}
    assert (
        "## MCP tools" in system["Specialist"]
        and "- mcp.notes.add(a, b='2') — [MCP server notes" in system["Specialist"]
    )
    assert "mcp.notes" not in system["Planner"] and "## MCP tools" not in system["Evaluator"]
    setup = prepared[0].mcp
    assert setup is not None
    process = setup.servers.connections["notes"].process
    assert process is not None and process.poll() is not None  # stopped when the run ended


def test_a_run_without_mcp_starts_no_server_and_its_prompts_are_unchanged(tmp_path: Path) -> None:
    settings = load_settings(runs_dir=tmp_path / "runs")
    prepared = prepare_run("code-delivery", settings)
    try:
        assert prepared.mcp is None
        assert all("MCP" not in role.system_message for role in prepared.engine.setup.team.roles)
    finally:
        asyncio.run(run_to_end(prepared))


def _problems(tmp_path: Path, extra: str) -> list[str]:
    tasks = _task(tmp_path, extra)
    return [f"{p.message} | fix: {p.fix}" for p in validate([tasks], TASK)]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            '\n[policy.Specialist]\n"mcp.notes.add" = "read-only"\n',
            "policy.Specialist.mcp.notes.add: no MCP server 'notes' is declared | fix: declare [mcp.notes] "
            "or fix the name; declared: none",
        ),
        (
            SERVER.replace('"read-only"', '"read-write"'),
            "policy.Specialist.mcp.notes.add: MCP server notes sees the workspace read-only at most | fix: use "
            'mode "read-only", or give [mcp.notes] workspace = "read-write"',
        ),
        (
            '\n[mcp.web]\ncommand = ["srv"]\nnetwork = true\n',
            "mcp.web: the server needs the network and the task does not allow it | fix: allow it with [sandbox] "
            'network = ["web"], or drop network = true',
        ),
        (
            '\n[mcp.notes]\ncommand = ["{python}", "{task_dir}/servers/gone.py"]\n',
            "MCP server 'notes' runs servers/gone.py, which does not exist",
        ),
        (
            '\n[mcp."bad.name"]\ncommand = ["x"]\n',
            "mcp: Value error, MCP server name 'bad.name' must start with a letter",
        ),
        (
            '\n[mcp.notes]\ncommand = ["x"]\nworkspace = "all"\n',
            "mcp.notes.workspace: 'all' is not one of none, read-only, read-write | fix: use one of: none, read-only, read-write",
        ),
        (
            '\n[policy.Specialist]\n"mcp.notes" = "read-only"\n',
            "policy.Specialist.mcp.notes: 'mcp.notes' is no MCP tool name | fix: write mcp.SERVER.TOOL or "
            "mcp.SERVER.* (SERVER as in [mcp.SERVER] of task.toml)",
        ),
    ],
)
def test_validate_names_each_mistake_with_its_fix(tmp_path: Path, extra: str, expected: str) -> None:
    found = _problems(tmp_path, extra)
    assert any(line.startswith(expected) for line in found), found


def test_a_run_refuses_what_validate_refuses(tmp_path: Path) -> None:
    tasks = _task(tmp_path, SERVER.replace('"read-only"', '"read-write"'))
    settings = load_settings(runs_dir=tmp_path / "runs", tasks_dir=tasks)
    with pytest.raises(
        ConfigError, match=r"policy\.Specialist\.mcp\.notes\.add: MCP server notes sees the workspace"
    ):
        prepare_run(TASK, settings)


def test_without_the_sdk_a_task_with_mcp_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` fails, find_spec finds nothing
    tasks = _task(tmp_path)
    assert any("pip install 'pse[mcp]'" in line for line in _problems(tmp_path / "again", SERVER))
    with pytest.raises(ConfigError, match=r"pip install 'pse\[mcp\]'"):
        prepare_run(TASK, load_settings(runs_dir=tmp_path / "runs", tasks_dir=tasks))
    config = {"description": "d", "goal": "g"}
    assert TaskConfig.model_validate(config).mcp == {}  # a task without servers needs no SDK


ROOT = Path(__file__).resolve().parents[1]


def _section(text: str, heading: str) -> str:
    return text[text.index(heading) :].split("\n## ", 1)[0]


README_MCP = _section((ROOT / "README.md").read_text(encoding="utf-8"), "## MCP tools")
TOOLS_MCP = _section((ROOT / "docs" / "tools.md").read_text(encoding="utf-8"), "## MCP tools")


@pytest.mark.parametrize("doc", [README_MCP, TOOLS_MCP], ids=["README", "docs/tools.md"])
def test_the_documented_example_works_as_written(tmp_path: Path, doc: str) -> None:
    server = re.findall(r"```python\n(.*?)```", README_MCP, re.S)[0]
    toml = re.findall(r"```toml\n(.*?)```", doc, re.S)[0]
    tasks = tmp_path / "tasks"
    folder = tasks / "notes-demo"
    shutil.copytree(TaskRegistry.discover(None).get("code-delivery").dir, folder)
    (folder / "servers").mkdir()
    (folder / "servers" / "notes.py").write_text(server)
    with (folder / "task.toml").open("a", encoding="utf-8") as handle:
        handle.write("\n" + toml)
    (tasks / "registry.toml").write_text('[tasks.notes-demo]\npath = "notes-demo"\n')
    assert validate([tasks], "notes-demo") == []
    settings = load_settings(runs_dir=tmp_path / "runs", tasks_dir=tasks, sandbox="fallback")
    prepared = prepare_run("notes-demo", settings)
    try:
        tools: Any = prepared.engine.setup.tools
        request = render_tool_calls([("mcp.notes.search", {"word": "ru"})])
        answer = tools.execute_sync("Specialist", request).text
        denied = tools.execute_sync("Planner", request).records[0]
    finally:
        assert prepared.mcp is not None
        prepared.mcp.servers.stop()
    assert '<result index="1" name="mcp.notes.search" status="ok">ruff is a linter</result>' in answer
    assert (denied.status, denied.rule) == ("denied", "policy.default_deny")
