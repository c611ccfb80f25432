"""A person answers an escalated run through the real CLI: a note and one more cycle, a grant, accept,
reject; what is refused; and a role that tries to answer an escalation through a tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import pse, run_turns
from pse.config import load_settings
from pse.protocol import render_tool_calls
from pse.runner import prepare_resume
from pse.sandbox import bwrap_problem
from pse.tasks import TaskRegistry

DEMO = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]
NOTE = "Values equal to the pivot are being dropped: keep them."


def _escalated(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    turns: list[dict[str, str]] | None = None,
) -> tuple[str, Path]:
    """A code-delivery run that ends ESCALATED after its PARTIAL cycle (no retries), with the rest of the
    demo's turns still in its cassette."""
    monkeypatch.setenv("PSE_MAX_PARTIAL_RETRIES", "0")
    monkeypatch.setenv("PSE_MAX_FAIL_RETRIES", "0")
    runs = tmp_path / "runs"
    code, summary = run_turns(monkeypatch, capsys, turns or DEMO, tmp_path / "cassette.json", runs)
    assert (code, summary["outcome"]) == (1, "ESCALATED")
    return summary["run_id"], runs


def _trace(runs: Path, run_id: str) -> dict[str, Any]:
    return json.loads((runs / run_id / "trace.json").read_text())


def test_a_note_and_one_more_cycle_take_an_escalated_run_to_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, runs = _escalated(tmp_path, monkeypatch, capsys)
    before = _trace(runs, run_id)["cassette_positions"]
    code, stdout, stderr = pse(
        monkeypatch,
        capsys,
        "answer",
        run_id,
        "--note",
        NOTE,
        "--retries",
        "1",
        "--runs-dir",
        str(runs),
        "--json",
    )
    assert code == 0, stderr
    assert json.loads(stdout)["outcome"] == "PASSED"
    trace = _trace(runs, run_id)
    assert [c["kind"] for c in trace["cycles"]] == ["initial", "revise"]
    assert trace["cycles"][1]["step_buffer"].startswith(
        f"## A person's answer to the escalation ({trace['answers'][0]['by']})\n{NOTE}"
    )
    (answer,) = trace["answers"]
    assert (answer["decision"], answer["retries"], answer["after_cycle"], answer["outcome_before"]) == (
        "resume",
        1,
        1,
        "ESCALATED",
    )
    assert answer["by"] and answer["via"] == "cli"
    moves = [(t["from"], t["to"]) for t in trace["transitions"]]
    assert ("ESCALATED", "REVISING") in moves and moves[-1] == ("REVIEWING", "PASSED")
    # No model call repeated: the cassette went on from where the escalated run stood.
    assert before == {"Planner": 1, "Specialist": 2, "Evaluator": 2}
    assert trace["cassette_positions"] == {"Planner": 1, "Specialist": 4, "Evaluator": 4}
    assert trace["resumed"] == 1


def test_the_cycles_a_person_allowed_hold_whatever_the_limits_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = [DEMO[0], *DEMO[1:5], *DEMO[1:5], *DEMO[1:5]]  # PARTIAL, and PARTIAL again after the answer
    run_id, runs = _escalated(tmp_path, monkeypatch, capsys, partial)
    monkeypatch.setenv("PSE_MAX_PARTIAL_RETRIES", "5")
    monkeypatch.setenv("PSE_MAX_CRITERION_FAILURES", "9")
    code, stdout, _ = pse(monkeypatch, capsys, "answer", run_id, "--runs-dir", str(runs), "--json")
    assert (code, json.loads(stdout)["outcome"]) == (1, "ESCALATED")
    trace = _trace(runs, run_id)
    assert len(trace["cycles"]) == 2
    assert (
        trace["outcome_reason"] == "PARTIAL (TESTS_FAILING) in the 1 cycle(s) a person allowed (pse answer)"
    )
    record = json.loads((runs / run_id / "escalation.json").read_text())
    assert [a["decision"] for a in record["answers"]] == ["resume"]
    assert "## Answered before" in (runs / run_id / "escalation.md").read_text()


def test_accept_is_never_a_pass_and_reject_closes_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    accepted, runs = _escalated(tmp_path / "a", monkeypatch, capsys)
    code, stdout, _ = pse(
        monkeypatch, capsys, "answer", accepted, "--accept", "--runs-dir", str(runs), "--json"
    )
    assert (code, json.loads(stdout)) == (
        0,
        {"run_id": accepted, "outcome": "ACCEPTED_BY_HUMAN", "answer": "accept"},
    )
    trace = _trace(runs, accepted)
    assert trace["state"] == "ACCEPTED_BY_HUMAN" and trace["transitions"][-1]["to"] == "ACCEPTED_BY_HUMAN"
    code, stdout, _ = pse(monkeypatch, capsys, "stats", "--runs-dir", str(runs), "--json")
    stats = json.loads(stdout)
    assert stats["outcomes"] == {"ACCEPTED_BY_HUMAN": 1}
    assert stats["first_cycle_pass_rate"] == 0.0 and stats["mean_cycles_to_pass"] is None
    code, _, err = pse(monkeypatch, capsys, "answer", accepted, "--note", "again", "--runs-dir", str(runs))
    assert code == 2 and "is ACCEPTED_BY_HUMAN: only an ESCALATED run takes an answer" in err

    rejected, runs = _escalated(tmp_path / "r", monkeypatch, capsys)
    assert pse(monkeypatch, capsys, "answer", rejected, "--reject", "--runs-dir", str(runs))[0] == 0
    assert _trace(runs, rejected)["outcome"] == "ESCALATED"
    code, _, err = pse(monkeypatch, capsys, "answer", rejected, "--retries", "2", "--runs-dir", str(runs))
    assert code == 2 and f"run {rejected} was closed by" in err


