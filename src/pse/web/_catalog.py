"""What the run list and the metrics need beyond the run store's row: facts read from each trace, text
search, and which ERRORs were the infrastructure's fault rather than the run's.

The store (`pse.store`) indexes one row per run (`RunEntry`): outcome, tokens, cost, times. Which
provider, model, protocol and sandbox a run used, its tokens per role and per cycle, and the text of
its messages are in the trace only, so they are read from `trace.json` (through `read_run_file`, as
every read of a run folder) for the runs a page shows, and kept in a bounded cache keyed by what
changes whenever the trace does (state, cycles, tokens, outcome, end).

Searching message text reads traces too: at most `MAX_TEXT_SEARCHED` of them per query, newest first;
the answer says how many were searched, so a page never claims "no match" for runs it did not read.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import HTTPException
from pydantic import BaseModel, Field

from pse.config._profiles import _DEFAULT_MODELS  # the provider defaults a trace's unset model means
from pse.history import RunEntry
from pse.roles import ROLES
from pse.web._security import read_run_file

__all__ = [
    "INFRASTRUCTURE_ERRORS",
    "MAX_CACHED_FACTS",
    "MAX_TEXT_SEARCHED",
    "RunFacts",
    "SearchHit",
    "TraceCatalog",
    "duration_s",
    "facts_of",
    "is_infrastructure_error",
]

MAX_CACHED_FACTS = 4096
"""Runs whose trace facts stay in memory (a few hundred bytes each)."""
MAX_TEXT_SEARCHED = 1000
"""Most traces one search reads for message text (newest first); id, task and reason are searched in all."""
SNIPPET_CHARS = 60
"""Characters of context shown on each side of a match in a message."""
INFRASTRUCTURE_ERRORS = (
    "ModelUnavailableError",
    "ModelAuthError",
    "ToolInfrastructureError",
    "EmbeddingBackendError",
    "CANCELLED",
)
"""How an ERROR's reason begins when the run never got a fair chance: the model was down or refused the
key, the tool machinery or the knowledge backend failed, or a person or the server cancelled it. Such
runs say nothing about how well the roles work, so the metrics count them apart from the pass rate."""


def is_infrastructure_error(outcome: str | None, reason: str) -> bool:
    """Whether a finished run ended ERROR for a reason outside the run (see `INFRASTRUCTURE_ERRORS`)."""
    return outcome == "ERROR" and reason.startswith(INFRASTRUCTURE_ERRORS)


def duration_s(started_at: str, ended_at: str | None) -> float | None:
    """Seconds from start to end, or None while the run has no end (or a time does not parse)."""
    if not ended_at:
        return None
    try:
        seconds = (datetime.fromisoformat(ended_at) - datetime.fromisoformat(started_at)).total_seconds()
    except ValueError:
        return None
    return round(max(seconds, 0.0), 3)


class RunFacts(BaseModel):
    """What a trace says about how a run was made, beyond the store's row."""

    provider: str = Field(description="the provider every role used, or 'mixed'")
    model: str = Field(description="the model every role used, or each role's: 'Planner a · Specialist b'")
    models: dict[str, str] = Field(description="role → provider/model")
    protocol: str | None = None
    sandbox: str | None = Field(None, description="the sandbox mode that ran tool commands (bwrap, fallback)")
    tokens_by_role: dict[str, int] = Field(default_factory=dict)
    tokens_by_cycle: list[int] = Field(default_factory=list, description="prompt + completion, per cycle")
    unpriced_models: list[str] = Field(default_factory=list)


class SearchHit(BaseModel):
    """Where a search matched a run: its id, task or reason, or a message (with the text around it)."""

    field: str = Field(description="run_id, task, outcome_reason or message")
    role: str | None = None
    snippet: str = ""


