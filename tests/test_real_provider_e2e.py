"""Whole PSE runs through the real OpenAI and Ollama client code, against loopback stand-ins of their APIs.

The stand-in answers each request with the next turn of the code-delivery cassette (the engine's model
calls are sequential and deterministic), so these runs exercise everything a real model run does: HTTP,
the provider SDKs, AutoGen's clients, retries, usage from the response, and recording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from native_cassettes import native_turn
from pse.config import Settings, load_settings
from pse.engine import load_trace
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from replay_support import usage_of
from standins import ChatStandIn, Reply

_TURNS = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]


def _live(provider: str, stand_in: ChatStandIn, runs_dir: Path, record: Path, **options: Any) -> Settings:
    """Settings of a run against the stand-in, recorded into `record`."""
    return load_settings(
        provider=provider,
        model="m-test",
        base_url=stand_in.url,
        api_key="sk-live-secret-123456789",
        runs_dir=runs_dir,
        record=record,
        **options,
    )


def _script(stand_in: ChatStandIn) -> None:
    stand_in.script(*(Reply(content=t["content"], usage=(1000 + i, 100 + i)) for i, t in enumerate(_TURNS)))


@pytest.mark.parametrize("provider", ["openai", "ollama"])
async def test_a_real_provider_run_passes_and_its_recording_replays_offline(
    provider: str, tmp_path: Path
) -> None:
    recording = tmp_path / "recorded.json"
    with ChatStandIn(provider) as stand_in:  # type: ignore[arg-type]
        _script(stand_in)
        settings = _live(provider, stand_in, tmp_path / "live", recording)
        summary = await run_to_end(prepare_run("code-delivery", settings))
        requests = stand_in.requests

    assert summary.outcome == "PASSED" and summary.cycles == 2
    assert len(requests) == len(_TURNS) == 9
    # Usage comes from the provider's responses, exactly: the grammar-support probe's too (issue 47; the
    # OpenAI-compatible server's, answered out of script with (3, 1)), counted as a call of the Planner.
    probe = (3, 1) if provider == "openai" else (0, 0)
    assert summary.tokens.prompt == probe[0] + sum(1000 + i for i in range(9))
    assert summary.tokens.completion == probe[1] + sum(100 + i for i in range(9))
    bodies = [r.body for r in requests]
    assert {b["model"] for b in bodies} == {"m-test"}
    roles = [
        next(m["content"] for m in b["messages"] if m["role"] == "system").split("# Role: ")[1].split()[0]
        for b in bodies
    ]
    assert roles == [t["role"] for t in _TURNS]
    if provider == "openai":
        assert {r.headers["authorization"] for r in requests} == {"Bearer sk-live-secret-123456789"}
    # The Evaluator's requests, on the wire, hold neither the Specialist's tool requests nor their results.
    for body, role in zip(bodies, roles, strict=True):
        if role == "Evaluator":
            wire = json.dumps([m for m in body["messages"] if m["role"] != "system"])
            assert 'name=\\"write_file\\"' not in wire and 'tool_results for=\\"Specialist\\"' not in wire

    # The recording holds no secret and replays strictly, offline, in a new run.
    assert "sk-live-secret" not in recording.read_text()
    replay = await run_to_end(
        prepare_run("code-delivery", load_settings(runs_dir=tmp_path / "replay", cassette=recording))
    )
    assert replay.outcome == "PASSED"
    live = usage_of(summary.tokens)
    if provider == "openai":  # a replay sends no probe: the recorded turns alone
        prompt, completion, calls = live["Planner"]
        live["Planner"] = (prompt - probe[0], completion - probe[1], calls - 1)
    assert usage_of(replay.tokens) == live
    assert load_trace(Path(replay.trace)).settings["provider"] is None  # scripted by default, offline


async def test_a_provider_that_keeps_failing_ends_the_run_as_error(tmp_path: Path) -> None:
    with ChatStandIn("openai") as stand_in:
        stand_in.script(Reply(status=503), Reply(status=503), Reply(status=503))
        settings = load_settings(
            provider="openai",
            model="m-test",
            base_url=stand_in.url,
            runs_dir=tmp_path,
            model_max_retries=2,
            model_backoff_s=0.01,
        )
        summary = await run_to_end(prepare_run("code-delivery", settings))
        assert len(stand_in.requests) == 3  # one call, two retries, then the run stops
    assert summary.outcome == "ERROR" and summary.outcome_reason.startswith("ModelUnavailableError")
    assert "503" in summary.outcome_reason


_OFFERED = {
    "Planner": ["read_file", "list_files", "bash", "submit_plan", "block"],
    "Specialist": ["read_file", "list_files", "write_file", "submit_report", "block"],
    "Evaluator": ["read_file", "list_files", "bash", "run_pytest", "run_ruff", "run_check", "submit_verdict"],
}


def _native_script(stand_in: ChatStandIn) -> None:
    for i, t in enumerate(_TURNS):
        turn = native_turn(t["role"], t["content"])
        calls = [(c["name"], json.dumps(c["arguments"])) for c in turn["tool_calls"]]
        stand_in.script(Reply(content=turn["content"], tool_calls=calls, usage=(1000 + i, 100 + i)))


def _call_ids(messages: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The ids of the calls the assistant made and of the results sent for them, in order."""
    made = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return made, answered


