"""`pse doctor` against loopback stand-ins: what it finds, what it tells the user to set, its exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pse.cli import main
from pse.config import load_settings
from pse.doctor import WireFeatures, diagnose, largest_grammar, pse_sends
from pse.models import SERVER_PROBES
from pse.roles import ROLES
from standins import ChatStandIn, ModelServerStandIn, Reply

TOOL_CALL = '<tool_calls>\n<invoke name="read_file">\n<parameter name="path">notes.txt</parameter>\n</invoke>\n</tool_calls>'
VERDICT = (
    '<verdict status="PASS"><reason_code>ALL_MET</reason_code>'
    '<criterion id="AC1" met="true">read_file returned hello</criterion><summary>done</summary></verdict>'
)


def keeps_the_protocol(body: dict[str, Any]) -> str:
    """A model that writes what it is asked for: the tool call or the verdict."""
    system = body["messages"][0]["content"]
    return TOOL_CALL if "<tool_calls>" in system else VERDICT


def writes_prose(body: dict[str, Any]) -> str:
    return "Sure! I would read the file notes.txt and then say it passes."


def doctor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["pse", "doctor", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


async def test_a_model_that_keeps_the_protocol_is_usable_for_every_role() -> None:
    with ModelServerStandIn({"good": keeps_the_protocol}) as server:
        report = await diagnose(load_settings(provider="openai", base_url=server.url, model="good"))
        chats, server_url = server.chats("good"), server.url
    assert report.exit_code == 0 and report.config_errors == []
    [check] = report.checks  # one model, checked once for the three roles
    assert check.roles == ["Planner", "Specialist", "Evaluator"] and check.usable and check.problems == []
    assert (check.reachable, check.served, check.context_tokens) == (True, True, 8192)
    assert (check.grammar, check.native_tools) == ("yes", "no")
    assert check.tool_call["unconstrained"].valid is True and check.verdict["unconstrained"].valid is True
    assert check.tokens_per_s is not None and check.tokens_per_s > 0
    # The server reports its window and PSE checks none: the doctor says which variable to set.
    assert check.advice == [
        "the server reports a context window of 8192 tokens: set PSE_MODEL_CONTEXT_TOKENS=8192 so PSE checks "
        "prompts before a call"
    ]
    # The grammar probe, the tools probe, the two exchanges unconstrained, then PSE's own constraint probe
    # ("Say OK.") and both exchanges again, each carrying its role's grammar: the tool call a grammar
    # with the one tool offered, the verdict the Evaluator's without tools: a verdict is all it may write.
    assert [("grammar" in c, "tools" in c) for c in chats[:2]] == [(True, False), (False, True)]
    assert report.pse_constraint == "grammar" and len(chats) == 10
    tool_grammar, verdict_grammar = (c["grammar"] for c in chats[5:7])
    assert '"<invoke name=\\"read_file\\">"' in tool_grammar and "<verdict" not in tool_grammar
    assert "<verdict status=" in verdict_grammar and "<tool_calls>" not in verdict_grammar
    assert check.tool_call["constrained"].valid is True and check.verdict["constrained"].valid is True
    # Last, the largest grammar each role sends in a run (every tool, no token limit: unbounded values),
    # each in a one-token request.
    largest = chats[7:]
    expected = [largest_grammar(load_settings(), role)[0] for role in ROLES]
    assert [(c["max_tokens"], c["grammar"]) for c in largest] == [(1, g) for g in expected]
    assert "<report>" in expected[1] and '"<invoke name=\\"write_file\\">"' in expected[1]
    assert check.largest_grammar == "yes"
    assert check.largest_grammar_detail == "it took " + "; ".join(
        f"{role}'s largest grammar ({len(g):,} characters, no token limit)"
        for role, g in zip(ROLES, expected, strict=True)
    )
    # What runs learn of servers (issue 47): the doctor's own stand-in on a passing port is never kept; the
    # server it checked is learned anew, by its own constrained exchanges.
    cache = SERVER_PROBES.cache() if SERVER_PROBES.cache is not None else None
    assert cache is not None and list(json.loads(cache.read_text())) == [server_url]


async def test_a_server_that_refuses_or_dies_on_the_largest_grammar_is_unusable_with_it() -> None:
    """llama.cpp refuses a grammar over its repetition limit and llama-cpp-python's server dies; the
    doctor used to say "usable" because its probe grammars are tiny."""
    refused = ModelServerStandIn({"good": keeps_the_protocol})
    with refused as server:
        server.refuse_grammars_over = 5000  # a 400 for any grammar longer than this
        report = await diagnose(
            load_settings(provider="openai", base_url=server.url, model="good", model_max_tokens=4096)
        )
    [check] = report.checks
    assert report.exit_code == 1 and not check.usable and check.largest_grammar == "no"
    assert check.problems == [
        f"{check.largest_grammar_detail}; lower PSE_MODEL_MAX_TOKENS, or set PSE_CONSTRAIN=off"
    ]
    assert (
        check.largest_grammar_detail.startswith("the server rejected the Planner's largest grammar (")
        and "PSE_MODEL_MAX_TOKENS=4096): HTTP 400" in check.largest_grammar_detail
    )
    with ModelServerStandIn({"good": keeps_the_protocol}) as server:
        server.die_on_grammars_over = 5000  # the whole server stops, as llama-cpp-python's does
        report = await diagnose(
            load_settings(provider="openai", base_url=server.url, model="good", model_max_tokens=4096)
        )
    [check] = report.checks
    assert not check.usable and check.largest_grammar == "no"
    assert "the server crashed on the Planner's largest grammar" in check.largest_grammar_detail
    assert "(grammar rejected?)" in check.largest_grammar_detail


async def test_an_evaluator_that_writes_prose_is_unusable_and_the_doctor_says_why() -> None:
    models = {"good": keeps_the_protocol, "chatty": writes_prose}
    with ModelServerStandIn(models) as server:
        settings = load_settings(
            provider="openai", base_url=server.url, model="good", evaluator_model="chatty"
        )
        report = await diagnose(settings)
    assert report.exit_code == 1
    doers, judge = report.checks
    assert doers.roles == ["Planner", "Specialist"] and doers.usable
    assert judge.roles == ["Evaluator"] and not judge.usable
    assert judge.tool_call["unconstrained"].valid is False and judge.verdict["unconstrained"].valid is False
    # This PSE sends a grammar (auto), which the stand-in does not apply: the problems are of that mode.
    assert judge.problems[0].startswith(
        "no valid tool call constrained (no <tool_calls> block: 'Sure! I would"
    )
    assert judge.problems[1].startswith("no valid verdict constrained (verdict: found no <verdict>")
    assert all("use a larger instruction-tuned model for Evaluator" in p for p in judge.problems)


async def test_a_name_the_server_does_not_serve_is_named_with_the_variable_to_set() -> None:
    with ModelServerStandIn({"good": keeps_the_protocol}) as server:
        settings = load_settings(
            provider="openai", base_url=server.url, model="good", specialist_model="typo"
        )
        report = await diagnose(settings)
        typo_chats = server.chats("typo")
    unserved = next(c for c in report.checks if c.model == "typo")
    assert (unserved.reachable, unserved.served, unserved.usable) == (True, False, False)
    assert unserved.problems == [
        f"{unserved.url} does not serve 'typo' (it serves good); set PSE_SPECIALIST_MODEL to one of those "
        "(a llama.cpp server answers an unknown name with its default model, silently)"
    ]
    assert typo_chats == []  # nothing is asked of a model the server would swap for its default
    assert report.exit_code == 1


async def test_an_unreachable_server_says_what_to_start_or_set() -> None:
    with ModelServerStandIn({"good": keeps_the_protocol}) as server:
        url = server.url
    report = await diagnose(load_settings(provider="openai", base_url=url, model="good"))
    [check] = report.checks
    assert not check.reachable and not check.usable and report.exit_code == 1
    assert check.problems[0].startswith(f"cannot reach {url}: ConnectError")
    assert "python -m pse.local" in check.problems[0] and check.problems[0].endswith("or set PSE_BASE_URL")


async def test_grammar_asked_of_a_server_that_ignores_grammars_is_a_problem() -> None:
    with ModelServerStandIn({"good": keeps_the_protocol}, grammar=False, tools=True) as server:
        settings = load_settings(provider="openai", base_url=server.url, model="good", constrain="grammar")
        report = await diagnose(settings)
    [check] = report.checks
    assert (check.grammar, check.native_tools) == ("no", "yes")
    assert "the server ignored the grammar field" in check.grammar_detail
    assert check.problems[0].startswith("PSE_CONSTRAIN=grammar, but the server takes no grammar")
    assert check.mode == "unconstrained" and not check.usable


async def test_an_ollama_model_is_checked_through_ollama_s_api() -> None:
    with ChatStandIn("ollama") as server:
        server.script(Reply(content="no tools here"), Reply(content=TOOL_CALL), Reply(content=VERDICT))
        report = await diagnose(load_settings(provider="ollama", base_url=server.url, model="qwen"))
        paths = [r.path for r in server.requests]
    [check] = report.checks
    assert check.grammar == "no" and "Ollama takes a JSON schema" in check.grammar_detail
    assert check.native_tools == "no" and check.usable and check.served is None  # it lists no models here
    assert paths == [
        "/api/chat",
        "/api/chat",
        "/api/chat",
    ]  # tools probe, tool call, verdict; no grammar probe


@pytest.mark.parametrize(("constrain", "usable"), [("off", False), ("auto", True)])
async def test_a_model_that_keeps_the_protocol_only_constrained_is_told_to_constrain(
    monkeypatch: pytest.MonkeyPatch, constrain: str, usable: bool
) -> None:
    # As if PSE sent a grammar: the doctor then runs both exchanges a second time, constrained.
    async def sends_a_grammar(settings: object) -> WireFeatures:
        return WireFeatures("grammar", False, ("grammar", "messages", "model"))

    monkeypatch.setattr("pse.doctor._diagnose.pse_sends", sends_a_grammar)
    asked: list[str] = []

    def keeps_it_from_the_second_round(body: dict[str, Any]) -> str:
        asked.append(body["messages"][0]["content"])
        exchanges = [a for a in asked if a.startswith(("You request tools", "You are the Evaluator"))]
        return keeps_the_protocol(body) if len(exchanges) > 2 else writes_prose(body)

    with ModelServerStandIn({"m": keeps_it_from_the_second_round}) as server:
        settings = load_settings(provider="openai", base_url=server.url, model="m", constrain=constrain)
        report = await diagnose(settings)
    [check] = report.checks
    assert report.pse_constraint == "grammar" and check.usable is usable
    assert check.tool_call["unconstrained"].valid is False and check.tool_call["constrained"].valid is True
    if usable:
        assert check.mode == "constrained" and check.problems == []
    else:
        assert check.mode == "unconstrained"
        assert [p.split("); ")[1] for p in check.problems] == [
            "set PSE_CONSTRAIN=auto (it wrote a valid tool call constrained)",
            "set PSE_CONSTRAIN=auto (it wrote a valid verdict constrained)",
        ]


def test_no_model_configured_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = doctor(monkeypatch, capsys)
    assert code == 2 and out == ""
    assert "no model configured for any role" in err and "PSE_PROVIDER=openai" in err


async def test_one_role_without_a_model_is_named_with_its_own_variables() -> None:
    with ModelServerStandIn({"good": keeps_the_protocol}) as server:
        settings = load_settings(
            planner_provider="openai", planner_base_url=server.url, planner_model="good", specialist_provider="openai",
            specialist_base_url=server.url, specialist_model="good",
        )  # fmt: skip
        report = await diagnose(settings)
    assert report.exit_code == 2 and [c.roles for c in report.checks] == [["Planner", "Specialist"]]
    assert report.config_errors[0].startswith("no model configured for Evaluator")
    assert "or PSE_EVALUATOR_PROVIDER and the like for these roles" in report.config_errors[0]


def test_the_cli_prints_a_table_or_json_and_exits_by_the_findings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with ModelServerStandIn({"good": keeps_the_protocol, "chatty": writes_prose}) as server:
        monkeypatch.setenv("PSE_EVALUATOR_MODEL", "chatty")
        args = ("--provider", "openai", "--base-url", server.url, "--model", "good")
        code, out, _ = doctor(monkeypatch, capsys, *args)
        json_code, json_out, _ = doctor(monkeypatch, capsys, *args, "--json")
    assert code == json_code == 1
    assert "good" in out and "chatty" in out and "✗ Evaluator: no valid " in out
    report = json.loads(json_out)
    assert report["exit_code"] == 1 and [c["usable"] for c in report["checks"]] == [True, False]


async def test_the_wire_probe_sees_no_constraint_when_it_is_off_and_no_tools_in_dsml() -> None:
    wire = await pse_sends(load_settings(constrain="off", protocol="dsml"))
    assert wire.constraint is None and wire.tools is False
    assert {"messages", "model"} <= set(wire.fields)


def test_the_doctor_says_whether_the_sandbox_can_reach_the_runs_folder(tmp_path: Path) -> None:
    import os

    from pse.config import Settings
    from pse.doctor import check_sandbox

    fine = check_sandbox(Settings(runs_dir=tmp_path / "runs", sandbox="auto"))
    assert fine.problem is None and fine.mode in ("bwrap", "fallback") and not (tmp_path / "runs").exists()
    if os.geteuid() != 0:
        return
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    os.chown(closed, 1000, 1000)
    found = check_sandbox(Settings(runs_dir=closed / "runs", sandbox="auto"))
    if found.mode == "bwrap":
        assert found.problem is not None and f"{closed} is closed to it" in found.problem
        assert "Fix: put the runs folder where every user may enter" in found.problem
    assert list(closed.iterdir()) == []  # its scratch run folder is gone


async def test_the_verdict_exchange_tells_a_well_formed_blocked_from_a_broken_answer() -> None:
    """An Evaluator may end with <blocked> (its grammar offers it): the doctor's verdict probe says the
    model kept the format, where a reply with neither element is a format problem (seen on Gemma-3-270M)."""
    from types import SimpleNamespace

    from pse.doctor._exchange import verdict_exchange

    class Answer:
        def __init__(self, text: str) -> None:
            self.text = text

        async def create(self, messages: object) -> object:
            return SimpleNamespace(content=self.text, usage=SimpleNamespace(completion_tokens=7))

    blocked = await verdict_exchange(Answer('<blocked reason_code="MISSING_DATA">no file</blocked>'))  # type: ignore[arg-type]
    assert (blocked.valid, blocked.detail) == (
        False,
        "well-formed, but a <blocked> (MISSING_DATA), not a verdict",
    )
    prose = await verdict_exchange(Answer("It looks fine to me."))  # type: ignore[arg-type]
    assert not prose.valid and prose.detail.startswith("verdict: found no <verdict> element(s)")
    verdict = await verdict_exchange(  # type: ignore[arg-type]
        Answer('<verdict status="PASS"><reason_code>ALL_MET</reason_code><criterion id="AC1" met="true">ok'
               "</criterion><summary>s</summary></verdict>")
    )  # fmt: skip
    assert (verdict.valid, verdict.detail) == (True, "verdict PASS")