def _role_models(settings: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each role's (provider, model), resolved from the trace's settings as `Settings.model_spec` does."""
    resolved = {}
    for role in ROLES:
        own = role.lower()
        provider = settings.get(f"{own}_provider") or settings.get("provider")
        if provider is None:  # an api key shows as "***" in a trace, None when unset
            key = settings.get(f"{own}_api_key") or settings.get("api_key")
            provider = "openai" if key else "scripted"
        model = settings.get(f"{own}_model") or settings.get("model")
        model = model or _DEFAULT_MODELS.get(str(provider), "?")
        resolved[role] = (str(provider), str(model))
    return resolved


def facts_of(data: dict[str, Any]) -> RunFacts:
    """The facts of one trace's JSON (never validated whole: a run list reads many)."""
    settings = data.get("settings") or {}
    resolved = _role_models(settings)
    providers = {p for p, _ in resolved.values()}
    models = {m for _, m in resolved.values()}
    sandbox = data.get("sandbox") or {}
    by_role = {
        str(role): int(t.get("prompt", 0)) + int(t.get("completion", 0))
        for role, t in ((data.get("tokens") or {}).get("by_role") or {}).items()
    }
    per_cycle = [
        sum(int(t.get("prompt", 0)) + int(t.get("completion", 0)) for t in (c.get("tokens") or {}).values())
        for c in data.get("cycles") or []
    ]
    return RunFacts(
        provider=providers.pop() if len(providers) == 1 else "mixed",
        model=models.pop() if len(models) == 1 else " · ".join(f"{r} {m}" for r, (_, m) in resolved.items()),
        models={role: f"{p}/{m}" for role, (p, m) in resolved.items()},
        protocol=settings.get("protocol"),
        sandbox=sandbox.get("mode"),
        tokens_by_role=by_role,
        tokens_by_cycle=per_cycle,
        unpriced_models=[str(m) for m in (data.get("cost") or {}).get("unpriced_models") or []],
    )


def _snippet(text: str, at: int, length: int) -> str:
    start, end = max(0, at - SNIPPET_CHARS), min(len(text), at + length + SNIPPET_CHARS)
    body = " ".join(text[start:end].split())
    return f"{'…' if start else ''}{body}{'…' if end < len(text) else ''}"


def _meta_hit(entry: RunEntry, needle: str) -> SearchHit | None:
    for field in ("run_id", "task", "outcome_reason"):
        text = str(getattr(entry, field))
        at = text.lower().find(needle)
        if at >= 0:
            return SearchHit(field=field, snippet=_snippet(text, at, len(needle)))
    return None


def _message_hit(data: dict[str, Any], needle: str) -> SearchHit | None:
    for cycle in data.get("cycles") or []:
        for message in cycle.get("messages") or []:
            text = str(message.get("content", ""))
            at = text.lower().find(needle)
            if at >= 0:
                snippet = _snippet(text, at, len(needle))
                return SearchHit(field="message", role=message.get("source"), snippet=snippet)
    return None


def _may_contain(raw: bytes, needle: str) -> bool:
    """A cheap necessary condition before parsing: an ASCII needle that JSON writes unescaped must occur
    in the file's bytes (case folded) if it occurs in a message."""
    if not needle.isascii() or any(c in needle for c in '"\\') or not needle.isprintable():
        return True
    return needle.encode() in raw.lower()


class TraceCatalog:
    """Facts of traces (cached) and text search over them, for one runs directory. Thread-safe."""

    def __init__(self, root: Path, *, max_cached: int = MAX_CACHED_FACTS) -> None:
        self.root = root
        self.max_cached = max_cached
        self._facts: OrderedDict[tuple[Any, ...], RunFacts] = OrderedDict()
        self._lock = threading.Lock()

    def _read(self, run_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads(read_run_file(self.root, run_id, "trace.json"))
        except (HTTPException, ValueError):
            return None  # gone, a symlink, too large, or torn: the row shows no facts
        return data if isinstance(data, dict) else None

    def facts(self, entry: RunEntry, data: dict[str, Any] | None = None) -> RunFacts | None:
        """The facts of `entry`'s trace (read unless `data` is its JSON), or None when it is unreadable."""
        key = (entry.run_id, entry.state, entry.cycles, entry.tokens, entry.outcome, entry.ended_at)
        with self._lock:
            known = self._facts.get(key)
            if known is not None:
                self._facts.move_to_end(key)
                return known
        data = data if data is not None else self._read(entry.run_id)
        if data is None:
            return None
        found = facts_of(data)
        with self._lock:
            self._facts[key] = found
            while len(self._facts) > self.max_cached:
                self._facts.popitem(last=False)
        return found

    def search(
        self, entries: list[RunEntry], query: str, *, max_text: int = MAX_TEXT_SEARCHED
    ) -> tuple[list[tuple[RunEntry, SearchHit]], int]:
        """The entries that match `query` (case-insensitive) in their id, task, reason or message text,
        in the given order, and how many traces were read for message text (at most `max_text`)."""
        needle = query.strip().lower()
        hits: list[tuple[RunEntry, SearchHit]] = []
        read = 0
        for entry in entries:
            hit = _meta_hit(entry, needle)
            if hit is None and read < max_text:
                read += 1
                try:
                    raw = read_run_file(self.root, entry.run_id, "trace.json")
                except HTTPException:
                    continue
                if _may_contain(raw, needle):
                    try:
                        data = json.loads(raw)
                    except ValueError:
                        continue
                    hit = _message_hit(data, needle) if isinstance(data, dict) else None
            if hit is not None:
                hits.append((entry, hit))
        return hits, read
