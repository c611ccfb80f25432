"""`pse` starts without loading what a command does not use: importing `pse.cli` loads no command,
`--version` and `--help` load no command module, and the reading commands never load AutoGen, the
runner, the engine or a model provider. Each check runs a fresh interpreter (the test process has
loaded everything already). `make bench` times the same commands as whole processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pse.cli._app import COMMANDS, Command, _loaded
from pse.cli._help import _reflowed

_HEAVY = (
    "autogen_core",
    "autogen_agentchat",
    "autogen_ext",
    "openai",
    "pse.runner",
    "pse.engine",
    "pse.team",
)
_PROBE = """
import json, sys
sys.argv = ["pse", *json.loads(sys.argv[1])]
try:
    from pse.cli import main
    {call}
except SystemExit:
    pass
heavy = {heavy!r}
print(json.dumps(sorted({{m.split(".")[0] if not m.startswith("pse.") else ".".join(m.split(".")[:2])
                        for m in sys.modules if m.startswith(heavy)}})), file=sys.stderr)
"""


def _loaded_after(
    args: list[str], tmp_path: Path, *, call: str = "main()", heavy: tuple[str, ...] = _HEAVY
) -> list[str]:
    """The heavy packages a fresh interpreter holds after `pse ARGS` (run in `tmp_path`)."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE.format(call=call, heavy=heavy), json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    loaded: list[str] = json.loads(result.stderr.strip().splitlines()[-1])
    return loaded


