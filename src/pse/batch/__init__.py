"""Many runs: `pse batch` over an inputs file, through the local or the Ray executor (see docs/scale.md)."""

from __future__ import annotations

from pse.batch._batch import (
    BatchProgress,
    BatchRun,
    BatchSummary,
    Executor,
    LocalExecutor,
    batch_id_of,
    run_batch,
)
from pse.batch._inputs import read_rows
from pse.batch._ray import RayExecutor
from pse.batch._work import ItemResult, WorkItem, work_item

__all__ = [
    "BatchProgress",
    "BatchRun",
    "BatchSummary",
    "Executor",
    "ItemResult",
    "LocalExecutor",
    "RayExecutor",
    "WorkItem",
    "batch_id_of",
    "read_rows",
    "run_batch",
    "work_item",
]
