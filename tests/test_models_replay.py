"""Record a real exchange through a stand-in, replay it offline; strict replay; secrets; prices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    LLMMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
)

from pse.config import Price, load_settings
from pse.events import DriftRecord
from pse.exceptions import ReplayMismatchError
from pse.models import (
    Cassette,
    CassettePlayer,
    CassetteRecorder,
    Cost,
    RecordingChatCompletionClient,
    create_model_client,
    price_of,
)
from standins import ChatStandIn, Reply

KEY = "sk-live-abcdefghijklmnopqrstuvwx"
SYSTEM = "You are the Specialist.\nWork inside the workspace.\nReport artifacts."


def _conversation(task: str = "Implement quicksort.") -> dict[str, list[LLMMessage]]:
    return {
        "Planner": [SystemMessage(content="You are the Planner."), UserMessage(content=task, source="user")],
        "Specialist": [
            SystemMessage(content=SYSTEM),
            UserMessage(content="<plan>S1</plan>", source="Planner"),
        ],
    }


async def _record(tmp_path: Path) -> tuple[Path, list[tuple[str, str, RequestUsage]]]:
    """Run Planner, Specialist, Specialist against a stand-in with recording on; return the cassette path."""
    path = tmp_path / "recorded.json"
    recorder = CassetteRecorder(path)
    seen: list[tuple[str, str, RequestUsage]] = []
    with ChatStandIn("openai") as stand_in:
        stand_in.script(
            Reply(content="<plan>S1</plan>", usage=(40, 6)),
            Reply(content="<tool_calls>write</tool_calls>", usage=(55, 9)),
            Reply(content=f"Done; the key was {KEY} and sk-other-0123456789abcdefgh", usage=(70, 12)),
        )
        settings = load_settings(provider="openai", model="gpt-x", base_url=stand_in.url, api_key=KEY)
        clients = {
            role: create_model_client(settings, role, recorder=recorder) for role in ("Planner", "Specialist")
        }
        asks = _conversation()
        for role in ("Planner", "Specialist", "Specialist"):
            result = await clients[role].create(asks[role])
            assert isinstance(result.content, str)
            seen.append((role, result.content, result.usage))
        for client in clients.values():
            await client.close()
        assert len(stand_in.requests) == 3
    assert recorder.save() == path
    return path, seen


async def test_record_then_replay_offline_gives_identical_replies_and_usage(tmp_path: Path) -> None:
    path, seen = await _record(tmp_path)
    # A new run: a fresh player from the file, scripted clients, no server anywhere.
    player = CassettePlayer.from_file(path, strict=True)
    settings = load_settings(provider="scripted", cassette=path)
    clients = {role: create_model_client(settings, role, player=player) for role in ("Planner", "Specialist")}
    asks = _conversation()
    replayed = []
    for role in ("Planner", "Specialist", "Specialist"):
        result = await clients[role].create(asks[role])
        assert isinstance(result.content, str)
        replayed.append((role, result.content, result.usage))
    scrubbed = "Done; the key was [redacted:PSE_API_KEY] and ***"  # the configured key by name, a key shape
    assert replayed == [*seen[:2], ("Specialist", scrubbed, RequestUsage(70, 12))]
    assert seen[2][1] != scrubbed  # the live run saw the real text; only the cassette is scrubbed
    assert player.positions == {"Planner": 1, "Specialist": 2, "Evaluator": 0}


async def test_a_recorded_cassette_holds_no_secret_and_says_what_was_asked(tmp_path: Path) -> None:
    path, _ = await _record(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert KEY not in text and "sk-other" not in text and "authorization" not in text.lower()
    turn = Cassette.from_file(path).turns[1]
    assert turn.role == "Specialist" and turn.usage is not None and turn.usage.prompt_tokens == 55
    assert turn.request is not None and turn.request.excerpt == "<plan>S1</plan>"
    assert [m.speaker for m in turn.request.messages] == ["system", "user:Planner"]
    assert turn.request.messages[0].chars == len(SYSTEM)


async def test_a_changed_prompt_fails_strict_replay_with_a_diff(tmp_path: Path) -> None:
    path, _ = await _record(tmp_path)
    player = CassettePlayer.from_file(path, strict=True)
    planner = create_model_client(load_settings(), "Planner", player=player)
    with pytest.raises(ReplayMismatchError) as info:
        await planner.create(_conversation(task="Implement mergesort.")["Planner"])
    message = str(info.value)
    assert f"strict replay of {path}: Planner's turn 1 was recorded for a different request" in message
    assert "message 2 (user:user) changed: 20 chars recorded, 20 now" in message
    assert "-Implement quicksort." in message and "+Implement mergesort." in message
    assert "message 1" not in message  # the unchanged system message is not blamed
    assert player.positions["Planner"] == 0  # a mismatch consumes nothing


async def test_diff_names_an_added_message_and_a_changed_speaker(tmp_path: Path) -> None:
    path, _ = await _record(tmp_path)
    player = CassettePlayer.from_file(path)
    specialist = create_model_client(load_settings(), "Specialist", player=player)
    ask = [
        SystemMessage(content=SYSTEM),
        AssistantMessage(content="<plan>S1</plan>", source="Planner"),
        UserMessage(content="extra", source="ToolAgent"),
    ]
    with pytest.raises(ReplayMismatchError) as info:
        await specialist.create(ask)
    message = str(info.value)
    assert "recorded request had 2 message(s), this one has 3" in message
    assert "message 2: speaker was user:Planner, now assistant:Planner" in message
    assert "message 3 (user:ToolAgent) is new: 'extra'" in message


async def test_non_strict_replay_and_hand_written_turns_are_not_compared(tmp_path: Path) -> None:
    path, _ = await _record(tmp_path)
    loose = CassettePlayer.from_file(path, strict=False)
    result = await create_model_client(load_settings(), "Planner", player=loose).create(
        [UserMessage(content="anything at all", source="user")]
    )
    assert result.content == "<plan>S1</plan>"
    by_hand = CassettePlayer(
        Cassette.model_validate({"turns": [{"role": "Planner", "content": "hand"}]}), strict=True
    )
    result = await create_model_client(load_settings(), "Planner", player=by_hand).create(
        [UserMessage(content="whatever", source="user")]
    )
    assert result.content == "hand"


async def test_recording_a_stream_records_the_final_result(tmp_path: Path) -> None:
    recorder = CassetteRecorder(tmp_path / "s.json")
    with ChatStandIn("ollama") as stand_in:
        stand_in.script(Reply(content="streamed answer here", usage=(30, 3)))
        settings = load_settings(provider="ollama", model="qwen3:8b", base_url=stand_in.url)
        client = create_model_client(settings, "Evaluator", recorder=recorder)
        assert isinstance(client, RecordingChatCompletionClient)
        items = [i async for i in client.create_stream([UserMessage(content="check", source="user")])]
        await client.close()
    assert "".join(i for i in items if isinstance(i, str)) == "streamed answer here"
    [turn] = recorder.cassette.turns
    assert (turn.role, turn.content, turn.usage) == ("Evaluator", "streamed answer here", turn.usage)
    assert turn.usage is not None and (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (30, 3)


async def test_assistant_agent_reports_the_scripted_usage_as_models_usage() -> None:
    cassette = Cassette.model_validate(
        {
            "turns": [
                {
                    "role": "Planner",
                    "content": "<plan/>",
                    "usage": {"prompt_tokens": 812, "completion_tokens": 95},
                }
            ]
        }
    )
    client = create_model_client(load_settings(), "Planner", player=CassettePlayer(cassette))
    agent = AssistantAgent("Planner", model_client=client, system_message="You plan.")
    result = await agent.run(task="Sort a list.")
    last = result.messages[-1]
    assert last.source == "Planner" and last.models_usage == RequestUsage(812, 95)
    assert [m.content for m in client.requests[0]] == ["You plan.", "Sort a list."]  # type: ignore[attr-defined]


def test_price_of_computes_cost_per_million_and_flags_unpriced_models() -> None:
    prices = {"gpt-4o": Price(input=2.5, output=10), "qwen3": Price(input=0.1, output=0.2, currency="EUR")}
    settings = load_settings(prices=prices)
    assert price_of(settings, "gpt-4o", 1_000_000, 500_000) == Cost(amount=7.5)
    assert price_of(settings, "openrouter/gpt-4o", 2_000, 0) == Cost(amount=0.005)
    eur = price_of(settings, "qwen3:8b", 1_000_000, 1_000_000)
    assert (eur.amount, eur.currency, eur.priced) == (pytest.approx(0.3), "EUR", True)
    assert price_of(settings, "mystery-model", 10, 10) == Cost(amount=0.0, unpriced_models=["mystery-model"])


def test_cached_prompt_tokens_cost_the_cached_input_price_or_the_input_price_without_one() -> None:
    from pse.models._cached import cached_tokens_of

    prices = {"a": Price(input=2.0, output=8.0, cached_input=0.5), "b": Price(input=2.0, output=8.0)}
    settings = load_settings(prices=prices)
    assert price_of(settings, "a", 1_000_000, 0, cached_tokens=400_000) == Cost(amount=1.4)
    assert price_of(settings, "b", 1_000_000, 0, cached_tokens=400_000) == Cost(amount=2.0)
    assert price_of(settings, "a", 100, 0, cached_tokens=10**9).amount == 0.5 * 100 / 1e6  # capped at prompt
    assert cached_tokens_of({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}}) == 4
    assert cached_tokens_of({"prompt_tokens": 9, "prompt_cache_hit_tokens": 6}) == 6
    for nothing in [
        None,
        {},
        {"prompt_tokens_details": None},
        {"prompt_cache_hit_tokens": -1},
        {"prompt_cache_hit_tokens": True},
    ]:
        assert cached_tokens_of(nothing) is None


def test_prices_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_PRICES", json.dumps({"deepseek-chat": {"input": 0.27, "output": 1.1}}))
    cost = price_of(load_settings(), "deepseek-chat", 1_000_000, 0)
    assert (cost.amount, cost.currency, cost.priced) == (0.27, "USD", True)


def _tool_turns(tmp_path: Path) -> tuple[Path, list[list[LLMMessage]]]:
    """Two Evaluator turns recorded for requests that end with the ToolAgent's results."""
    asks: list[list[LLMMessage]] = [
        [
            SystemMessage(content="You judge."),
            UserMessage(content="Check quicksort.", source="user"),
            AssistantMessage(content="<tool_calls>pytest</tool_calls>", source="Evaluator"),
            UserMessage(content="<tool_results>\nseed 41\n2 failed\n</tool_results>", source="ToolAgent"),
        ]
    ]
    asks.append([*asks[0], AssistantMessage(content="<tool_calls>ruff</tool_calls>", source="Evaluator")])
    asks[1].append(
        UserMessage(content="<tool_results>\nAll checks passed!\n</tool_results>", source="ToolAgent")
    )
    recorder = CassetteRecorder(tmp_path / "tools.json")
    for ask, reply in zip(asks, ["<tool_calls>ruff</tool_calls>", "<verdict/>"], strict=True):
        recorder.append(
            "Evaluator",
            ask,
            CreateResult(finish_reason="stop", content=reply, usage=RequestUsage(1, 1), cached=False),
        )
    return recorder.save(), asks


