"""The Planner asks a person instead of assuming (PSE_PLANNER_QUESTIONS, issue 14 item 3).

Through the real CLI, in two separate invocations (the wait is durable): the run stops in
AWAITING_ANSWER with no outcome, `pse trace list` shows it waiting, `pse answer --text` resumes it, and
the Planner's next cycle holds the questions and the answer. Off by default: a `<clarification>` is
then no plan, and the format repair asks for one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from cli_support import pse, run_turns
from gbnf_recognizer import Grammar
from pse.config import load_settings
from pse.exceptions import ConfigError, ProtocolError
from pse.protocol import TurnShape, find_clarification, protocol_from_json, turn_grammar, turn_schema
from pse.roles import Role
from pse.runner import prepare_run
from pse.tasks import TaskRegistry
from reference_turns import role_tools

DEMO = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]
ASK = (
    "Before I plan I need one decision.\n<clarification>\n"
    '  <question id="Q1">Must quicksort keep values equal to the pivot, or may it drop duplicates?</question>\n'
    "</clarification>"
)
ANSWER = "Keep every value: duplicates must survive the sort."


def _start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, first: str = ASK
) -> tuple[int, dict[str, Any], Path]:
    """The demo run with `first` as the Planner's first turn: (exit code, summary, runs directory)."""
    runs = tmp_path / "runs"
    turns = [{"role": "Planner", "content": first}, *DEMO]
    return (*run_turns(monkeypatch, capsys, turns, tmp_path / "cassette.json", runs), runs)


def test_the_planner_asks_the_run_waits_and_an_answer_resumes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PSE_PLANNER_QUESTIONS", "true")
    code, summary, runs = _start(monkeypatch, capsys, tmp_path)
    assert (code, summary["outcome"], summary["state"], summary["cycles"]) == (1, None, "AWAITING_ANSWER", 1)
    run_id = summary["run_id"]
    trace = json.loads((runs / run_id / "trace.json").read_text())
    (asked,) = trace["cycles"][0]["clarification"]["questions"]
    assert asked["id"] == "Q1" and "equal to the pivot" in asked["text"]
    assert trace["cycles"][0]["result"] == "QUESTIONS" and trace["transitions"][-1]["to"] == "AWAITING_ANSWER"
    code, listing, _ = pse(monkeypatch, capsys, "trace", "list", "--runs-dir", str(runs))
    assert "waiting for" in listing

    # A second process answers: nothing of the first is needed but the trace.
    code, _, err = pse(monkeypatch, capsys, "answer", run_id, "--note", "x", "--runs-dir", str(runs))
    assert code == 2 and "waits for answers to its Planner's questions (Q1: Must quicksort" in err
    code, stdout, err = pse(
        monkeypatch, capsys, "answer", run_id, "--text", ANSWER, "--runs-dir", str(runs), "--json"
    )
    assert code == 0, err
    assert json.loads(stdout)["outcome"] == "PASSED"
    trace = json.loads((runs / run_id / "trace.json").read_text())
    assert [c["kind"] for c in trace["cycles"]] == ["initial", "initial", "revise"]
    second = trace["cycles"][1]["messages"]
    assert second[0]["source"] == "Planner"
    (answer,) = trace["answers"]
    assert (answer["decision"], answer["text"], answer["questions"][0]["id"]) == ("answer", ANSWER, "Q1")
    moves = [(t["from"], t["to"]) for t in trace["transitions"]]
    assert ("START", "AWAITING_ANSWER") in moves and ("AWAITING_ANSWER", "PLANNED") in moves
    assert trace["cassette_positions"]["Planner"] == 2  # the question once, the plan once: nothing repeated
    assert trace["resumed"] == 1


def test_the_planner_reads_the_questions_and_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PSE_PLANNER_QUESTIONS", "true")
    _, summary, runs = _start(monkeypatch, capsys, tmp_path)
    run_id = summary["run_id"]
    from pse.engine import StartCycle
    from pse.runner import answer_run, prepare_resume

    settings = load_settings(runs_dir=runs)
    answer_run(run_id, settings, text=ANSWER, by="product-owner")
    prepared = prepare_resume(run_id, settings)
    start = prepared.engine._decide(None)
    assert isinstance(start, StartCycle) and (start.kind, start.phase.role) == ("initial", "Planner")
    packet = prepared.engine._spec(start).packet
    assert "## Your questions (cycle 1)\n- Q1: Must quicksort keep values equal to the pivot" in packet
    assert packet.endswith(f"## The person's answer (product-owner)\n{ANSWER}")
    system = prepared.engine.crew.roles["Planner"].system_message
    assert "## Questions to a person" in system


