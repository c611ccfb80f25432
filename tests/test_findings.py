"""Findings with a severity, and the gate rule (issue 32, item 4): `<finding id= severity= …>` in a verdict,
parsed strictly; a PASS with an unresolved finding the task's rule blocks on does not stand."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import pse
from pse.engine._gates import GatePolicy, evaluate_gates
from pse.engine._step_buffer import replan_packet, revise_packet
from pse.events import PlanItem, PlanRecord
from pse.exceptions import ProtocolError
from pse.protocol import parse_verdict
from repo_support import FIXED, PASS, git, make_repo, make_task, run, turns

HIGH = '<finding id="F1" severity="high" criterion="AC1" path="calc/core.py" line="2">add overflows on big ints</finding>'
LOW = '<finding id="F2" severity="low">a docstring is missing</finding>'


def _with(*findings: str, status: str = "PASS") -> str:
    return PASS.replace('status="PASS"', f'status="{status}"').replace(
        "<summary>", "".join(findings) + "<summary>"
    )


class TestParsing:
    def test_findings_are_read_with_their_place(self) -> None:
        verdict = parse_verdict(_with(HIGH, LOW))
        assert [(f.id, f.severity, f.criterion, f.path, f.line) for f in verdict.findings] == [
            ("F1", "high", "AC1", "calc/core.py", 2),
            ("F2", "low", None, None, None),
        ]
        assert verdict.findings[0].describe() == "F1 high (AC1, calc/core.py:2): add overflows on big ints"
        assert [c.id for c in verdict.criteria] == ["AC1", "AC2"]  # the criteria are read as before

    @pytest.mark.parametrize(
        ("finding", "problem"),
        [
            ('<finding id="F1" severity="critical">x</finding>', 'needs severity="high", "medium" or "low"'),
            ('<finding severity="high">x</finding>', "a <finding> has no id"),
            (
                '<finding id="F1" severity="low">x</finding><finding id="F1" severity="low">y</finding>',
                "twice",
            ),
            ('<finding id="F1" severity="low" line="two">x</finding>', "is not a line number"),
        ],
    )
    def test_a_malformed_finding_is_a_protocol_error(self, finding: str, problem: str) -> None:
        with pytest.raises(ProtocolError, match=problem):
            parse_verdict(_with(finding))


class TestTheGateRule:
    PLAN = PlanRecord(goal="g", criteria=[PlanItem(id="AC1", text="a"), PlanItem(id="AC2", text="b")])

    def _gate(self, verdict_text: str, rule: str = "high") -> dict[str, tuple[bool, str]]:
        record = evaluate_gates(
            verdict=parse_verdict(verdict_text),
            plan=self.PLAN,
            tool_calls=[],
            policy=GatePolicy(block_findings=rule),
            workspace=Path("/nonexistent"),
        )
        return {r.name: (r.passed, r.detail) for r in record.results}

    def test_a_high_finding_blocks_and_a_low_one_does_not(self) -> None:
        passed, detail = self._gate(_with(HIGH, LOW))["findings"]
        assert not passed and detail.startswith("PASS with unresolved high finding(s): F1 high")
        assert self._gate(_with(LOW))["findings"] == (True, "no high finding (1 in all)")

    def test_the_rule_is_the_tasks(self) -> None:
        assert not self._gate(_with(LOW), rule="low")["findings"][0]
        assert self._gate(_with(HIGH), rule="none")["findings"][0]

    def test_only_a_pass_is_gated_by_findings(self) -> None:
        assert "findings" not in self._gate(_with(HIGH, status="PARTIAL"))

    def test_the_next_cycle_is_told_the_findings_worst_first(self) -> None:
        verdict = parse_verdict(_with(LOW, HIGH, status="PARTIAL"))
        gate = evaluate_gates(
            verdict=verdict,
            plan=self.PLAN,
            tool_calls=[],
            policy=GatePolicy(),
            workspace=Path("/nonexistent"),
        )
        packet = revise_packet(cycle=2, plan=self.PLAN, verdict=verdict, gate=gate, artifacts=[], cap=2000)
        lines = packet.splitlines()
        start = lines.index("Evaluator's findings (fix every high one):")
        assert lines[start + 1 : start + 3] == [
            "- F1 high (AC1, calc/core.py:2): add overflows on big ints",
            "- F2 low: a docstring is missing",
        ]
        again = replan_packet(cycle=3, reason="r", verdict=verdict, plan=self.PLAN, cap=2000)
        assert "- F1 high (AC1, calc/core.py:2)" in again


def test_a_high_finding_blocks_a_pass_the_criteria_alone_would_allow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_task(tmp_path)
    repo = make_repo(tmp_path)
    summary, trace = run(tmp_path, repo, turns({"calc/core.py": FIXED}, _with(HIGH)))
    assert summary.outcome == "ESCALATED" and summary.commit is None
    cycle = trace["cycles"][0]
    assert all(c["met"] for c in cycle["verdict"]["criteria"])  # the criteria alone said PASS
    assert cycle["verdict"]["findings"][0]["severity"] == "high"
    assert [f.split(":")[0] for f in cycle["gate"]["failures"]] == ["findings"]
    assert git(repo, "rev-parse", summary.branch or "") == git(repo, "rev-parse", "HEAD")
    escalation = (Path(summary.trace).parent / "escalation.md").read_text()
    assert (
        "## Findings in the last verdict\n- F1 high (AC1, calc/core.py:2): add overflows on big ints"
        in escalation
    )
    code, shown, _ = pse(
        monkeypatch, capsys, "trace", "show", summary.run_id, "--runs-dir", str(tmp_path / "runs")
    )
    assert code == 0 and "finding F1 high (AC1, calc/core.py:2): add overflows on big ints" in shown


def test_the_evaluator_of_a_repository_run_is_told_how_to_report_findings(tmp_path: Path) -> None:
    from pse.config import Settings
    from pse.runner import prepare_run

    make_task(tmp_path)
    repo = make_repo(tmp_path)
    settings = Settings(provider="scripted", cassette=tmp_path / "none.json", runs_dir=tmp_path / "runs",
                        tasks_dir=tmp_path / "tasks")  # fmt: skip
    (tmp_path / "none.json").write_text('{"turns": []}')
    systems = {
        r.name: r.system_message for r in prepare_run("fix-repo", settings, repo=repo).engine.setup.team.roles
    }
    assert '<finding id="FINDING_ID" severity="SEVERITY"' in systems["Evaluator"]
    assert "<finding" not in systems["Specialist"] and "<finding" not in systems["Planner"]
    plain = {r.name: r.system_message for r in prepare_run("fix-repo", settings).engine.setup.team.roles}
    assert "<finding" not in plain["Evaluator"]  # recorded cassettes of other runs keep their prompts


def test_a_finding_that_comes_back_counts_against_its_criterion_cap() -> None:
    """Issue 32: a finding the revise did not remove is a failure of its criterion, even where the verdict
    calls the criterion met, so the per-criterion cap ends a loop of the same finding."""
    from pse.engine._escalation import criterion_failures, criterion_over_cap
    from pse.events import CriterionResult, FindingRecord, VerdictRecord
    from pse.trace import CycleRecord

    def cycle(index: int, *findings: FindingRecord) -> CycleRecord:
        met = [CriterionResult(id="AC1", met=True), CriterionResult(id="AC2", met=True)]
        verdict = VerdictRecord(status="PASS", reason_code="ALL_MET", criteria=met, findings=list(findings))
        return CycleRecord(
            index=index, kind="revise", first_speaker="Specialist", started_at="", verdict=verdict
        )

    high = FindingRecord(id="F1", severity="high", text="overflows", criterion="AC1", path="calc/core.py")
    elsewhere = FindingRecord(id="F1", severity="high", text="overflows", criterion="AC1", path="calc/io.py")
    loose = FindingRecord(id="F2", severity="low", text="a name")  # no criterion: no cap to count against
    cycles = [cycle(1, high, loose), cycle(2, high, loose), cycle(3, high)]
    back = "came back: F1 high (AC1, calc/core.py): overflows"
    assert criterion_failures(cycles) == {("AC1", ""): [(2, back), (3, back)]}
    assert criterion_over_cap(cycles[:2], 2) is None  # first seen in 1, back once in 2
    assert criterion_over_cap(cycles, 2) == ("AC1", 2)  # back again in 3: the cap is reached
    assert criterion_failures([cycle(1, high), cycle(2, elsewhere)]) == {}  # another file: a new finding
