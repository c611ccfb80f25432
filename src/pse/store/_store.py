"""The run store: one index row per run, in SQLite (embedded) or PostgreSQL (shared), via SQLAlchemy Core.

The traces stay the source of truth. The engine writes a run's row each time it writes the trace;
`sync` picks up run folders the store has not seen (copied in, written before the store existed) and
drops rows whose folder is gone; `rebuild` re-indexes a whole runs folder from its traces.
A store that cannot be written (the database went away) never stops a run: the engine warns once and
the row is written again at the next cycle end, or by `pse store rebuild`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from pse._run_entry import RunEntry
from pse._run_index import (
    ALL_RUNS,
    ENTRY_FIELDS,
    STORE_FILE,
    RunFilter,
    entry_of_row,
    out_of_step,
    read_entry,
    run_folders,
)
from pse.exceptions import ConfigError
from pse.store._schema import SCHEMA_VERSION, migrate, run_tags, runs

__all__ = [
    "ALL_RUNS",
    "STORE_FILE",
    "RebuildReport",
    "RunFilter",
    "RunStore",
    "StoreUnavailable",
    "public_store_url",
]


class StoreUnavailable(ConfigError):
    """The store's database cannot be reached or answered with an error."""


@dataclass(frozen=True)
class RebuildReport:
    """What `rebuild` did: traces indexed, folders skipped (no readable trace), rows dropped."""

    indexed: int
    skipped: list[str]
    dropped: int


