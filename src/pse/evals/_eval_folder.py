"""An evaluation folder read: eval.json, results.jsonl and summary.json, capped, never through a symlink."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pse._run_files import read_beneath
from pse.evals._results import EvalSummary, ResultRow, summarize_rows
from pse.exceptions import UserError

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_RESULTS_BYTES",
    "META_FILE",
    "REPORT_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "read_eval",
    "read_eval_summary",
]


MAX_RESULTS_BYTES = 64 * 1024 * 1024
"""Largest `results.jsonl` read (a row with its capped hidden output is a few KiB)."""
MAX_JSON_BYTES = 16 * 1024 * 1024
"""Largest `eval.json` or `summary.json` read."""


META_FILE, RESULTS_FILE, SUMMARY_FILE, REPORT_FILE = (
    "eval.json",
    "results.jsonl",
    "summary.json",
    "report.html",
)


class _Meta(BaseModel):
    """The fields of eval.json the report relies on; others are kept as they are."""

    model_config = ConfigDict(extra="allow")

    eval_id: str
    suite: str
    task: str
    description: str = ""
    arms: list[str]
    instances: list[str]
    created_at: str = ""


def _read(out_dir: Path, name: str, max_bytes: int) -> bytes | None:
    """A file of the folder, None when absent; never through a symlink (the folder's or the file's)."""
    folder = Path(os.path.normpath(out_dir.absolute()))
    try:
        return read_beneath(folder.parent, [folder.name, name], max_bytes=max_bytes)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"{out_dir / name}: {exc.strerror or exc}") from None


def _read_meta(out_dir: Path) -> dict[str, Any]:
    raw = _read(out_dir, META_FILE, MAX_JSON_BYTES)
    if raw is None:
        raise UserError(
            f"{out_dir} holds no {META_FILE} (or it is a symlink): it is not an evaluation folder "
            "`pse eval` wrote; pass the folder it printed"
        )
    try:
        return _Meta.model_validate_json(raw).model_dump()
    except ValidationError as exc:
        raise UserError(f"{out_dir / META_FILE} is not an evaluation's description: {exc}") from None


def _read_rows(out_dir: Path) -> list[ResultRow]:
    raw = _read(out_dir, RESULTS_FILE, MAX_RESULTS_BYTES)
    rows: list[ResultRow] = []
    for line in (raw or b"").decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(ResultRow.model_validate_json(line))
        except ValidationError:
            continue  # a line torn by a crash, or not a row: the next run of the instance writes it again
    return rows


def _read_summary(out_dir: Path) -> EvalSummary | None:
    raw = _read(out_dir, SUMMARY_FILE, MAX_JSON_BYTES)
    if raw is None:
        return None
    try:
        return EvalSummary.model_validate_json(raw)
    except ValidationError:
        return None  # computed again from the rows


def _summarize(meta: dict[str, Any], rows: Sequence[ResultRow]) -> EvalSummary:
    now = max((r.finished_at for r in rows), default="") or datetime.now(UTC).isoformat(timespec="seconds")
    return summarize_rows(
        rows, eval_id=meta["eval_id"], suite=meta["suite"], task=meta["task"], arms=meta["arms"], now=now
    )


def read_eval(out_dir: Path) -> tuple[dict[str, Any], list[ResultRow], EvalSummary]:
    """An evaluation folder's description, rows and summary.

    Rows that do not parse (a torn last line) are skipped; a missing or unreadable summary.json is
    computed from the rows (`updated_at`: the last row's `finished_at`). A symlinked folder or file
    reads as absent.

    Returns:
        `(meta, rows, summary)`: eval.json as a dict (its known fields checked), every readable row in
        file order (a re-run instance appears twice; the summary and the report keep the last), and
        the summary.

    Raises:
        UserError: the folder has no eval.json, or it is not a valid one, or a file is over its cap.
    """
    meta = _read_meta(out_dir)
    rows = _read_rows(out_dir)
    return meta, rows, _read_summary(out_dir) or _summarize(meta, rows)


def read_eval_summary(out_dir: Path) -> tuple[dict[str, Any], EvalSummary]:
    """eval.json and summary.json only (the rows are read only when the summary is missing): a listing."""
    meta = _read_meta(out_dir)
    return meta, _read_summary(out_dir) or _summarize(meta, _read_rows(out_dir))
