"""The run-id rule, in one place: what `new_run_id` makes and what every reader of a run id accepts.

A run id names a folder directly inside the runs directory, so it must be a plain folder name: a
letter or digit, then letters, digits, `.`, `_` and `-`, at most 201 characters in all. `..`, a `/`,
a hidden name or a trailing newline can never be one. The CLI, `prepare_resume`, the run history and
the dashboard all check ids with `is_run_id` / `check_run_id` before they touch the disk.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from pse.exceptions import UserError

__all__ = ["RUN_ID_PATTERN", "check_run_id", "is_run_id", "new_run_id"]

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
"""A whole run id (use `fullmatch`): `YYYYmmdd-HHMMSS-<task>-<6 hex>` when `new_run_id` made it."""


def is_run_id(text: str) -> bool:
    """Whether `text` is a well-formed run id (it says nothing of whether that run exists)."""
    return RUN_ID_PATTERN.fullmatch(text) is not None


def check_run_id(text: str) -> str:
    """`text`, if it is a well-formed run id.

    Raises:
        UserError: it is not; the message says where the run ids are listed.
    """
    if not is_run_id(text):
        raise UserError(f"{text!r} is not a run id; `pse trace list` shows the runs")
    return text


def new_run_id(task: str) -> str:
    """A sortable, unique run id: `YYYYmmdd-HHMMSS-<task>-<6 hex>`."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{task}-{secrets.token_hex(3)}"