def public_store_url(url: str) -> str:
    """`url` without its password, for messages and `pse store` output."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError):
        return "<unreadable store URL>"


def _engine_url(url: str) -> str:
    """`postgresql://` means psycopg 3 (the `postgres` extra), not SQLAlchemy's psycopg2 default."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class RunStore:
    """The index of runs behind one URL: `sqlite:///…` or `postgresql://user:pw@host:port/db`.

    Opening applies the schema migrations. Thread-safe; one instance serves every run of a process.

    Raises:
        ConfigError: the URL is not a store URL, the driver is missing, or the database is newer.
        StoreUnavailable: the database cannot be reached.
    """

    def __init__(self, url: str) -> None:
        self.url = public_store_url(url)
        self.kind = "postgresql" if url.startswith(("postgresql", "postgres:")) else "sqlite"
        if not url.startswith(("sqlite:", "postgresql", "postgres:")):
            raise ConfigError(
                f"PSE_STORE_URL={self.url!r} is no run store URL; use "
                "postgresql://USER:PASSWORD@HOST:PORT/DB, or leave it unset for the embedded SQLite store "
                "in the runs directory"
            )
        try:
            self._engine = self._create_engine(_engine_url(url))
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"the run store {self.url} needs the PostgreSQL driver ({exc.name}); "
                "install it with `pip install 'pse[postgres]'`"
            ) from None
        self._lock = threading.Lock()
        self._tags_written: dict[str, str] = {}  # run id -> the tags JSON this store last wrote for it
        self._upsert = _upsert(self.kind)
        try:
            with self._write() as conn:
                if self.kind == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(7340561)"))  # one migrator at a time
                self.migrated_from = migrate(conn, self.url)
        except BaseException:
            self._engine.dispose()
            raise
        self.version = SCHEMA_VERSION

    def _create_engine(self, url: str) -> Engine:
        if self.kind == "postgresql":
            return sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi: Any, _record: Any) -> None:
            dbapi.isolation_level = None  # SQLAlchemy emits BEGIN itself (below), DDL included
            dbapi.execute("PRAGMA journal_mode=WAL")
            dbapi.execute("PRAGMA foreign_keys=ON")
            dbapi.execute("PRAGMA synchronous=NORMAL")

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # IMMEDIATE: a writer takes the lock when it starts, so two writers never deadlock half-way
            # (readers in WAL mode are not blocked by it).
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")

        return engine

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn:
                conn.info["write"] = True
                try:
                    with conn.begin():
                        yield conn
                finally:
                    conn.info.pop("write", None)
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"the run store {self.url} failed: {_short(exc)}") from exc

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn, conn.begin():
                yield conn
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"the run store {self.url} failed: {_short(exc)}") from exc

    def close(self) -> None:
        self._engine.dispose()

    # ---- rows ------------------------------------------------------------------------------------

    def record(self, entry: RunEntry, runs_root: Path, *, mtime_ns: int = 0, size: int = 0) -> None:
        """Write (insert or replace) the row of one run and its tags: one upsert, plus the tags when they
        changed since this store last wrote them (the engine calls this at every save)."""
        value = _value(entry, str(runs_root), mtime_ns, size, time.time())
        with self._lock:
            tags_known = self._tags_written.get(entry.run_id) == value["tags"]
        with self._write() as conn:
            conn.execute(self._upsert, value)
            if not tags_known:
                conn.execute(run_tags.delete().where(run_tags.c.run_id == entry.run_id))
                if entry.tags:
                    conn.execute(run_tags.insert(), _tag_rows(entry))
        with self._lock:
            if entry.outcome is None:
                self._tags_written[entry.run_id] = value["tags"]
            else:  # a finished run is rarely written again: forget it (the memo stays small)
                self._tags_written.pop(entry.run_id, None)

    def record_many(self, rows: Sequence[tuple[RunEntry, int, int]], runs_root: Path) -> None:
        if not rows:
            return
        root, now = str(runs_root), time.time()
        values = [_value(entry, root, mtime_ns, size, now) for entry, mtime_ns, size in rows]
        ids = [v["run_id"] for v in values]
        tags = [tag for entry, _, _ in rows for tag in _tag_rows(entry)]
        with self._lock:
            for run_id in ids:
                self._tags_written.pop(run_id, None)
        with self._write() as conn:
            for chunk in _chunks(ids, 500):
                conn.execute(run_tags.delete().where(run_tags.c.run_id.in_(chunk)))
                conn.execute(runs.delete().where(runs.c.run_id.in_(chunk)))
            conn.execute(runs.insert(), values)
            if tags:
                conn.execute(run_tags.insert(), tags)

    def forget(self, run_ids: Iterable[str]) -> int:
        """Drop the rows of these runs; return how many there were."""
        ids = list(run_ids)
        dropped = 0
        with self._lock:
            for run_id in ids:
                self._tags_written.pop(run_id, None)
        with self._write() as conn:
            for chunk in _chunks(ids, 500):
                conn.execute(run_tags.delete().where(run_tags.c.run_id.in_(chunk)))
                dropped += conn.execute(runs.delete().where(runs.c.run_id.in_(chunk))).rowcount or 0
        return dropped

    def get(self, run_id: str) -> RunEntry | None:
        with self._read() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).mappings().first()
        return None if row is None else entry_of_row(row)

    def _where(self, query: Any, where: RunFilter) -> Any:
        if where.task:
            query = query.where(runs.c.task == where.task)
        if where.outcome == "RUNNING":
            query = query.where(runs.c.outcome.is_(None))
        elif where.outcome:
            query = query.where(runs.c.outcome == where.outcome)
        if where.finished:
            query = query.where(runs.c.outcome.is_not(None))
        for key, value in where.tags:
            tagged = sa.select(run_tags.c.run_id).where(run_tags.c.key == key, run_tags.c.value == value)
            query = query.where(runs.c.run_id.in_(tagged))
        return query

    def entries(
        self, where: RunFilter = ALL_RUNS, *, offset: int = 0, limit: int | None = None
    ) -> list[RunEntry]:
        """The runs that match, newest first."""
        query = self._where(sa.select(runs), where).order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
        if offset:
            query = query.offset(offset)
        if limit is not None:
            query = query.limit(limit)
        with self._read() as conn:
            return [entry_of_row(row) for row in conn.execute(query).mappings()]

    def count(self, where: RunFilter = ALL_RUNS) -> int:
        with self._read() as conn:
            return int(
                conn.execute(self._where(sa.select(sa.func.count()).select_from(runs), where)).scalar_one()
            )

    def totals(self, where: RunFilter = ALL_RUNS) -> dict[str, Any]:
        """Sums over the finished runs that match, computed by the database (see `pse.history.Stats`)."""
        finished = runs.c.outcome.is_not(None)
        passed = runs.c.outcome == "PASSED"

        def when(cond: Any, value: Any) -> Any:
            return sa.func.coalesce(sa.func.sum(sa.case((cond, value), else_=0)), 0)

        columns = [
            when(finished, 1).label("runs"),
            when(passed, 1).label("passed"),
            when(passed & (runs.c.cycles == 1), 1).label("first_cycle"),
            when(passed, runs.c.cycles).label("passed_cycles"),
            when(finished, runs.c.tool_calls).label("tool_calls"),
            when(finished, runs.c.denied_tool_calls).label("denied"),
            when(passed, runs.c.tokens).label("passed_tokens"),
            when(passed, runs.c.cost).label("passed_cost"),
            when(finished, runs.c.handoffs).label("handoffs"),
            when(finished, runs.c.handoff_failures).label("handoff_failures"),
            when(finished, runs.c.cached_tokens).label("cached_tokens"),
            when(finished, runs.c.prompt_tokens).label("prompt_tokens"),
            when(finished, runs.c.prefix_counted).label("prefix_counted"),
            when(finished, runs.c.prefix_reusable).label("prefix_reusable"),
        ]
        outcome_query = self._where(
            sa.select(runs.c.outcome, sa.func.count()).where(finished).group_by(runs.c.outcome), where
        )
        cycles_query = self._where(
            sa.select(runs.c.cycles, sa.func.count()).where(passed).group_by(runs.c.cycles), where
        )
        currency_query = self._where(
            sa.select(runs.c.currency).where(passed).order_by(runs.c.started_at.desc()).limit(1), where
        )
        with self._read() as conn:
            sums = dict(conn.execute(self._where(sa.select(*columns), where)).mappings().one())
            sums["outcomes"] = {str(o): int(n) for o, n in conn.execute(outcome_query)}
            sums["cycles_to_pass"] = {str(c): int(n) for c, n in conn.execute(cycles_query)}
            sums["currency"] = conn.execute(currency_query).scalar() or "USD"
        return sums

    # ---- keeping the index equal to the folder ---------------------------------------------------

    def sync(self, runs_dir: Path) -> int:
        """Index the run folders of `runs_dir` the store has no row of, re-index runs without an outcome
        whose trace changed, and drop rows whose folder is gone. Returns the rows written or dropped."""
        root = runs_dir.resolve()
        with self._read() as conn:
            known = {
                row.run_id: (row.outcome, row.trace_mtime_ns, row.trace_size)
                for row in conn.execute(
                    sa.select(runs.c.run_id, runs.c.outcome, runs.c.trace_mtime_ns, runs.c.trace_size).where(
                        runs.c.runs_root == str(root)
                    )
                )
            }
        stale, gone = out_of_step(root, known)
        rows = [row for row in (read_entry(root, name) for name in stale) if row is not None]
        self.record_many(rows, root)
        return len(rows) + (self.forget(gone) if gone else 0)

    def index_folder(self, runs_dir: Path, run_id: str) -> bool:
        """Index one run folder of `runs_dir` from its trace; False when it has no readable trace."""
        root = runs_dir.resolve()
        row = read_entry(root, run_id)
        if row is not None:
            self.record_many([row], root)
        return row is not None

    def rebuild(self, runs_dir: Path) -> RebuildReport:
        """Re-index every trace of `runs_dir` and drop every row of that folder without one."""
        root = runs_dir.resolve()
        names = sorted(run_folders(root))
        rows, skipped = [], []
        for name in names:
            row = read_entry(root, name)
            if row is None:
                skipped.append(name)
            else:
                rows.append(row)
        with self._read() as conn:
            known = set(conn.execute(sa.select(runs.c.run_id).where(runs.c.runs_root == str(root))).scalars())
        dropped = self.forget(known - {entry.run_id for entry, _, _ in rows})
        for chunk in _chunks(rows, 1000):
            self.record_many(chunk, root)
        return RebuildReport(indexed=len(rows), skipped=skipped, dropped=dropped)


