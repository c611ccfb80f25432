"""The run store's tables and its versioned migrations (one code path for SQLite and PostgreSQL).

`schema_version` holds one row: the version applied. `migrate` applies, in one transaction each, every
migration above it, so a store opened by a newer PSE is brought up to date on start, and one written by
a newer PSE than this one is refused (its columns may mean something this code does not know).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pse._run_index import SCHEMA_VERSION
from pse.exceptions import ConfigError

__all__ = ["SCHEMA_VERSION", "batch_items", "batches", "metadata", "migrate", "run_tags", "runs"]

metadata = sa.MetaData()

version_table = sa.Table("schema_version", metadata, sa.Column("version", sa.Integer, nullable=False))

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("run_id", sa.String(201), primary_key=True),
    sa.Column("task", sa.String(200), nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("outcome", sa.String(32)),
    sa.Column("outcome_reason", sa.Text, nullable=False),
    sa.Column("started_at", sa.String(40), nullable=False),
    sa.Column("ended_at", sa.String(40)),
    sa.Column("cycles", sa.Integer, nullable=False),
    sa.Column("tokens", sa.BigInteger, nullable=False),
    sa.Column("prompt_tokens", sa.BigInteger, nullable=False),
    sa.Column("cached_tokens", sa.BigInteger, nullable=False),
    sa.Column("prefix_counted", sa.BigInteger, nullable=False),
    sa.Column("prefix_reusable", sa.BigInteger, nullable=False),
    sa.Column("cost", sa.Float, nullable=False),
    sa.Column("currency", sa.String(8), nullable=False),
    sa.Column("tool_calls", sa.Integer, nullable=False),
    sa.Column("denied_tool_calls", sa.Integer, nullable=False),
    sa.Column("handoffs", sa.Integer, nullable=False),
    sa.Column("handoff_failures", sa.Integer, nullable=False),
    sa.Column("tags", sa.Text, nullable=False),  # the JSON of the tags, as the trace has them
    sa.Column("runs_root", sa.Text, nullable=False),  # the runs directory the trace lies in
    sa.Column("trace_mtime_ns", sa.BigInteger, nullable=False),
    sa.Column("trace_size", sa.BigInteger, nullable=False),
    sa.Column("indexed_at", sa.Float, nullable=False),
    sa.Index("runs_by_start", "started_at"),
    sa.Index("runs_by_task", "task", "started_at"),
    sa.Index("runs_by_outcome", "outcome", "started_at"),
    sa.Index("runs_by_root", "runs_root"),
)

run_tags = sa.Table(
    "run_tags",
    metadata,
    sa.Column("run_id", sa.String(201), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("key", sa.String(100), primary_key=True),
    sa.Column("value", sa.String(500), nullable=False),
    sa.Index("run_tags_by_value", "key", "value"),
)

batches = sa.Table(
    "batches",
    metadata,
    sa.Column("batch_id", sa.String(200), primary_key=True),
    sa.Column("task", sa.String(200), nullable=False),
    sa.Column("inputs", sa.Text, nullable=False),  # where the rows came from (a path), for people
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("summary", sa.Text),  # the JSON of the last summary, once the batch ended
)

batch_items = sa.Table(
    "batch_items",
    metadata,
    sa.Column(
        "batch_id", sa.String(200), sa.ForeignKey("batches.batch_id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("item", sa.Integer, primary_key=True),  # the row's index in the inputs file
    sa.Column("inputs", sa.Text, nullable=False),  # the JSON of the row
    sa.Column("run_id", sa.String(201)),
    sa.Column("status", sa.String(16), nullable=False),  # pending | running | done
    sa.Column("owner", sa.String(200)),  # who holds the lease while running
    sa.Column("lease_until", sa.Float),  # epoch seconds; a lease past it can be taken over
    sa.Column("attempts", sa.Integer, nullable=False),
)


def _v1(conn: Connection) -> None:
    for table in (runs, run_tags, batches, batch_items):
        table.create(conn)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1]
"""Migration n+1 is `MIGRATIONS[n]`; append, never edit one that shipped."""

if len(MIGRATIONS) != SCHEMA_VERSION:  # the reader without SQLAlchemy checks the version it knows
    raise RuntimeError(f"pse._run_index.SCHEMA_VERSION is {SCHEMA_VERSION}; set it to {len(MIGRATIONS)}")


def migrate(conn: Connection, where: str) -> int:
    """Bring the store at `conn` to `SCHEMA_VERSION`; return the version it had.

    Raises:
        ConfigError: the store was written by a newer PSE.
    """
    version_table.create(conn, checkfirst=True)
    current = conn.execute(sa.select(version_table.c.version)).scalar()
    if current is None:
        conn.execute(version_table.insert().values(version=0))
        current = 0
    if current > SCHEMA_VERSION:
        raise ConfigError(
            f"the run store {where} has schema version {current}, newer than this PSE knows "
            f"({SCHEMA_VERSION}); upgrade PSE, or point PSE_STORE_URL at another store"
        )
    for number in range(current, SCHEMA_VERSION):
        MIGRATIONS[number](conn)
        conn.execute(version_table.update().values(version=number + 1))
    return int(current)
