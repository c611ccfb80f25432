"""`pse doctor` against the real local server, and the Gemma chat format keeping PSE's system message."""

from __future__ import annotations

import json
import sys

import httpx
import pytest

from pse.cli import main
from pse.local import GEMMA3, SMOLLM2, LocalServer

pytestmark = pytest.mark.real_model


def test_doctor_reports_each_local_model_and_an_unserved_name(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in {
        "PSE_PROVIDER": "openai",
        "PSE_BASE_URL": local_server.url,
        "PSE_MODEL": SMOLLM2.alias,
        "PSE_EVALUATOR_MODEL": GEMMA3.alias,
        "PSE_SPECIALIST_MODEL": "no-such-model",
        "PSE_MODEL_TEMPERATURE": "0",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["pse", "doctor", "--json"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    report = json.loads(capsys.readouterr().out)

    assert exit_info.value.code == report["exit_code"] == 1  # the unserved name makes one role unusable
    assert report["config_errors"] == []
    checks = {check["model"]: check for check in report["checks"]}
    assert [c["roles"] for c in report["checks"]] == [["Planner"], ["Specialist"], ["Evaluator"]]
    unserved = checks["no-such-model"]
    assert unserved["reachable"] and unserved["served"] is False and not unserved["usable"]
    assert "PSE_SPECIALIST_MODEL" in unserved["problems"][0] and SMOLLM2.alias in unserved["problems"][0]
    for model in (SMOLLM2, GEMMA3):
        check = checks[model.alias]
        assert check["reachable"] and check["served"] is True and check["latency_ms"] > 0
        assert check["grammar"] == "yes", check["grammar_detail"]  # llama.cpp honours GBNF grammars
        assert check["native_tools"] in ("yes", "no"), check["native_tools_detail"]
        assert check["tokens_per_s"] > 0
        # Both exchanges ran unconstrained and were judged by PSE's parsers, whatever they wrote.
        assert check["tool_call"]["unconstrained"]["valid"] in (True, False)
        assert check["verdict"]["unconstrained"]["valid"] in (True, False)
        if check["usable"]:
            assert check["problems"] == []
        else:
            assert all("set " in p or "use " in p for p in check["problems"]), check["problems"]
    # PSE sends a grammar and llama.cpp applies it: constrained, both models keep the format, whatever
    # they put in it (SmolLM2 reads the literal "PATH" of the instructions).
    assert report["pse_constraint"] == "grammar"
    for model in (SMOLLM2, GEMMA3):
        call, verdict = (checks[model.alias][name]["constrained"] for name in ("tool_call", "verdict"))
        assert call["valid"] or call["detail"].startswith("well-formed"), call["detail"]
        # (a well-formed <blocked> keeps the format too: the Evaluator's grammar offers it, issue 31)
        assert verdict["valid"] or verdict["detail"].startswith(("a verdict", "well-formed")), verdict[
            "detail"
        ]


def test_the_gemma_chat_format_keeps_the_system_message(local_server: LocalServer) -> None:
    # llama-cpp-python's own gemma format drops system messages; PSE's protocol lives there.
    def prompt_tokens(messages: list[dict[str, str]]) -> int:
        body = {"model": GEMMA3.alias, "messages": messages, "max_tokens": 1, "temperature": 0}
        reply = httpx.post(f"{local_server.url}/chat/completions", json=body, timeout=120)
        reply.raise_for_status()
        return int(reply.json()["usage"]["prompt_tokens"])

    user = {"role": "user", "content": "Say hello."}
    system = {"role": "system", "content": "Request tools in XML. " * 20}
    assert prompt_tokens([system, user]) - prompt_tokens([user]) >= 80  # 20 × 5 words, at least a token each
