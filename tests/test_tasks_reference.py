"""The two reference tasks: their cassettes' files really fail and pass the real checks as scripted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pse.tasks import Task, TaskRegistry

_WRITE = re.compile(
    r'<invoke name="write_file">\s*<parameter name="path">(.*?)</parameter>\s*'
    r'<parameter name="content">(.*?)</parameter>\s*</invoke>',
    re.S,
)
_RUFF = Path(sys.executable).parent / "ruff"
_REPO_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _task(name: str) -> Task:
    return TaskRegistry.discover().get(name)


def _turns(task: Task) -> list[dict[str, str]]:
    assert task.cassette_path is not None
    turns: list[dict[str, str]] = json.loads(task.cassette_path.read_text())["turns"]
    return turns


def _writes(content: str) -> dict[str, str]:
    return dict(_WRITE.findall(content))


def _pytest(workspace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio", "-W", "ignore"],
        cwd=workspace, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _ruff_clean(workspace: Path) -> None:
    for config in (["--isolated"], ["--config", str(_REPO_PYPROJECT)] if _REPO_PYPROJECT.is_file() else []):
        if config:
            result = subprocess.run(
                [str(_RUFF), "check", *config, "."], cwd=workspace, capture_output=True, text=True
            )
            assert result.returncode == 0, result.stdout


def test_code_delivery_cassette_shape() -> None:
    turns = _turns(_task("code-delivery"))
    roles = [t["role"] for t in turns]
    assert (
        roles == ["Planner"] + ["Specialist"] * 2 + ["Evaluator"] * 2 + ["Specialist"] * 2 + ["Evaluator"] * 2
    )
    assert (
        '<verdict status="PARTIAL">' in turns[4]["content"]
        and '<verdict status="PASS">' in turns[8]["content"]
    )
    for index in (3, 7):  # each Evaluator cycle runs both required checks itself
        assert '<invoke name="run_pytest">' in turns[index]["content"]
        assert '<invoke name="run_ruff">' in turns[index]["content"]
    assert set(re.findall(r'<output path="(.*?)"/>', turns[0]["content"])) == {
        "quicksort.py",
        "test_quicksort.py",
    }


def test_code_delivery_first_version_really_fails_and_revision_really_passes(tmp_path: Path) -> None:
    turns = _turns(_task("code-delivery"))
    first, revision = _writes(turns[1]["content"]), _writes(turns[5]["content"])
    assert sorted(first) == ["quicksort.py", "test_quicksort.py"] and sorted(revision) == ["quicksort.py"]
    for path, content in first.items():
        (tmp_path / path).write_text(content)
    failing = _pytest(tmp_path)
    assert failing.returncode == 1
    assert "2 failed, 5 passed" in failing.stdout
    assert "FAILED test_quicksort.py::test_duplicates" in failing.stdout
    assert "assert [1, 2, 3] == [1, 1, 2, 3, 3, 3]" in failing.stdout  # what the PARTIAL verdict quotes
    assert "quicksort([3, 1, 3, 2, 1, 3]) returned [1, 2, 3]" in turns[4]["content"]
    _ruff_clean(tmp_path)
    (tmp_path / "quicksort.py").write_text(revision["quicksort.py"])
    passing = _pytest(tmp_path)
    assert passing.returncode == 0, passing.stdout
    assert "7 passed" in passing.stdout
    _ruff_clean(tmp_path)


def test_code_delivery_messages_parse_with_the_protocol() -> None:
    protocol = pytest.importorskip("pse.protocol")
    turns = _turns(_task("code-delivery"))
    plan = protocol.parse_plan(turns[0]["content"])
    assert [c.id for c in plan.criteria] == ["AC1", "AC2", "AC3", "AC4"]
    assert [protocol.parse_verdict(turns[i]["content"]).status for i in (4, 8)] == ["PARTIAL", "PASS"]


def test_incident_review_cassette_files_pass_the_check(tmp_path: Path) -> None:
    task = _task("incident-review")
    turns = _turns(task)
    assert [t["role"] for t in turns] == [
        "Planner",
        "Specialist",
        "Specialist",
        "Specialist",
        "Evaluator",
        "Evaluator",
    ]
    workspace = tmp_path / "ws"
    task.seed_workspace(workspace)
    for path in re.findall(r'<parameter name="path">(.*?)</parameter>', turns[1]["content"]):
        assert (workspace / path).is_file(), f"the Specialist reads {path}, which seeding does not provide"
    writes = _writes(turns[2]["content"])
    assert sorted(writes) == sorted(task.config.expected_outputs)
    check = task.resolved_checks(task.dir.resolve())["evidence_index"]
    before = subprocess.run(check, shell=True, cwd=workspace, capture_output=True, text=True)
    assert before.returncode == 1 and "evidence_index.json: missing" in before.stdout
    for path, content in writes.items():
        (workspace / path).write_text(content)
    after = subprocess.run(check, shell=True, cwd=workspace, capture_output=True, text=True)
    assert after.returncode == 0, after.stdout
    assert after.stdout == "evidence check: ok (11 evidence items, 5 conclusions)\n"
    assert (
        '<invoke name="run_check">\n<parameter name="name">evidence_index</parameter>' in turns[4]["content"]
    )
    assert "run_check evidence_index: ok (11 evidence items, 5 conclusions)" in turns[5]["content"]


def test_incident_review_report_separates_facts_hypotheses_and_ruled_out() -> None:
    report = _writes(_turns(_task("incident-review"))[2]["content"])["incident_report.md"]
    sections = re.findall(r"^## (.+)$", report, re.M)
    assert sections == [
        "Summary", "Timeline", "Facts", "Hypotheses (not verified by this data)", "Ruled out", "Recommendations",
        "Unresolved",
    ]  # fmt: skip
    recommendations = report.split("## Recommendations")[1].split("## Unresolved")[0]
    assert recommendations.count("Impact:") == recommendations.count("Rollback condition:") == 3


# --- the evidence check on bad input ---------------------------------------------------------------


@pytest.fixture
def good(tmp_path: Path) -> Path:
    task = _task("incident-review")
    task.seed_workspace(tmp_path)
    for path, content in _writes(_turns(task)[2]["content"]).items():
        (tmp_path / path).write_text(content)
    return tmp_path


def _check(workspace: Path) -> subprocess.CompletedProcess[str]:
    task = _task("incident-review")
    command = task.resolved_checks(task.dir.resolve())["evidence_index"]
    return subprocess.run(command, shell=True, cwd=workspace, capture_output=True, text=True)


def _edit_index(workspace: Path, change: object) -> None:
    index = json.loads((workspace / "evidence_index.json").read_text())
    change(index)  # type: ignore[operator]
    (workspace / "evidence_index.json").write_text(json.dumps(index))


def test_check_rejects_a_schema_violation(good: Path) -> None:
    _edit_index(good, lambda ix: ix["evidence"][0].update(kind="gut feeling", extra=1))
    result = _check(good)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "evidence check: 2 problem(s)",
        "- evidence_index.json: evidence.0.kind: Input should be 'metrics', 'logs', 'db_pool', 'releases' or "
        "'knowledge'",
        "- evidence_index.json: evidence.0.extra: Extra inputs are not permitted",
    ]


def test_check_rejects_unknown_references_and_single_kind_facts(good: Path) -> None:
    _edit_index(good, lambda ix: ix["conclusions"][0].update(evidence=["E1", "E7", "E99"]))
    with (good / "incident_report.md").open("a") as handle:
        handle.write("\nSee also [E42].\n")
    lines = _check(good).stdout.splitlines()
    assert lines == [
        "evidence check: 3 problem(s)",
        "- evidence_index.json: conclusion C1 cites unknown evidence E99",
        "- evidence_index.json: conclusion C1 (fact) rests on 1 independent evidence kind(s) (metrics); a fact or "
        "ruled-out cause needs two of db_pool, logs, metrics, releases, or mark it a hypothesis",
        "- incident_report.md: cites [E42], which is not in evidence_index.json",
    ]


def test_check_rejects_duplicates_and_missing_sources(good: Path) -> None:
    def change(ix: dict[str, list[dict[str, str]]]) -> None:
        ix["evidence"][1]["id"] = "E1"
        ix["evidence"][2]["source"] = "data/made_up.csv"

    _edit_index(good, change)
    lines = _check(good).stdout.splitlines()
    assert "- evidence_index.json: evidence id E1 is used more than once" in lines
    assert "- evidence_index.json: E3.source 'data/made_up.csv' is not a file in the workspace" in lines


def test_check_rejects_a_report_without_citations(good: Path) -> None:
    (good / "incident_report.md").write_text("# Review\n\nThe database did it.\n")
    assert _check(good).stdout.splitlines()[1] == (
        "- incident_report.md: cites no evidence; reference index items as [E1], [E2], ..."
    )


def test_shipped_schema_is_the_checks_model() -> None:
    task = _task("incident-review")
    printed = subprocess.run(
        [sys.executable, str(task.dir / "checks" / "check_evidence.py"), "--print-schema"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(printed.stdout) == json.loads((task.dir / "evidence_index.schema.json").read_text())


def test_incident_data_is_small_and_reproducible(tmp_path: Path) -> None:
    data = _task("incident-review").dir / "data"
    assert sum(p.stat().st_size for p in data.iterdir()) < 400_000
    script = (
        "import importlib.util, pathlib, sys;"
        f"spec = importlib.util.spec_from_file_location('gen', {str(data / 'generate.py')!r});"
        "gen = importlib.util.module_from_spec(spec); spec.loader.exec_module(gen);"
        f"gen.generate(pathlib.Path({str(tmp_path)!r}))"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    for name in ("metrics.csv", "gateway.jsonl", "db_pool.csv", "releases.json"):
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), (
            f"{name} differs from its generator"
        )
