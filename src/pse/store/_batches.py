"""Batches in the run store: one row per input, and the lease that says who runs it now.

A worker *claims* an item before it runs it: an atomic update that succeeds only when the item is not
done and nobody holds a live lease on it (or the claimer already does). While it runs, the worker
*renews* the lease; a worker that dies stops renewing, its lease runs out, and the next claimer takes
the item over and resumes its run from the trace's last cycle end. So an item is never run by two
workers at once, and a finished one is never run again. Leases use the claimers' clocks (keep them
within a few seconds of each other; NTP does).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from pse.exceptions import UserError
from pse.store._schema import batch_items, batches
from pse.store._store import RunStore

__all__ = ["BatchItem", "BatchStore"]

PENDING, RUNNING, DONE = "pending", "running", "done"


@dataclass(frozen=True)
class BatchItem:
    """One input of a batch, as the store has it."""

    batch_id: str
    item: int
    inputs: dict[str, str]
    run_id: str | None
    status: str
    owner: str | None
    lease_until: float | None
    attempts: int


def _item(row: Any) -> BatchItem:
    return BatchItem(
        batch_id=row.batch_id,
        item=int(row.item),
        inputs=json.loads(row.inputs),
        run_id=row.run_id,
        status=row.status,
        owner=row.owner,
        lease_until=row.lease_until,
        attempts=int(row.attempts),
    )


class BatchStore(RunStore):
    """The run store with batches: items, leases, summaries."""

    def open_batch(self, batch_id: str, task: str, source: str, rows: list[dict[str, str]]) -> bool:
        """Create the batch with its items, or check that an existing one has the same task and rows.
        Returns True when it was new.

        Raises:
            UserError: a batch of that id exists with another task or other rows.
        """
        encoded = [json.dumps(row, sort_keys=True) for row in rows]
        with self._write() as conn:
            existing = conn.execute(sa.select(batches).where(batches.c.batch_id == batch_id)).first()
            if existing is None:
                conn.execute(
                    batches.insert().values(
                        batch_id=batch_id, task=task, inputs=source, created_at=time.time()
                    )
                )
                if encoded:
                    conn.execute(
                        batch_items.insert(),
                        [
                            {
                                "batch_id": batch_id,
                                "item": i,
                                "inputs": text,
                                "status": PENDING,
                                "attempts": 0,
                            }
                            for i, text in enumerate(encoded)
                        ],
                    )
                return True
            stored = [
                r.inputs
                for r in conn.execute(
                    sa.select(batch_items.c.inputs)
                    .where(batch_items.c.batch_id == batch_id)
                    .order_by(batch_items.c.item)
                )
            ]
        if existing.task != task or stored != encoded:
            what = (
                f"task {existing.task!r}" if existing.task != task else f"other rows ({len(stored)} of them)"
            )
            raise UserError(
                f"batch {batch_id!r} was started with {what}; give this one another --batch-id "
                f"(or run the same task and inputs again to resume it)"
            )
        return False

    def items(self, batch_id: str) -> list[BatchItem]:
        with self._read() as conn:
            rows = conn.execute(
                sa.select(batch_items).where(batch_items.c.batch_id == batch_id).order_by(batch_items.c.item)
            )
            return [_item(r) for r in rows]

    def claim(self, batch_id: str, item: int, owner: str, ttl_s: float) -> BatchItem | None:
        """Take the lease on an item that is not done and not held by a live lease; None: someone else
        holds it, or it is done."""
        now = time.time()
        key = (batch_items.c.batch_id == batch_id) & (batch_items.c.item == item)
        free = (
            batch_items.c.owner.is_(None) | (batch_items.c.lease_until < now) | (batch_items.c.owner == owner)
        )
        with self._write() as conn:
            taken = conn.execute(
                batch_items.update()
                .where(key, batch_items.c.status != DONE, free)
                .values(
                    owner=owner,
                    lease_until=now + ttl_s,
                    status=RUNNING,
                    attempts=batch_items.c.attempts + 1,
                )
            ).rowcount
            row = conn.execute(sa.select(batch_items).where(key)).first() if taken else None
        return None if row is None else _item(row)

    def _update_held(
        self, batch_id: str, item: int, holder: str, *, running: bool = False, **values: Any
    ) -> bool:
        """Update the row `holder` holds (and, with `running`, still runs); False when it does not hold it."""
        where = [
            batch_items.c.batch_id == batch_id,
            batch_items.c.item == item,
            batch_items.c.owner == holder,
        ]
        if running:
            where.append(batch_items.c.status == RUNNING)
        with self._write() as conn:
            return bool(conn.execute(batch_items.update().where(*where).values(**values)).rowcount)

    def renew(self, batch_id: str, item: int, owner: str, ttl_s: float) -> bool:
        """Extend a lease this owner holds; False when it lost it (it must stop working on the item)."""
        return self._update_held(batch_id, item, owner, running=True, lease_until=time.time() + ttl_s)

    def assign_run(self, batch_id: str, item: int, owner: str, run_id: str) -> None:
        """Note the run an item's owner started for it (a later claimer resumes that run)."""
        self._update_held(batch_id, item, owner, run_id=run_id)

    def finish(self, batch_id: str, item: int, owner: str, *, done: bool) -> bool:
        """Release the lease: the item is done (its run has an outcome) or back to pending (interrupted).
        False when the owner no longer held it."""
        return self._update_held(
            batch_id, item, owner, status=DONE if done else PENDING, owner=None, lease_until=None
        )

    def save_summary(self, batch_id: str, summary: dict[str, Any]) -> None:
        with self._write() as conn:
            conn.execute(
                batches.update().where(batches.c.batch_id == batch_id).values(summary=json.dumps(summary))
            )

    def batch_summary(self, batch_id: str) -> dict[str, Any] | None:
        with self._read() as conn:
            text = conn.execute(sa.select(batches.c.summary).where(batches.c.batch_id == batch_id)).scalar()
        return None if text is None else dict(json.loads(text))