@pytest.mark.parametrize("provider", ["openai", "ollama"])
async def test_a_native_run_speaks_function_calls_on_the_wire_and_its_recording_replays(
    provider: str, tmp_path: Path
) -> None:
    recording = tmp_path / "recorded.json"
    with ChatStandIn(provider) as stand_in:  # type: ignore[arg-type]
        _native_script(stand_in)
        settings = _live(provider, stand_in, tmp_path / "live", recording, protocol="native")
        summary = await run_to_end(prepare_run("code-delivery", settings))
        bodies = [r.body for r in stand_in.requests]

    assert summary.outcome == "PASSED" and summary.cycles == 2 and len(bodies) == 9
    roles = [
        next(m["content"] for m in b["messages"] if m["role"] == "system").split("# Role: ")[1].split()[0]
        for b in bodies
    ]
    assert roles == [t["role"] for t in _TURNS]
    for body, role in zip(bodies, roles, strict=True):
        # Exactly the role's granted tools, then its output functions; always answered through one.
        assert [tool["function"]["name"] for tool in body["tools"]] == _OFFERED[role]
        if provider == "openai":
            assert body["tool_choice"] == "required"
        wire = json.dumps(body["messages"])
        assert "<tool_calls" not in wire and "<invoke" not in wire and "<tool_results" not in wire
    # Earlier calls come back as function results: the Evaluator's second request of cycle 1 holds its
    # three calls and their three results (pytest failed: an error result, flagged as such in the text).
    second = bodies[4]["messages"]
    calls = next(m for m in second if m["role"] == "assistant")
    assert [c["function"]["name"] for c in calls["tool_calls"]] == ["read_file", "run_pytest", "run_ruff"]
    results = [m["content"] for m in second if m["role"] == "tool"]
    assert len(results) == 3 and results[1].startswith("[error] ")
    assert (
        "2 failed, 2 passed" in results[1] and "2 failed, 5 passed" in results[1]
    )  # the task's, the Specialist's
    if provider == "openai":
        assert _call_ids(second) == (["call_1_1", "call_1_2", "call_1_3"],) * 2
        verdict = next(t for t in bodies[4]["tools"] if t["function"]["name"] == "submit_verdict")["function"]
        criterion = verdict["parameters"]["properties"]["criteria"]["items"]["properties"]["id"]
        assert criterion["enum"] == ["AC1", "AC2", "AC3", "AC4"] and verdict["strict"] is True

    # The recording holds the calls as calls, no secret, and replays strictly offline in native mode.
    recorded = json.loads(recording.read_text())
    assert "sk-live-secret" not in recording.read_text()
    assert [bool(t.get("tool_calls")) for t in recorded["turns"]] == [True] * 9
    replay = await run_to_end(
        prepare_run(
            "code-delivery",
            load_settings(runs_dir=tmp_path / "replay", cassette=recording, protocol="native"),
        )
    )
    assert replay.outcome == "PASSED" and usage_of(replay.tokens) == usage_of(summary.tokens)