def _with_seed(asks: list[list[LLMMessage]], seed: str) -> list[list[LLMMessage]]:
    changed = UserMessage(
        content=f"<tool_results>\nseed {seed}\n2 failed\n</tool_results>", source="ToolAgent"
    )
    return [[changed if i == 3 else m for i, m in enumerate(ask)] for ask in asks]


async def test_tool_output_that_differs_is_drift_recorded_once_and_the_replay_goes_on(tmp_path: Path) -> None:
    path, asks = _tool_turns(tmp_path)
    seen: list[DriftRecord] = []
    player = CassettePlayer.from_file(path, on_drift=seen.append)
    evaluator = create_model_client(load_settings(), "Evaluator", player=player)
    for ask in _with_seed(asks, "97"):
        await evaluator.create(ask)
    assert player.positions["Evaluator"] == 2
    assert seen == player.drifts  # the second request holds the same drifted message: no second drift
    [drift] = seen
    assert (drift.role, drift.turn, drift.message, drift.speaker) == ("Evaluator", 1, 4, "user:ToolAgent")
    assert drift.diff.splitlines() == [
        "--- recorded", "+++ now", "@@ -1,4 +1,4 @@", " <tool_results>", "-seed 41", "+seed 97", " 2 failed",
        " </tool_results>",
    ]  # fmt: skip


