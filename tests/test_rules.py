"""The zero-LLM rules engine on crafted data: every rule kind firing and not firing; no model code touched."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pse.exceptions import ConfigError
from pse.tasks import RulesSummary, TaskRegistry, load_rules, run_rules, scaffold_task
from pse.tasks._rules import evaluate_rules

T0 = "2026-01-01T10:{:02d}:00+00:00"


def _csv(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "\n".join(rows) + "\n")


def _run(tmp_path: Path, rules: str) -> RulesSummary:
    (tmp_path / "rules.toml").write_text(textwrap.dedent(rules))
    return evaluate_rules(load_rules(tmp_path / "rules.toml"), tmp_path, "crafted")


SERIES = """
[sources.m]
path = "m.csv"
timestamp = "ts"
"""


@pytest.fixture
def series(tmp_path: Path) -> Path:
    values = [10, 11, 10, 12, 50, 55, 11, 10, 60, 10]
    _csv(tmp_path / "m.csv", "ts,v,cap,err", [f"{T0.format(i)},{v},50,{i % 3}" for i, v in enumerate(values)])
    return tmp_path


def test_missing_fields(tmp_path: Path) -> None:
    _csv(tmp_path / "m.csv", "ts,v,w", [f"{T0.format(0)},1,", f"{T0.format(1)},,2", f"{T0.format(2)},3,4"])
    rule = '[[rules]]\nid = "r"\nkind = "missing_fields"\nsource = "m"\nfields = [{}]\n'
    [fired] = _run(tmp_path, SERIES + rule.format('"v", "w"')).findings
    assert fired.fired and fired.category == "completeness"
    assert (
        fired.message == f"v missing in 1 row(s), w missing in 1 row(s) (at {T0.format(0)}, {T0.format(1)})"
    )
    assert fired.items == [{"at": T0.format(0), "fields": ["w"]}, {"at": T0.format(1), "fields": ["v"]}]
    [quiet] = _run(tmp_path, SERIES + rule.format('"ts"')).findings
    assert not quiet.fired and quiet.message == "all 3 rows have ts"


def test_time_gaps(tmp_path: Path) -> None:
    _csv(tmp_path / "m.csv", "ts,v", [f"{T0.format(i)},1" for i in (0, 1, 2, 5, 6)])
    rule = '[[rules]]\nid = "g"\nkind = "time_gaps"\nsource = "m"\nmax_gap_s = {}\n'
    [fired] = _run(tmp_path, SERIES + rule.format(60)).findings
    assert fired.fired and [(w.start, w.end, w.peak) for w in fired.windows] == [
        (T0.format(2), T0.format(5), 180)
    ]
    [quiet] = _run(tmp_path, SERIES + rule.format(180)).findings
    assert not quiet.fired


def test_count_match_between_sources(tmp_path: Path) -> None:
    _csv(tmp_path / "m.csv", "ts,errors", [f"{T0.format(i)},{n}" for i, n in enumerate([2, 0, 3])])
    logs = [
        {"ts": "2026-01-01T10:00:05+00:00", "status": 500},
        {"ts": "2026-01-01T10:00:50+00:00", "status": 503},
        {"ts": "2026-01-01T10:01:10+00:00", "status": 200},
        {"ts": "2026-01-01T10:02:10+00:00", "status": 500},
    ]
    (tmp_path / "logs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in logs))
    rules = (
        SERIES
        + """
    [sources.logs]
    path = "logs.jsonl"
    timestamp = "ts"

    [[rules]]
    id = "c"
    kind = "count_match"
    source = "m"
    column = "errors"
    other = "logs"
    where = { column = "status", op = ">=", value = 500 }
    tolerance_abs = TOL
    """
    )
    [fired] = _run(tmp_path, rules.replace("TOL", "1")).findings
    assert fired.fired and fired.category == "consistency"
    assert fired.items == [{"at": T0.format(2), "errors": 3.0, "logs_count": 1}]
    assert "disagree in 1 bucket(s)" in fired.message
    [quiet] = _run(tmp_path, rules.replace("TOL", "2")).findings
    assert (
        not quiet.fired
        and quiet.message == "m.errors vs logs rows where status >= 500 agree in all 3 buckets"
    )


def test_event_alignment(series: Path) -> None:
    events = [
        {"id": "A", "at": "2026-01-01T09:58:00+00:00"},
        {"id": "B", "at": "2026-01-01T10:05:00+00:00"},
        {"id": "C", "at": "2026-01-01T08:00:00+00:00"},
    ]
    (series / "ev.json").write_text(json.dumps(events))
    rules = (
        SERIES
        + """
    [sources.ev]
    path = "ev.json"
    timestamp = "at"

    [[rules]]
    id = "a"
    kind = "event_alignment"
    source = "m"
    condition = { column = "v", op = ">", value = LIMIT }
    min_consecutive = 2
    events = "ev"
    label = "id"
    window_min = 10
    """
    )
    [fired] = _run(series, rules.replace("LIMIT", "40")).findings
    assert fired.fired
    assert [(i["event"], i["position"]) for i in fired.items] == [
        ("A", "6 min before onset"),
        ("B", "during the anomaly, 1 min after onset"),
    ]  # C is 124 min before: outside the window; the single-row spike at 10:08 is not an anomaly
    assert fired.message.startswith(f"anomaly v > 40 from {T0.format(4)} to {T0.format(5)}")
    [quiet] = _run(series, rules.replace("LIMIT", "100")).findings
    assert not quiet.fired and quiet.message == "no anomaly v > 100 lasting 2+ rows"


def test_threshold_windows_and_column_comparison(series: Path) -> None:
    rule = '[[rules]]\nid = "t"\nkind = "threshold"\nsource = "m"\ncolumn = "v"\nop = ">="\n{}\n'
    [fired] = _run(series, SERIES + rule.format("value = 50")).findings
    assert fired.fired and fired.category == "threshold"
    assert [(w.start, w.end, w.rows, w.peak) for w in fired.windows] == [
        (T0.format(4), T0.format(5), 2, 55),
        (T0.format(8), T0.format(8), 1, 60),
    ]
    [consecutive] = _run(series, SERIES + rule.format("value = 50\nmin_consecutive = 2")).findings
    assert [w.rows for w in consecutive.windows] == [2]
    [by_column] = _run(series, SERIES + rule.format('value_column = "cap"')).findings
    assert by_column.fired and by_column.message.startswith("v >= cap in 3 rows, 2 window(s)")
    [quiet] = _run(series, SERIES + rule.format("value = 61")).findings
    assert not quiet.fired and quiet.message == "v >= 61 never holds (10 rows)"


def test_outliers_robust_z(series: Path) -> None:
    rule = '[[rules]]\nid = "o"\nkind = "outliers"\nsource = "m"\ncolumn = "{}"\n'
    [fired] = _run(series, SERIES + rule.format("v")).findings
    assert fired.fired and fired.category == "distribution"
    assert fired.message.startswith("3 v outlier(s) (median 11, MAD 1, |z| > 3.5)")
    [quiet] = _run(series, SERIES + rule.format("err")).findings
    assert not quiet.fired


def test_outliers_when_most_values_are_equal(tmp_path: Path) -> None:
    _csv(tmp_path / "m.csv", "ts,v", [f"{T0.format(i)},{v}" for i, v in enumerate([5] * 9 + [500])])
    rule = '[[rules]]\nid = "o"\nkind = "outliers"\nsource = "m"\ncolumn = "v"\n'
    [fired] = _run(tmp_path, SERIES + rule).findings  # MAD is 0: the mean absolute deviation takes over
    assert fired.fired and fired.windows[0].start == T0.format(9)
    _csv(tmp_path / "m.csv", "ts,v", [f"{T0.format(i)},7" for i in range(5)])
    [flat] = _run(tmp_path, SERIES + rule).findings
    assert not flat.fired and flat.message == "all v values equal 7"


def test_breakdown_dominant_value(tmp_path: Path) -> None:
    rows = [
        f"{T0.format(i)},{500 if i < 8 else 200},{'pool timeout' if i < 7 else 'reset'}" for i in range(10)
    ]
    _csv(tmp_path / "m.csv", "ts,status,msg", rows)
    rule = '[[rules]]\nid = "b"\nkind = "breakdown"\nsource = "m"\ncolumn = "msg"\n{}\n'
    [fired] = _run(
        tmp_path, SERIES + rule.format('where = { column = "status", op = "==", value = 500 }')
    ).findings
    assert fired.fired and [(i["value"], i["rows"]) for i in fired.items] == [
        ("pool timeout", 7),
        ("reset", 1),
    ]
    assert "'pool timeout' is 88% of 8 rows" in fired.message
    [quiet] = _run(tmp_path, SERIES + rule.format("")).findings
    assert not quiet.fired and "10 rows, none dominant" in quiet.message


def test_bad_source_data_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text('{"not": "a list"}')
    rules = '[sources.m]\npath = "m.json"\n[[rules]]\nid = "x"\nkind = "missing_fields"\nsource = "m"\nfields = ["a"]\n'
    with pytest.raises(ConfigError, match="expected a list of JSON objects"):
        _run(tmp_path, rules)
    (tmp_path / "m.json").write_text("[1,")
    with pytest.raises(ConfigError, match="not valid JSON"):
        _run(tmp_path, rules)


def test_run_rules_writes_json_and_markdown(tmp_path: Path) -> None:
    task = TaskRegistry.discover().get("incident-review")
    summary = run_rules(task, tmp_path / "out")
    assert RulesSummary.model_validate_json((tmp_path / "out" / "rules_summary.json").read_text()) == summary
    markdown = (tmp_path / "out" / "rules_summary.md").read_text()
    assert markdown == summary.to_markdown()
    table = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(summary.findings)
    assert all(line.replace("\\|", "").count("|") == 5 for line in table), (
        "a pipe in a message broke the table"
    )


def test_run_rules_without_rules_file(tmp_path: Path) -> None:
    scaffold_task("plain", tmp_path)
    with pytest.raises(ConfigError, match=r"has no rules\.toml"):
        run_rules(TaskRegistry.discover(tmp_path).get("plain"), tmp_path / "out")


def test_incident_review_rules_fire_where_the_data_says(tmp_path: Path) -> None:
    summary = run_rules(TaskRegistry.discover().get("incident-review"), tmp_path)
    fired = {f.rule: f for f in summary.findings if f.fired}
    assert sorted(fired) == sorted([
        "pool-fields", "gateway-log-gaps", "errors-vs-gateway-logs", "releases-vs-latency-onset", "p99-slo",
        "db-pool-saturated", "db-pool-queue", "p99-outliers", "gateway-error-causes", "pool-top-holder",
    ])  # fmt: skip
    assert {f.rule for f in summary.findings if not f.fired} == {
        "metrics-fields",
        "metrics-gaps",
        "traffic-outliers",
    }
    gap = fired["gateway-log-gaps"].windows[0]
    assert gap.start.startswith("2026-09-02T22:13:") and gap.end.startswith("2026-09-02T22:16:")
    assert [i["at"][11:16] for i in fired["errors-vs-gateway-logs"].items] == ["22:14", "22:15"]
    assert [(i["event"], i["position"]) for i in fired["releases-vs-latency-onset"].items] == [
        ("REL-2291", "8 min before onset"),
        ("REL-2292", "during the anomaly, 31 min after onset"),
    ]
    assert [(w.start[11:16], w.end[11:16], w.rows) for w in fired["p99-slo"].windows] == [
        ("21:04", "22:23", 80)
    ]
    assert [(w.start[11:16], w.end[11:16]) for w in fired["db-pool-saturated"].windows] == [
        ("21:04", "22:23")
    ]
    assert fired["pool-top-holder"].items[0]["value"] == "ledger-reconcile"


def test_rules_engine_never_imports_model_code(tmp_path: Path) -> None:
    script = f"""
import sys
from pathlib import Path
from pse.tasks import TaskRegistry, run_rules
task = TaskRegistry.discover().get("incident-review")
task.seed_workspace(Path({str(tmp_path / "ws")!r}))
summary = run_rules(task, Path({str(tmp_path / "out")!r}))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {{"autogen_core", "autogen_agentchat", "autogen_ext",
    "openai", "ollama", "httpx", "tiktoken"}} or m.startswith("pse.models"))
print(len(summary.findings), loaded)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout == "13 []\n"
