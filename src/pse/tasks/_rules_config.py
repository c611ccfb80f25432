"""The `rules.toml` format and the loading of the CSV / JSON sources its rules read."""

from __future__ import annotations

import csv
import json
import operator
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pse.exceptions import ConfigError

__all__ = [
    "OPS",
    "BreakdownRule",
    "Condition",
    "Row",
    "Rule",
    "RulesFile",
    "Source",
    "load_rows",
    "parse_time",
    "to_number",
]

Row = dict[str, Any]
Op = Literal[">", ">=", "<", "<=", "==", "!="]
OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    """A data file rules read. `path` is relative to the task folder."""

    path: str
    format: Literal["csv", "json", "jsonl"] | None = Field(
        None, description="default: from the file extension"
    )
    timestamp: str | None = Field(default=None, description="column holding ISO-8601 times")

    def resolved_format(self) -> str:
        if self.format is not None:
            return self.format
        suffix = Path(self.path).suffix.lower()
        return {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}.get(suffix, "csv")


class Condition(_Strict):
    """`column op value`, or `column op value_column` to compare two columns of the same row."""

    column: str
    op: Op
    value: float | str | None = None
    value_column: str | None = None

    @model_validator(mode="after")
    def _one_operand(self) -> Condition:
        if (self.value is None) == (self.value_column is None):
            raise ValueError("set exactly one of value or value_column")
        return self

    def columns(self) -> list[str]:
        return [self.column] + ([self.value_column] if self.value_column else [])

    def describe(self) -> str:
        rhs = self.value_column if self.value_column is not None else _fmt(self.value)
        return f"{self.column} {self.op} {rhs}"

    def holds(self, row: Row) -> bool:
        left = row.get(self.column)
        right = row.get(self.value_column) if self.value_column is not None else self.value
        if _missing(left) or _missing(right):
            return False
        left_num, right_num = to_number(left), to_number(right)
        if left_num is not None and right_num is not None:
            return OPS[self.op](left_num, right_num)
        return OPS[self.op](str(left), str(right))