async def test_strict_tools_fails_on_drift_and_an_authored_change_fails_strict_replay(tmp_path: Path) -> None:
    path, asks = _tool_turns(tmp_path)
    player = CassettePlayer.from_file(path, strict="tools")
    with pytest.raises(
        ReplayMismatchError, match=r"Only tool output differs .* PSE_REPLAY_STRICT=tools demands"
    ):
        await create_model_client(load_settings(), "Evaluator", player=player).create(
            _with_seed(asks, "97")[0]
        )
    assert player.drifts == []

    changed = _with_seed(asks, "97")[0]
    changed[1] = UserMessage(content="Check mergesort.", source="user")
    player = CassettePlayer.from_file(path)
    with pytest.raises(ReplayMismatchError) as info:
        await create_model_client(load_settings(), "Evaluator", player=player).create(changed)
    message = str(info.value)
    assert "message 2 (user:user) changed: 16 chars recorded, 16 now" in message
    assert "message 4 (user:ToolAgent) (tool output) changed" in message
    assert message.endswith(
        "What PSE sends (a prompt, the task, the step_buffer, the plan or the order of roles) differs. "
        "Re-record the cassette (PSE_RECORD) if it changed on purpose, or replay with "
        "PSE_REPLAY_STRICT=false to ignore recorded requests."
    )
    assert player.drifts == [] and player.positions["Evaluator"] == 0


async def test_a_tool_turn_in_another_place_is_no_drift_but_a_changed_order(tmp_path: Path) -> None:
    path, asks = _tool_turns(tmp_path)
    reordered = [asks[0][0], asks[0][1], asks[0][3], asks[0][2]]  # the ToolAgent spoke before the Evaluator
    player = CassettePlayer.from_file(path)
    with pytest.raises(
        ReplayMismatchError, match="message 3: speaker was assistant:Evaluator, now user:ToolAgent"
    ):
        await create_model_client(load_settings(), "Evaluator", player=player).create(reordered)