def test_bad_answers_are_refused_and_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, runs = _escalated(tmp_path, monkeypatch, capsys)
    before = (runs / run_id / "trace.json").read_text()
    for args, message in [
        (["--grant", "teleport"], "no tool 'teleport'; the tools are read_file"),
        (["--grant", "Specialist.bash:admin"], "bash takes the modes read-only, read-write, not 'admin'"),
        (["--grant", "Boss.bash"], "no role 'Boss'"),
        (["--note", "x" * 2001], "--note is 2001 characters; at most 2000"),
        (["--retries", "0"], "--retries must be at least 1"),
        (["--accept", "--note", "fine"], "--accept and --reject take no --note"),
        (["--accept", "--reject"], "pass --accept or --reject, not both"),
    ]:
        code, _, err = pse(monkeypatch, capsys, "answer", run_id, *args, "--runs-dir", str(runs))
        assert code == 2 and message in err, (args, err)
    assert (runs / run_id / "trace.json").read_text() == before
    code, _, err = pse(monkeypatch, capsys, "answer", "20261201-000000-nope-000000", "--runs-dir", str(runs))
    assert code == 2 and "no run '20261201-000000-nope-000000'" in err


def test_a_grant_widens_the_policy_of_that_run_only_and_is_audited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, runs = _escalated(tmp_path, monkeypatch, capsys)
    from pse.runner import answer_run

    settings = load_settings(runs_dir=runs)
    answer_run(run_id, settings, grants=["bash:read-only"], by="reviewer@example")
    prepared = prepare_resume(run_id, settings)
    decided = prepared.engine.setup.tools.policy.decide("Specialist", "bash")  # type: ignore[attr-defined]
    assert decided.allowed and decided.rule == "human.Specialist.bash"
    assert _trace(runs, run_id)["answers"][0]["grants"] == ["Specialist.bash:read-only"]
    # Another escalated run keeps the default policy: grants live in the answered trace only.
    other, other_runs = _escalated(tmp_path / "other", monkeypatch, capsys)
    answer_run(other, load_settings(runs_dir=other_runs), by="reviewer@example")
    untouched = prepare_resume(other, load_settings(runs_dir=other_runs)).engine.setup.tools.policy  # type: ignore[attr-defined]
    assert not untouched.decide("Specialist", "bash").allowed


MODES = [
    pytest.param("bwrap", marks=pytest.mark.skipif(bwrap_problem() is not None, reason="no bwrap")),
    "fallback",
]


@pytest.mark.parametrize("mode", MODES)
def test_a_role_cannot_answer_an_escalation_through_a_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    victim, runs = _escalated(tmp_path, monkeypatch, capsys)
    pse_bin = Path(sys.executable).parent / "pse"
    attack = f"{pse_bin} answer {victim} --accept --runs-dir {runs.resolve()} 2>&1; echo exit=$?"
    evaluator = render_tool_calls([("bash", {"command": attack})])
    turns = [*DEMO[:3], {"role": "Evaluator", "content": evaluator}, *DEMO[4:]]
    monkeypatch.setenv("PSE_SANDBOX", mode)
    monkeypatch.setenv("PSE_MAX_PARTIAL_RETRIES", "3")
    _, summary = run_turns(monkeypatch, capsys, turns, tmp_path / "attack.json", runs)
    attacker = _trace(runs, summary["run_id"])
    (record,) = [c for c in attacker["cycles"][0]["tool_calls"] if c["tool"] == "bash"]
    assert "exit=0" not in record["output"], record["output"]
    assert _trace(runs, victim)["outcome"] == "ESCALATED" and _trace(runs, victim)["answers"] == []


# ---- the dashboard API --------------------------------------------------------------------------

TOKEN = "answer-token-for-the-tests-0123456789"
HEADERS = {"X-PSE-Request": "1", "Authorization": f"Bearer {TOKEN}"}


def test_the_dashboard_answers_only_with_a_token_and_resumes_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from fastapi.testclient import TestClient

    from pse.config import Settings
    from pse.web import create_app

    run_id, runs = _escalated(tmp_path, monkeypatch, capsys)
    url = f"/api/runs/{run_id}/answer"
    with TestClient(create_app(Settings(runs_dir=runs)), base_url="http://127.0.0.1") as open_server:
        refused = open_server.post(url, json={"decision": "accept"}, headers={"X-PSE-Request": "1"})
        assert refused.status_code == 403 and "needs PSE_WEB_TOKEN" in refused.json()["detail"]
    assert _trace(runs, run_id)["answers"] == []
    with TestClient(
        create_app(Settings(runs_dir=runs, web_token=TOKEN)), base_url="http://127.0.0.1"
    ) as client:
        assert client.post(url, json={"decision": "maybe"}, headers=HEADERS).status_code == 422
        bad = client.post(url, json={"grants": ["teleport"]}, headers=HEADERS)
        assert bad.status_code == 409 and "no tool 'teleport'" in bad.json()["detail"]
        started = client.post(url, json={"note": NOTE, "retries": 1}, headers=HEADERS)
        assert started.status_code == 202 and started.json()["answer"] == "resume"
        deadline = time.monotonic() + 60
        while _trace(runs, run_id)["outcome"] is None and time.monotonic() < deadline:
            time.sleep(0.2)
        trace = _trace(runs, run_id)
        assert trace["outcome"] == "PASSED"
        assert (
            trace["answers"][0]["by"] == "dashboard (PSE_WEB_TOKEN holder)"
            and trace["answers"][0]["via"] == "api"
        )
        again = client.post(url, json={"decision": "accept"}, headers=HEADERS)
        assert again.status_code == 409 and "only an ESCALATED run takes an answer" in again.json()["detail"]