@pytest.mark.parametrize(
    ("provider", "arguments", "reason"),
    [  # Ollama's API always sends an object: its malformed calls are malformed inside it
        ("openai", '{"path": ', "the arguments are not valid JSON (Expecting value at character 9)"),
        ("ollama", '{"path": ["a.py"]}', "parameter 'path' is an array, not text"),
    ],
)
async def test_a_malformed_native_call_is_answered_with_its_error_and_the_run_goes_on(
    provider: str, arguments: str, reason: str, tmp_path: Path
) -> None:
    plan = native_turn(_TURNS[0]["role"], _TURNS[0]["content"])["tool_calls"][0]
    block = {"reason_code": "MISSING_PERMISSION", "detail": "I may not run bash to profile"}
    with ChatStandIn(provider) as stand_in:  # type: ignore[arg-type]
        stand_in.script(
            Reply(content="", tool_calls=[("read_file", arguments), ("list_files", "{}")]),
            Reply(content="", tool_calls=[(plan["name"], json.dumps(plan["arguments"]))]),
            Reply(content="", tool_calls=[("block", json.dumps(block))]),
        )
        settings = _live(provider, stand_in, tmp_path, tmp_path / "recorded.json", protocol="native")
        summary = await run_to_end(prepare_run("code-delivery", settings))
        second = stand_in.requests[1].body["messages"]
    assert summary.outcome == "ESCALATED" and summary.cycles == 1
    calls = load_trace(Path(summary.trace)).cycles[0].tool_calls
    assert [(c.tool, c.rule, c.status) for c in calls] == [
        ("read_file", "protocol.bad_arguments", "error"),
        ("list_files", "roles.Planner.list_files", "ok"),
    ]
    results = [m["content"] for m in second if m["role"] == "tool"]
    advice = "send one JSON object with a text value per parameter; usage: read_file(path)"
    assert results[0] == f"[error] read_file: {reason}; {advice}"


async def test_cached_prompt_tokens_from_both_usage_shapes_land_in_the_trace_and_the_cost(
    tmp_path: Path,
) -> None:
    """OpenAI's `prompt_tokens_details.cached_tokens` and DeepSeek's `prompt_cache_hit_tokens`, read from
    the provider's answers (AutoGen's usage drops them), counted per call, role and run, and priced at
    `cached_input`."""
    cached = [0, 200, 400, 0, 300, 500, 600, 700, 800]
    with ChatStandIn("openai") as stand_in:
        stand_in.script(
            *(
                Reply(
                    content=t["content"],
                    usage=(1000 + i, 100 + i),
                    cached=cached[i],
                    cached_shape="openai" if i % 2 else "deepseek",
                )
                for i, t in enumerate(_TURNS)
            )
        )
        prices = {"m-test": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}
        settings = _live("openai", stand_in, tmp_path / "live", tmp_path / "rec.json", prices=prices)
        summary = await run_to_end(prepare_run("code-delivery", settings))
    assert summary.outcome == "PASSED"
    trace = load_trace(Path(summary.trace))
    assert trace.tokens.cached == sum(cached) == 3500
    by_role: dict[str, int] = {}
    for i, turn in enumerate(_TURNS):
        by_role[turn["role"]] = by_role.get(turn["role"], 0) + cached[i]
    assert {role: t.cached for role, t in trace.tokens.by_role.items()} == by_role
    assert sum(t.cached for c in trace.cycles for t in c.tokens.values()) == 3500
    prompt, completion = (
        3 + sum(1000 + i for i in range(9)),
        1 + sum(100 + i for i in range(9)),
    )  # the probe too
    expected = ((prompt - 3500) * 2.0 + 3500 * 0.5 + completion * 8.0) / 1_000_000
    assert trace.cost.amount == round(expected, 6)
    assert summary.cost.amount == trace.cost.amount
