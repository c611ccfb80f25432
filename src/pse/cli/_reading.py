"""The runs `pse trace list` and `pse stats` read, without loading the settings model when it has nothing
to say.

Of all the settings these two commands read the runs folder and the log level, and need the store URL to
be unset (the embedded store, read with sqlite3). Loading `Settings` costs about a fifth of their start-up
(pydantic-settings imports asyncio and argparse; the model builds a schema of 74 fields) to
validate settings they never read and to warn of stray `PSE_*` variables. When the environment holds no
variable the model reads but `PSE_RUNS_DIR` and `PSE_LOG_LEVEL` with valid values (and
`OPENAI_API_KEY` / `OPENAI_BASE_URL`, which take any text), and there is no `.env` file, the model could
neither refuse nor warn of anything, and its values are these; otherwise the command loads it as every
other command does, with the same messages and exit codes. `tests/test_cli_startup.py` holds these names
to the model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from pse._run_index import read_runs
from pse.cli._common import command_settings, configure_logging
from pse.history import RunEntry, Stats, compute_stats, list_runs, stats_of

__all__ = ["PlainSettings", "plain_settings", "runs_listed", "runs_stats"]

RUNS_DIR, LOG_LEVEL = "PSE_RUNS_DIR", "PSE_LOG_LEVEL"
LOG_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR"})
"""`Settings.log_level`'s values."""
ANY_TEXT = frozenset({"OPENAI_API_KEY", "OPENAI_BASE_URL"})
"""Variables the model reads without the `PSE_` prefix (aliases of `api_key` and `base_url`); any text is
a valid value of both, and neither command reads them."""
DEFAULT_RUNS_DIR, DEFAULT_LOG_LEVEL = Path("runs"), "WARNING"
"""`Settings.runs_dir` and `Settings.log_level` when no variable sets them."""


class PlainSettings(NamedTuple):
    """The settings a reading command uses, as the model would have read them."""

    runs_dir: Path
    log_level: str


def _text(value: str) -> bool:
    """Whether `value` is text pydantic takes as it is (an undecodable byte from the environment is not)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def plain_settings(runs_dir: Path | None) -> PlainSettings | None:
    """The runs folder (`runs_dir`, the `--runs-dir` option, wins) and log level, or None when only the
    settings model can tell: a `.env` file, another `PSE_*` variable (a setting, or a stray one the model
    warns of), or a value it might refuse."""
    if os.path.exists(".env"):  # pydantic-settings reads it (a regular file or a FIFO) from the cwd
        return None
    values = {RUNS_DIR: str(DEFAULT_RUNS_DIR), LOG_LEVEL: DEFAULT_LOG_LEVEL}
    for name, value in os.environ.items():
        if name.upper() in ANY_TEXT and _text(value):
            continue
        if name in values and _text(value):
            values[name] = value
        elif name.upper().startswith("PSE_") or name.upper() in ANY_TEXT:
            return None  # names are read case-insensitively: `pse_runs_dir` is the model's to weigh
    if not values[RUNS_DIR] or values[LOG_LEVEL] not in LOG_LEVELS:
        return None
    return PlainSettings(runs_dir if runs_dir is not None else Path(values[RUNS_DIR]), values[LOG_LEVEL])


def runs_listed(runs_dir: Path | None, *, limit: int | None = None) -> tuple[Path, list[RunEntry]]:
    """The runs folder and its runs, newest first (the `limit` newest), as `pse.history.list_runs` reads
    them with the command's settings: the embedded store's rows when it is in step with the folder,
    else what the store answers once synced."""
    plain = plain_settings(runs_dir)
    if plain is not None:
        configure_logging(plain.log_level)
        entries = read_runs(plain.runs_dir, limit=limit)
        if entries is not None:
            return plain.runs_dir, entries
    settings = command_settings(runs_dir=runs_dir)
    return settings.runs_dir, list_runs(settings.runs_dir, settings, limit=limit)


def runs_stats(runs_dir: Path | None) -> tuple[Path, Stats]:
    """The runs folder and the statistics of its finished runs, as `pse.history.compute_stats` computes
    them with the command's settings."""
    plain = plain_settings(runs_dir)
    if plain is not None:
        configure_logging(plain.log_level)
        entries = read_runs(plain.runs_dir)
        if entries is not None:
            return plain.runs_dir, stats_of(entries)
    settings = command_settings(runs_dir=runs_dir)
    return settings.runs_dir, compute_stats(settings.runs_dir, settings)
