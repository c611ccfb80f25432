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
    args: list[str],
    tmp_path: Path,
    *,
    call: str = "main()",
    heavy: tuple[str, ...] = _HEAVY,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The heavy packages a fresh interpreter holds after `pse ARGS` (run in `tmp_path`)."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE.format(call=call, heavy=heavy), json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
        env=env,
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


def _unconfigured() -> dict[str, str]:
    """This process's environment without a variable the settings model reads (conftest sets one)."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith(("PSE_", "OPENAI_"))}


@pytest.mark.parametrize("args", [["trace", "list"], ["stats"], ["stats", "--json"]])
def test_reading_commands_without_configuration_load_no_settings_model(
    args: list[str], tmp_path: Path
) -> None:
    """With nothing configured but the runs folder, `trace list` and `stats` read it without
    pydantic-settings or `pse.config` (about 0.1 s of their start-up), and without AutoGen or the runner."""
    heavy = (*_HEAVY, "pydantic_settings", "pse.config")
    env = {**_unconfigured(), "OPENAI_API_KEY": "sk-test", "PSE_LOG_LEVEL": "INFO"}
    assert _loaded_after([*args, "--runs-dir", str(tmp_path / "runs")], tmp_path, heavy=heavy, env=env) == []
    env["PSE_RUNS_DIR"] = str(tmp_path / "runs")
    assert _loaded_after(args, tmp_path, heavy=heavy, env=env) == []
    assert not (tmp_path / "runs").exists()


_PSE = """
import sys
through_the_model = sys.argv.pop(1) == "model"
sys.argv[0] = "pse"
if through_the_model:  # what the commands did before they read plain settings without the model
    import pse.cli._reading as reading
    reading.plain_settings = lambda runs_dir: None
from pse.cli import main
try:
    main()
finally:
    print("MODEL" if "pydantic_settings" in sys.modules else "PLAIN", file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("variables", "dotenv", "path"),
    [
        ({}, None, "PLAIN"),
        ({"PSE_RUNS_DIR": "{runs}", "PSE_LOG_LEVEL": "DEBUG", "OPENAI_BASE_URL": "no url"}, None, "PLAIN"),
        ({"PSE_RUNS_DIR": "{runs}/nowhere"}, None, "PLAIN"),
        ({"PSE_RUNS_DIR": "{runs}", "PSE_LOG_LEVEL": "verbose"}, None, "MODEL"),
        ({"PSE_RUNS_DIRR": "{runs}"}, None, "MODEL"),
        ({"pse_runs_dir": "{runs}"}, None, "MODEL"),
        ({"PSE_RUNS_DIR": ""}, None, "MODEL"),
        ({"PSE_RUNS_DIR": "{runs}", "PSE_PROVIDER": "nonsense"}, None, "MODEL"),
        ({}, "PSE_RUNS_DIR={runs}\n", "MODEL"),
    ],
)
@pytest.mark.parametrize("args", [["trace", "list"], ["stats"]])
def test_reading_commands_say_what_the_settings_model_would(
    args: list[str], variables: dict[str, str], dotenv: str | None, path: str, tmp_path: Path
) -> None:
    """Output, warnings and exit code are those of loading the settings model, in every environment:
    read without it only when the model would neither refuse nor warn of anything."""
    runs, cwd = _runs_with_store(tmp_path), tmp_path / "cwd"
    cwd.mkdir()
    if dotenv is not None:
        (cwd / ".env").write_text(dotenv.format(runs=runs))
    env = {**_unconfigured(), "COLUMNS": "120"} | {k: v.format(runs=runs) for k, v in variables.items()}
    plain, model = _both_ways(args, cwd, env)
    assert (plain.stderr.splitlines()[-1], model.stderr.splitlines()[-1]) == (path, "MODEL")
    refused = "PSE_PROVIDER" in variables or variables.get("PSE_LOG_LEVEL") == "verbose"
    assert plain.returncode == (2 if refused else 0)
    assert not (runs / "nowhere").exists()


@pytest.mark.parametrize("args", [["trace", "list"], ["stats", "--json"]])
def test_a_store_out_of_step_is_synced_as_before(args: list[str], tmp_path: Path) -> None:
    """With nothing configured and a store that has a row of a run that is gone, the command loads the
    settings model after all and lets the store sync, as it did before."""
    runs = _runs_with_store(tmp_path)
    (runs / "run-0" / "trace.json").unlink()
    (runs / "run-0").rmdir()
    env = {**_unconfigured(), "COLUMNS": "120", "PSE_RUNS_DIR": str(runs)}
    plain, _ = _both_ways(args, tmp_path, env)
    assert plain.stderr.splitlines()[-1] == "MODEL" and plain.returncode == 0
    if args == ["stats", "--json"]:
        assert json.loads(plain.stdout)["runs"] == 1
    else:
        assert "run-1" in plain.stdout and "run-0" not in plain.stdout


def _runs_with_store(tmp_path: Path) -> Path:
    """A runs folder of two finished runs, its store in step with it."""
    from pse.config import Settings
    from pse.store import close_stores, open_store
    from pse.trace import Trace, write_trace

    runs = tmp_path / "runs"
    for i in range(2):
        trace = Trace(
            run_id=f"run-{i}", task="t", started_at=f"2026-01-01T10:0{i}:00+00:00", outcome="PASSED"
        )
        write_trace(trace, runs / trace.run_id)
    open_store(Settings(runs_dir=runs)).sync(runs)
    close_stores()
    return runs


def _both_ways(
    args: list[str], cwd: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """`pse ARGS` as it runs, and through the settings model; their stdout, stderr (but the last line,
    which says whether the model was loaded) and exit code are the same."""
    plain, model = (
        subprocess.run(
            [sys.executable, "-c", _PSE, way, *args], capture_output=True, text=True, cwd=cwd, env=env
        )
        for way in ("plain", "model")
    )
    assert (plain.stdout, plain.returncode) == (model.stdout, model.returncode)
    assert plain.stderr.splitlines()[:-1] == model.stderr.splitlines()[:-1]
    return plain, model


def test_the_plain_settings_are_the_models() -> None:
    """The variables and values `pse.cli._reading` reads without the model are the model's own."""
    from typing import get_args

    from pydantic import SecretStr

    from pse.cli import _reading
    from pse.config import Settings, env_variables

    fields = Settings.model_fields
    assert set(get_args(fields["log_level"].annotation)) == _reading.LOG_LEVELS
    assert (fields["runs_dir"].default, fields["log_level"].default) == (
        _reading.DEFAULT_RUNS_DIR,
        _reading.DEFAULT_LOG_LEVEL,
    )
    assert fields["store_url"].default is None  # unset: the embedded store, which read_runs reads
    assert {_reading.RUNS_DIR, _reading.LOG_LEVEL} <= set(env_variables())
    assert {name for name in env_variables() if not name.startswith("PSE_")} == _reading.ANY_TEXT
    aliases = {name: str(field.validation_alias) for name, field in fields.items() if field.validation_alias}
    assert [name for name, alias in aliases.items() if "OPENAI_" in alias] == ["base_url", "api_key"]
    # any text is a valid value of the fields those variables set, and no validator of ours says otherwise
    assert (fields["base_url"].annotation, fields["api_key"].annotation) == (str | None, SecretStr | None)
    validated = {f for v in Settings.__pydantic_decorators__.field_validators.values() for f in v.info.fields}
    assert not validated & {"base_url", "api_key", "runs_dir", "log_level"}


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