def test_off_by_default_a_clarification_is_no_plan_and_is_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, summary, runs = _start(monkeypatch, capsys, tmp_path)
    assert summary["outcome"] == "PASSED"
    trace = json.loads((runs / summary["run_id"] / "trace.json").read_text())
    assert trace["cycles"][0]["repairs"][0]["role"] == "Planner" and trace["answers"] == []
    assert "## Questions to a person" not in json.dumps(trace["cycles"][0]["messages"])
    prepared = prepare_run("code-delivery", load_settings(runs_dir=tmp_path / "r2"))
    assert "Questions to a person" not in prepared.engine.crew.roles["Planner"].system_message


def test_a_malformed_clarification_is_repaired_with_the_parsers_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PSE_PLANNER_QUESTIONS", "true")
    _, summary, runs = _start(monkeypatch, capsys, tmp_path, "<clarification>\n</clarification>")
    trace = json.loads((runs / summary["run_id"] / "trace.json").read_text())
    assert trace["cycles"][0]["repairs"][0]["error"] == (
        'clarification: no <question id="Q1">…</question> inside <clarification>'
    )
    assert summary["outcome"] == "PASSED"  # the repaired turn was the plan


def test_find_clarification_reads_questions_and_refuses_malformed_ones() -> None:
    found = find_clarification(
        '<clarification><question id="Q1">a?</question><question id="Q2">b?</question></clarification>'
    )
    assert found is not None and [(q.id, q.text) for q in found.questions] == [("Q1", "a?"), ("Q2", "b?")]
    assert find_clarification("<plan><goal>g</goal></plan>") is None
    for text, message in [
        (
            '<clarification><question id="Q1">a</question><question id="Q1">b</question></clarification>',
            "appears twice",
        ),
        ("<clarification><question>a</question></clarification>", "has no id"),
        ('<clarification><question id="Q1"> </question></clarification>', "is empty"),
        ("<clarification></clarification><clarification></clarification>", "more than one"),
    ]:
        with pytest.raises(ProtocolError, match=message):
            find_clarification(text)


def test_constrained_decoding_offers_the_question_only_when_questions_are_on() -> None:
    tools = role_tools(Role.PLANNER, "code-delivery")
    message = '<clarification>\n<question id="Q1">Ascending or descending?</question>\n</clarification>'
    on = TurnShape(Role.PLANNER, tools, None, 16, 3072, evidence=False, questions=True)
    off = TurnShape(Role.PLANNER, tools, None, 16, 3072, evidence=False)
    assert on.kinds() == ("plan", "clarification", "calls") and "clarification" not in off.kinds()
    assert Grammar(turn_grammar(on)).accepts(message) and not Grammar(turn_grammar(off)).accepts(message)
    assert Grammar(turn_grammar(on)).longest() <= 3072  # the budget holds with the new block
    schema = json.dumps(turn_schema(on))
    assert '"const": "clarification"' in schema
    rendered = protocol_from_json(
        json.dumps({"kind": "clarification", "questions": ["Ascending?", "Stable?"]})
    )
    found = find_clarification(rendered)
    assert found is not None and [q.text for q in found.questions] == ["Ascending?", "Stable?"]
    # Only the Planner asks.
    assert "clarification" not in TurnShape(Role.SPECIALIST, (), None, 16, 3072, questions=True).kinds()


def test_questions_with_the_native_protocol_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PSE_PLANNER_QUESTIONS works with the XML protocol only"):
        prepare_run(
            "code-delivery", load_settings(runs_dir=tmp_path, planner_questions=True, protocol="native")
        )
    assert not list(tmp_path.glob("*/workspace"))


def test_the_dashboard_takes_the_answers_with_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fastapi.testclient import TestClient

    from pse.config import Settings
    from pse.web import create_app

    monkeypatch.setenv("PSE_PLANNER_QUESTIONS", "true")
    _, summary, runs = _start(monkeypatch, capsys, tmp_path)
    run_id = summary["run_id"]
    token = "questions-token-0123456789abcdef"
    headers = {"X-PSE-Request": "1", "Authorization": f"Bearer {token}"}
    app = create_app(Settings(runs_dir=runs, web_token=token, planner_questions=True))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        started = client.post(f"/api/runs/{run_id}/answer", json={"text": ANSWER}, headers=headers)
        assert started.status_code == 202 and started.json()["answer"] == "answer"
        deadline = time.monotonic() + 60
        while (
            json.loads((runs / run_id / "trace.json").read_text())["outcome"] is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
    trace = json.loads((runs / run_id / "trace.json").read_text())
    assert trace["outcome"] == "PASSED" and trace["answers"][0]["via"] == "api"