def test_importing_pse_cli_loads_no_command(tmp_path: Path) -> None:
    probe = (
        "import sys; import pse.cli; print(sorted(m for m in sys.modules if m.startswith(('typer', 'pse.'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout == "['pse.cli', 'pse.exceptions']\n"


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_version_and_help_load_no_command_module(args: list[str], tmp_path: Path) -> None:
    assert _loaded_after(args, tmp_path) == []


@pytest.mark.parametrize("args", [["trace", "list"], ["stats"], ["stats", "--json"], ["trace", "--help"]])
def test_reading_commands_load_neither_autogen_nor_the_runner(args: list[str], tmp_path: Path) -> None:
    assert (
        _loaded_after(
            [*args, "--runs-dir", str(tmp_path / "runs")] if args[-1] != "--help" else args, tmp_path
        )
        == []
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args", [["trace", "list"], ["stats"], ["stats", "--json"]])
def test_reading_commands_read_the_run_store_without_sqlalchemy(args: list[str], tmp_path: Path) -> None:
    """SQLAlchemy was the largest import of `pse trace list` and `pse stats` (~160 ms): an embedded store
    in step with its folder is read with the standard library's sqlite3, and what is listed is the
    store's rows."""
    from pse.config import Settings
    from pse.store import close_stores, open_store
    from pse.trace import Trace, write_trace

    runs = tmp_path / "runs"
    for i in range(3):
        trace = Trace(
            run_id=f"run-{i}", task="t", started_at=f"2026-01-01T10:0{i}:00+00:00", outcome="PASSED"
        )
        write_trace(trace, runs / trace.run_id)
    open_store(Settings(runs_dir=runs)).sync(runs)  # the store as the runs left it
    close_stores()
    (runs / "run-1" / "trace.json").unlink()  # the store still has its row; the folder is not a run now
    (runs / "run-1").rmdir()
    assert _loaded_after([*args, "--runs-dir", str(runs)], tmp_path, heavy=("sqlalchemy",)) == ["sqlalchemy"]
    # the store synced (it dropped run-1's row); from now on it is read without SQLAlchemy
    assert _loaded_after([*args, "--runs-dir", str(runs)], tmp_path, heavy=("sqlalchemy", *_HEAVY)) == []
    run_pse = "import sys; from pse.cli import main; sys.argv[0] = 'pse'; main()"
    shown = subprocess.run(
        [sys.executable, "-c", run_pse, *args, "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
        env={**os.environ, "COLUMNS": "120"},
    ).stdout
    if args == ["trace", "list"]:
        assert [line.split()[0] for line in shown.splitlines() if line.strip().startswith("run-")] == [
            "run-2",
            "run-0",
        ]
    elif args == ["stats", "--json"]:
        assert json.loads(shown)["runs"] == 2


def _commands(table: tuple[Command, ...], prefix: str = "") -> list[tuple[str, Command]]:
    found: list[tuple[str, Command]] = []
    for command in table:
        found.append((prefix + command.name, command))
        found += _commands(command.commands, f"{prefix}{command.name} ")
    return found


@pytest.mark.parametrize(
    ("path", "command"), _commands(COMMANDS), ids=lambda v: v if isinstance(v, str) else ""
)
def test_each_summary_is_the_first_paragraph_of_its_commands_help(path: str, command: Command) -> None:
    real = _loaded(command)
    assert command.summary == _reflowed(real.help or "").split("\n\n")[0], path


def test_a_slow_model_load_is_announced_in_one_line_with_its_last_measured_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from pse import _notice
    from pse.knowledge import _minilm

    loads: list[str] = []

    def fake_import(name: str) -> object:  # the Hugging Face stack, without loading torch
        loads.append(name)
        if name == "transformers":
            return SimpleNamespace(logging=SimpleNamespace(disable_progress_bar=lambda: None))
        return SimpleNamespace(SentenceTransformer=lambda *args, **kwargs: "model")

    said: list[str] = []
    monkeypatch.setattr(_minilm, "minilm_missing", lambda: None)
    monkeypatch.setattr(_minilm, "model_dir", lambda root: tmp_path)
    monkeypatch.setattr(_minilm.importlib, "import_module", fake_import)
    monkeypatch.setattr(_notice, "_sink", said.append)
    embedder = _minilm.MiniLMEmbedder()
    assert embedder._loaded() == "model" and embedder._loaded() == "model"  # loaded, and announced, once
    assert said == ["loading the embedding model (first use, ~10 s)…"]
    (tmp_path / ".load_seconds").write_text("6.4\n")  # what the load measured on a slower day
    _minilm.MiniLMEmbedder()._loaded()
    assert said[1:] == ["loading the embedding model (first use, ~6 s)…"]
    assert loads == ["transformers", "sentence_transformers"] * 2


@pytest.mark.parametrize("args", [["--help"], [], ["trace", "--help"], ["eval", "--help"]])
def test_a_groups_help_is_plain_and_whole_without_typers_rich_formatter(
    args: list[str], tmp_path: Path
) -> None:
    """A group's help is a list of its commands: click's plain layout prints it without importing typer's
    rich formatter, rich's Markdown and markdown-it (about 0.15 s of `pse --help`), and each summary is
    whole, wrapped (not cut at 45 characters)."""
    probe = (
        "import sys; sys.argv = ['pse', *sys.argv[1:]]\n"
        "from pse.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('typer.rich_utils', 'rich.markdown', 'markdown_it') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    help_text, _, loaded = result.stdout.rpartition("LOADED ")
    assert loaded.strip() == "[]"
    said = " ".join((help_text + result.stderr).split())  # `pse` alone prints its help on stderr
    group = (
        next(c for c in COMMANDS if c.name == args[0]).commands
        if args[:1] in (["trace"], ["eval"])
        else COMMANDS
    )
    for command in group:
        assert f"{command.name} {command.summary}" in said, command.name
    assert "..." not in said.replace("[ARGS]...", "")


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_pse_help_from_the_table_is_what_click_prints_for_the_group(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pse --help` is printed from the command table without typer; click's layout of the group (what
    `pse` alone and a mistyped option print) is the same text, at any width."""
    from pse.cli._app import main as through_typer
    from pse.cli._tree import root_help

    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(sys, "argv", ["pse", "--help"])
    with pytest.raises(SystemExit) as done:
        through_typer()
    assert done.value.code == 0
    assert capsys.readouterr().out == root_help()


def test_pse_help_loads_neither_typer_nor_rich(tmp_path: Path) -> None:
    probe = (
        "import sys; sys.argv = ['pse', '--help']\nfrom pse.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich')}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert result.stdout.splitlines()[-1] == "[]"
    assert result.stdout.startswith("Usage: pse [OPTIONS] COMMAND [ARGS]...\n")