def _value(entry: RunEntry, root: str, mtime_ns: int, size: int, now: float) -> dict[str, Any]:
    return {
        **{name: getattr(entry, name) for name in ENTRY_FIELDS},
        "tags": json.dumps(entry.tags, sort_keys=True),
        "runs_root": root,
        "trace_mtime_ns": mtime_ns,
        "trace_size": size,
        "indexed_at": now,
    }


def _tag_rows(entry: RunEntry) -> list[dict[str, str]]:
    return [{"run_id": entry.run_id, "key": k[:100], "value": v[:500]} for k, v in entry.tags.items()]


def _upsert(kind: str) -> Any:
    """INSERT … ON CONFLICT (run_id) DO UPDATE, in the dialect of the store (both have it)."""
    insert: Any
    if kind == "postgresql":  # each dialect imported only where it is used (a CLI start-up cost)
        from sqlalchemy.dialects import postgresql

        insert = postgresql.insert(runs)
    else:
        from sqlalchemy.dialects import sqlite

        insert = sqlite.insert(runs)
    return insert.on_conflict_do_update(
        index_elements=[runs.c.run_id],
        set_={c.name: insert.excluded[c.name] for c in runs.c if c.name != "run_id"},
    )


def _short(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    return text if len(text) <= 300 else text[:300] + "…"


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
