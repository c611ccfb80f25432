"""One evaluator per rule kind; each turns a rule and its rows into a Finding. Pure: no I/O, no model."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from typing import Any

from pse.tasks._rules_config import (
    BreakdownRule,
    CountMatchRule,
    EventAlignmentRule,
    MissingFieldsRule,
    OutliersRule,
    Row,
    Rule,
    Source,
    ThresholdRule,
    TimeGapsRule,
    parse_time,
    to_number,
)
from pse.tasks._rules_summary import Category, Finding, Window

__all__ = ["evaluate_rule"]

_CATEGORY: dict[str, Category] = {
    "missing_fields": "completeness",
    "time_gaps": "completeness",
    "count_match": "consistency",
    "event_alignment": "consistency",
    "threshold": "threshold",
    "outliers": "distribution",
    "breakdown": "distribution",
}
_ITEM_CAP = 20  # items kept per finding in the JSON; the Markdown shows fewer
_MD_WINDOWS = 3


def evaluate_rule(rule: Rule, sources: dict[str, Source], rows: dict[str, list[Row]]) -> Finding:
    src = sources[rule.source]
    data = _sorted(rows[rule.source], src.timestamp)
    title = rule.title or rule.id
    base = {
        "rule": rule.id,
        "kind": rule.kind,
        "category": _CATEGORY[rule.kind],
        "title": title,
        "source": rule.source,
    }
    match rule:
        case MissingFieldsRule():
            return _missing_fields(rule, data, src, base)
        case TimeGapsRule():
            return _time_gaps(rule, data, src, base)
        case CountMatchRule():
            other = sources[rule.other]
            return _count_match(rule, data, src, rows[rule.other], other, base)
        case EventAlignmentRule():
            events = sources[rule.events]
            return _event_alignment(
                rule, data, src, _sorted(rows[rule.events], events.timestamp), events, base
            )
        case ThresholdRule():
            return _threshold(rule, data, src, base)
        case OutliersRule():
            return _outliers(rule, data, src, base)
        case BreakdownRule():
            return _breakdown(rule, data, src, base)
    raise AssertionError(f"unhandled rule kind {rule.kind}")  # pragma: no cover - the union is exhaustive


def _missing_fields(rule: MissingFieldsRule, data: list[Row], src: Source, base: dict[str, Any]) -> Finding:
    counts: Counter[str] = Counter()
    items: list[dict[str, Any]] = []
    for index, row in enumerate(data):
        absent = [f for f in rule.fields if row.get(f) is None or str(row.get(f)).strip() == ""]
        counts.update(absent)
        if absent:
            items.append({"at": _where(row, index, src), "fields": absent})
    if not items:
        return Finding(**base, fired=False, message=f"all {len(data)} rows have {', '.join(rule.fields)}")
    per_field = ", ".join(f"{name} missing in {n} row(s)" for name, n in sorted(counts.items()))
    shown = ", ".join(str(i["at"]) for i in items[:_MD_WINDOWS])
    return Finding(
        **base,
        fired=True,
        message=f"{per_field} (at {shown}{_more(len(items))})",
        items=items[:_ITEM_CAP],
        items_total=len(items),
    )


def _time_gaps(rule: TimeGapsRule, data: list[Row], src: Source, base: dict[str, Any]) -> Finding:
    stamped = [(t, row) for row in data if (t := parse_time(row.get(src.timestamp or ""))) is not None]
    windows: list[Window] = []
    for (t0, r0), (t1, r1) in itertools.pairwise(stamped):
        gap = (t1 - t0).total_seconds()
        if gap > rule.max_gap_s:
            windows.append(
                Window(start=str(r0[src.timestamp or ""]), end=str(r1[src.timestamp or ""]), rows=0, peak=gap)
            )
    if not windows:
        return Finding(
            **base, fired=False, message=f"no gap over {rule.max_gap_s:g} s in {len(stamped)} timestamps"
        )
    listed = "; ".join(f"{w.start} → {w.end} ({w.peak:.0f} s)" for w in windows[:_MD_WINDOWS])
    return Finding(
        **base,
        fired=True,
        windows=windows[:_ITEM_CAP],
        items_total=len(windows),
        message=f"{len(windows)} gap(s) over {rule.max_gap_s:g} s: {listed}{_more(len(windows))}",
    )


def _count_match(
    rule: CountMatchRule,
    data: list[Row],
    src: Source,
    other_rows: list[Row],
    other: Source,
    base: dict[str, Any],
) -> Finding:
    counted: Counter[int] = Counter()
    for row in other_rows:
        t = parse_time(row.get(other.timestamp or ""))
        if t is not None and (rule.where is None or rule.where.holds(row)):
            counted[int(t.timestamp() // rule.bucket_s)] += 1
    items: list[dict[str, Any]] = []
    flags: list[bool] = []
    for row in data:
        t, expected = parse_time(row.get(src.timestamp or "")), to_number(row.get(rule.column))
        if t is None or expected is None:
            flags.append(False)
            continue
        actual = counted[int(t.timestamp() // rule.bucket_s)]
        off = abs(expected - actual) > max(rule.tolerance_abs, rule.tolerance_rel * abs(expected))
        flags.append(off)
        if off:
            items.append(
                {"at": str(row[src.timestamp or ""]), rule.column: expected, f"{rule.other}_count": actual}
            )
    what = f"{rule.source}.{rule.column} vs {rule.other} rows" + (
        f" where {rule.where.describe()}" if rule.where else ""
    )
    if not items:
        return Finding(**base, fired=False, message=f"{what} agree in all {len(data)} buckets")
    windows = _windows(data, flags, src, None)
    listed = "; ".join(f"{w.start} → {w.end}" for w in windows[:_MD_WINDOWS])
    first = items[0]
    return Finding(
        **base,
        fired=True,
        windows=windows[:_ITEM_CAP],
        items=items[:_ITEM_CAP],
        items_total=len(items),
        message=f"{what} disagree in {len(items)} bucket(s): {listed}{_more(len(windows))} "
        f"(e.g. {first['at']}: {first[rule.column]:g} vs {first[f'{rule.other}_count']})",
    )


def _event_alignment(
    rule: EventAlignmentRule,
    data: list[Row],
    src: Source,
    events: list[Row],
    ev_src: Source,
    base: dict[str, Any],
) -> Finding:
    flags = [rule.condition.holds(row) for row in data]
    windows = [w for w in _windows(data, flags, src, None) if w.rows >= rule.min_consecutive]
    what = f"anomaly {rule.condition.describe()}"
    if not windows:
        return Finding(**base, fired=False, message=f"no {what} lasting {rule.min_consecutive}+ rows")
    onset, end = parse_time(windows[0].start), parse_time(windows[-1].end)
    assert onset is not None and end is not None  # windows are built from timestamped rows
    items: list[dict[str, Any]] = []
    for row in events:
        at = parse_time(row.get(ev_src.timestamp or ""))
        if at is None:
            continue
        offset = (at - onset).total_seconds() / 60
        if -rule.window_min <= offset < 0:
            position = f"{-offset:g} min before onset"
        elif at <= end:
            position = f"during the anomaly, {offset:g} min after onset" if offset >= 0 else ""
        elif (at - end).total_seconds() / 60 <= rule.window_min:
            position = "after the anomaly ended"
        else:
            continue
        if position:
            items.append(
                {
                    "event": str(row.get(rule.label)),
                    "at": str(row[ev_src.timestamp or ""]),
                    "position": position,
                    "offset_min": round(offset, 1),
                }
            )
    span = f"{what} from {windows[0].start} to {windows[-1].end}"
    if not items:
        return Finding(
            **base, fired=False, message=f"{span}; no {rule.events} event within {rule.window_min:g} min"
        )
    listed = "; ".join(f"{i['event']} at {i['at']}: {i['position']}" for i in items[: _MD_WINDOWS + 2])
    return Finding(
        **base,
        fired=True,
        windows=windows[:1],
        items=items[:_ITEM_CAP],
        items_total=len(items),
        message=f"{span}; {listed}{_more(len(items), _MD_WINDOWS + 2)}",
    )


def _threshold(rule: ThresholdRule, data: list[Row], src: Source, base: dict[str, Any]) -> Finding:
    cond = rule.condition()
    flags = [cond.holds(row) for row in data]
    high = rule.op in (">", ">=")
    windows = [w for w in _windows(data, flags, src, rule.column, high) if w.rows >= rule.min_consecutive]
    if not windows:
        return Finding(**base, fired=False, message=f"{cond.describe()} never holds ({len(data)} rows)")
    rows = sum(w.rows for w in windows)
    return _fired_windows(base, windows, f"{cond.describe()} in {rows} rows, {len(windows)} window(s)")


def _outliers(rule: OutliersRule, data: list[Row], src: Source, base: dict[str, Any]) -> Finding:
    values = [v for row in data if (v := to_number(row.get(rule.column))) is not None]
    if len(values) < 3:
        return Finding(**base, fired=False, message=f"too few numeric {rule.column} values ({len(values)})")
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    # MAD is 0 when most values are equal; fall back to the mean absolute deviation (scaled to match).
    scale = mad / 0.6745 if mad > 0 else statistics.fmean(abs(v - median) for v in values) * 1.2533
    if scale == 0:
        return Finding(**base, fired=False, message=f"all {rule.column} values equal {median:g}")

    def is_outlier(row: Row) -> bool:
        v = to_number(row.get(rule.column))
        if v is None:
            return False
        z = (v - median) / scale
        return {"both": abs(z) > rule.z, "high": z > rule.z, "low": z < -rule.z}[rule.direction]

    flags = [is_outlier(row) for row in data]
    stats = f"median {median:g}, MAD {mad:g}, |z| > {rule.z:g}"
    if not any(flags):
        return Finding(**base, fired=False, message=f"no {rule.column} outlier ({stats})")
    windows = _windows(data, flags, src, rule.column, rule.direction != "low")
    return _fired_windows(base, windows, f"{sum(flags)} {rule.column} outlier(s) ({stats})")


def _fired_windows(base: dict[str, Any], windows: list[Window], lead: str) -> Finding:
    """A fired finding over time windows: `lead`, then the first windows with their peaks."""
    listed = "; ".join(f"{w.start} → {w.end} ({w.rows} rows, peak {w.peak:g})" for w in windows[:_MD_WINDOWS])
    return Finding(
        **base,
        fired=True,
        windows=windows[:_ITEM_CAP],
        items_total=len(windows),
        message=f"{lead}: {listed}{_more(len(windows))}",
    )


def _breakdown(rule: BreakdownRule, data: list[Row], src: Source, base: dict[str, Any]) -> Finding:
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(data):
        if rule.where is None or rule.where.holds(row):
            groups.setdefault(str(row.get(rule.column)), []).append(index)
    scope = f"{rule.column}" + (f" where {rule.where.describe()}" if rule.where else "")
    total = sum(len(rows) for rows in groups.values())
    if not total:
        return Finding(**base, fired=False, message=f"no rows for {scope}")
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    items: list[dict[str, Any]] = [
        {
            "value": value,
            "rows": len(idx),
            "share": round(len(idx) / total, 3),
            "first": _where(data[idx[0]], idx[0], src),
            "last": _where(data[idx[-1]], idx[-1], src),
        }
        for value, idx in ranked
    ]
    listed = "; ".join(
        f"{i['value']!r}: {i['rows']} ({i['share']:.0%}, {i['first']} → {i['last']})"
        for i in items[:_MD_WINDOWS]
    )
    top = items[0]
    fired = top["share"] >= rule.dominant_share
    lead = (
        f"{top['value']!r} is {top['share']:.0%} of {total} rows" if fired else f"{total} rows, none dominant"
    )
    return Finding(
        **base,
        fired=fired,
        items=items[:_ITEM_CAP],
        items_total=len(items),
        message=f"{scope}: {lead}; {listed}{_more(len(items))}",
    )


# --- helpers -------------------------------------------------------------------------------------


def _sorted(rows: list[Row], timestamp: str | None) -> list[Row]:
    if timestamp is None:
        return rows
    stamped = [(parse_time(row.get(timestamp)), i, row) for i, row in enumerate(rows)]
    # Rows without a parseable time keep their place at the end; completeness rules report them.
    return [row for t, _, row in sorted(stamped, key=lambda x: (x[0] is None, x[0] or 0, x[1]))]


def _where(row: Row, index: int, src: Source) -> str:
    if src.timestamp and row.get(src.timestamp):
        return str(row[src.timestamp])
    return f"row {index + 1}"


def _windows(
    data: list[Row], flags: list[bool], src: Source, column: str | None, high: bool = True
) -> list[Window]:
    windows: list[Window] = []
    start: int | None = None
    for index, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            chunk = data[start:index]
            values = [v for row in chunk if column and (v := to_number(row.get(column))) is not None]
            peak = (max(values) if high else min(values)) if values else None
            windows.append(
                Window(
                    start=_where(chunk[0], start, src),
                    end=_where(chunk[-1], index - 1, src),
                    rows=len(chunk),
                    peak=peak,
                )
            )
            start = None
    return windows


def _more(total: int, shown: int = _MD_WINDOWS) -> str:
    return f" … and {total - shown} more" if total > shown else ""