class _RuleBase(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    title: str | None = None
    source: str


class MissingFieldsRule(_RuleBase):
    """Completeness: rows whose listed fields are absent or empty."""

    kind: Literal["missing_fields"]
    fields: list[str] = Field(min_length=1)


class TimeGapsRule(_RuleBase):
    """Completeness: consecutive timestamps further apart than `max_gap_s` (a regular series' step)."""

    kind: Literal["time_gaps"]
    max_gap_s: float = Field(gt=0)


class CountMatchRule(_RuleBase):
    """Consistency: a per-bucket count column in `source` vs the rows of `other` counted per bucket."""

    kind: Literal["count_match"]
    column: str
    other: str
    where: Condition | None = Field(
        default=None, description="count only the rows of `other` where this holds"
    )
    bucket_s: float = Field(60, gt=0)
    tolerance_abs: float = Field(0, ge=0)
    tolerance_rel: float = Field(0, ge=0)


class EventAlignmentRule(_RuleBase):
    """Consistency: where the rows of `events` fall relative to the anomaly `condition` marks in `source`."""

    kind: Literal["event_alignment"]
    condition: Condition
    min_consecutive: int = Field(1, ge=1)
    events: str
    label: str = Field(description="column of `events` that names an event")
    window_min: float = Field(30, gt=0)


class ThresholdRule(_RuleBase):
    """Threshold: windows of consecutive rows where `column op value` holds."""

    kind: Literal["threshold"]
    column: str
    op: Op
    value: float | None = None
    value_column: str | None = None
    min_consecutive: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _one_operand(self) -> ThresholdRule:
        if (self.value is None) == (self.value_column is None):
            raise ValueError("set exactly one of value or value_column")
        return self

    def condition(self) -> Condition:
        return Condition(column=self.column, op=self.op, value=self.value, value_column=self.value_column)


class OutliersRule(_RuleBase):
    """Distribution: values whose robust z-score (median / MAD) exceeds `z`."""

    kind: Literal["outliers"]
    column: str
    z: float = Field(3.5, gt=0)
    direction: Literal["both", "high", "low"] = "both"


class BreakdownRule(_RuleBase):
    """Distribution: counts of each value of `column` (rows where `where` holds); fires when one dominates."""

    kind: Literal["breakdown"]
    column: str
    where: Condition | None = None
    dominant_share: float = Field(0.8, gt=0, le=1)


Rule = Annotated[
    MissingFieldsRule
    | TimeGapsRule
    | CountMatchRule
    | EventAlignmentRule
    | ThresholdRule
    | OutliersRule
    | BreakdownRule,
    Field(discriminator="kind"),
]


class RulesFile(_Strict):
    """A whole `rules.toml`: named `[sources.NAME]` and a `[[rules]]` list."""

    sources: dict[str, Source] = Field(min_length=1)
    rules: list[Rule] = Field(min_length=1)

    def references(self) -> list[tuple[str, str, list[str]]]:
        """(rule id, source name, columns it reads) for every source each rule uses."""
        refs: list[tuple[str, str, list[str]]] = []
        for rule in self.rules:
            match rule:
                case MissingFieldsRule():
                    refs.append((rule.id, rule.source, list(rule.fields)))
                case TimeGapsRule():
                    refs.append((rule.id, rule.source, []))
                case CountMatchRule():
                    refs.append((rule.id, rule.source, [rule.column]))
                    refs.append((rule.id, rule.other, rule.where.columns() if rule.where else []))
                case EventAlignmentRule():
                    refs.append((rule.id, rule.source, rule.condition.columns()))
                    refs.append((rule.id, rule.events, [rule.label]))
                case ThresholdRule():
                    refs.append((rule.id, rule.source, rule.condition().columns()))
                case OutliersRule():
                    refs.append((rule.id, rule.source, [rule.column]))
                case BreakdownRule():
                    refs.append(
                        (rule.id, rule.source, [rule.column] + (rule.where.columns() if rule.where else []))
                    )
        return refs

    def timed_sources(self) -> list[tuple[str, str]]:
        """(rule id, source name) pairs whose rule needs the source to have a `timestamp` column."""
        pairs: list[tuple[str, str]] = []
        for rule in self.rules:
            if isinstance(rule, TimeGapsRule):
                pairs.append((rule.id, rule.source))
            elif isinstance(rule, CountMatchRule):
                pairs += [(rule.id, rule.source), (rule.id, rule.other)]
            elif isinstance(rule, EventAlignmentRule):
                pairs += [(rule.id, rule.source), (rule.id, rule.events)]
        return pairs


def load_rows(base_dir: Path, source: Source) -> list[Row]:
    """Read a source's rows (CSV via the csv module; JSON list of objects; JSON lines).

    Raises:
        ConfigError: the file is missing or not of its format.
    """
    path = base_dir / source.path
    if not path.is_file():
        raise ConfigError(f"rules source {source.path!r} not found at {path}; fix the path in rules.toml")
    fmt = source.resolved_format()
    text = path.read_text(encoding="utf-8")
    try:
        if fmt == "csv":
            return [dict(row) for row in csv.DictReader(text.splitlines())]
        if fmt == "json":
            data = json.loads(text)
            rows = data if isinstance(data, list) else None
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid {fmt.upper()} ({exc}); fix the file") from exc
    if rows is None or not all(isinstance(row, dict) for row in rows):
        raise ConfigError(
            f"{path}: expected a list of JSON objects (one per row); fix the file or its format"
        )
    return rows


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 timestamp, or None when the value is missing or not a timestamp."""
    if _missing(value):
        return None
    try:
        return datetime.fromisoformat(str(value).strip())
    except ValueError:
        return None


def to_number(value: Any) -> float | None:
    """A float, or None when the value is missing or not numeric (booleans are not numbers here)."""
    if _missing(value) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
