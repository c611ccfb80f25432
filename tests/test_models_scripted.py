"""The scripted provider and the cassette format: order per role, exhaustion, exact tokens, validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autogen_core.models import AssistantMessage, CreateResult, SystemMessage, UserMessage

from pse.config import load_settings
from pse.exceptions import CassetteError, CassetteExhaustedError
from pse.models import Cassette, CassettePlayer, ScriptedChatCompletionClient, create_model_client
from pse.tokens import count_message_tokens, count_tokens
from reference_turns import SAMPLE


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "cassette.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _player(*turns: tuple[str, str]) -> CassettePlayer:
    return CassettePlayer(
        Cassette.model_validate({"version": 1, "turns": [{"role": r, "content": c} for r, c in turns]})
    )


async def test_each_role_consumes_its_own_turns_in_order_across_cycles() -> None:
    player = _player(
        ("Planner", "P1"), ("Specialist", "S1"), ("Specialist", "S2"), ("Evaluator", "E1"),
        ("Specialist", "S3"), ("Evaluator", "E2"), ("Planner", "P2"),
    )  # fmt: skip
    clients = {
        role: ScriptedChatCompletionClient(player, role) for role in ("Planner", "Specialist", "Evaluator")
    }
    ask = [UserMessage(content="go", source="user")]
    # Cycle 1 asks the roles in a different interleaving than the cassette lists them.
    seen = [
        (await clients["Evaluator"].create(ask)).content,
        (await clients["Specialist"].create(ask)).content,
        (await clients["Planner"].create(ask)).content,
        (await clients["Specialist"].create(ask)).content,
        # cycle 2
        (await clients["Specialist"].create(ask)).content,
        (await clients["Evaluator"].create(ask)).content,
        (await clients["Planner"].create(ask)).content,
    ]
    assert seen == ["E1", "S1", "P1", "S2", "S3", "E2", "P2"]
    assert player.positions == {"Planner": 2, "Specialist": 3, "Evaluator": 2}
    assert [player.remaining(r) for r in ("Planner", "Specialist", "Evaluator")] == [0, 0, 0]


async def test_a_role_out_of_turns_names_role_and_turn() -> None:
    player = _player(("Planner", "P1"), ("Evaluator", "E1"))
    client = ScriptedChatCompletionClient(player, "Planner")
    await client.create([UserMessage(content="go", source="user")])
    with pytest.raises(CassetteExhaustedError, match="no turn 2 for role Planner") as info:
        await client.create([UserMessage(content="again", source="user")])
    assert (info.value.role, info.value.turn, info.value.available) == ("Planner", 2, 1)
    with pytest.raises(CassetteExhaustedError) as none_at_all:
        await ScriptedChatCompletionClient(player, "Specialist").create(
            [UserMessage(content="x", source="user")]
        )
    assert (none_at_all.value.turn, none_at_all.value.available) == (1, 0)


async def test_usage_without_a_cassette_figure_is_the_offline_count_of_what_was_sent() -> None:
    reply = "<plan><goal>sort</goal></plan>"
    client = ScriptedChatCompletionClient(_player(("Planner", reply)), "Planner")
    messages = [
        SystemMessage(content="You are the Planner. Write a plan."),
        UserMessage(content="Implement quicksort(items) with tests.", source="user"),
        AssistantMessage(content="earlier reply", source="Planner"),
    ]
    result = await client.create(messages)
    expected_prompt = count_message_tokens(
        ["You are the Planner. Write a plan.", "Implement quicksort(items) with tests.", "earlier reply"]
    )
    # Hand-computed too, so a change in the counter cannot hide here: 11, 14 and 4 tokens, plus 4 per message.
    assert expected_prompt == 41
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (41, count_tokens(reply))
    assert (result.finish_reason, result.cached, result.content) == ("stop", False, reply)
    assert client.total_usage() == result.usage and client.actual_usage() == result.usage


async def test_usage_from_the_cassette_wins_and_totals_add_up() -> None:
    cassette = Cassette.model_validate(
        {
            "version": 1,
            "turns": [
                {
                    "role": "Evaluator",
                    "content": "a",
                    "usage": {"prompt_tokens": 812, "completion_tokens": 95},
                },
                {
                    "role": "Evaluator",
                    "content": "b",
                    "usage": {"prompt_tokens": 100, "completion_tokens": 5},
                },
            ],
        }
    )
    client = ScriptedChatCompletionClient(CassettePlayer(cassette), "Evaluator")
    first = await client.create([UserMessage(content="check", source="user")])
    await client.create([UserMessage(content="check", source="user")])
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (812, 95)
    assert (client.total_usage().prompt_tokens, client.total_usage().completion_tokens) == (912, 100)


async def test_requests_are_kept_per_role_for_assertions() -> None:
    player = _player(("Specialist", "S1"), ("Evaluator", "E1"))
    await ScriptedChatCompletionClient(player, "Specialist").create(
        [UserMessage(content="secret work", source="u")]
    )
    evaluator = ScriptedChatCompletionClient(player, "Evaluator")
    await evaluator.create([UserMessage(content="final report", source="Specialist")])
    assert evaluator.requests == player.requests["Evaluator"]
    assert [[m.content for m in r] for r in player.requests["Evaluator"]] == [["final report"]]
    assert [[m.content for m in r] for r in player.requests["Specialist"]] == [["secret work"]]
    assert player.requests["Planner"] == []


async def test_stream_yields_the_content_then_the_result() -> None:
    client = ScriptedChatCompletionClient(_player(("Planner", "hello")), "Planner")
    items = [item async for item in client.create_stream([UserMessage(content="hi", source="user")])]
    assert items[0] == "hello"
    assert isinstance(items[1], CreateResult) and items[1].content == "hello" and len(items) == 2


def test_client_reports_counts_and_model_info_with_the_offline_counter() -> None:
    client = ScriptedChatCompletionClient(_player(), "Planner")
    messages = [UserMessage(content="one two three", source="user")]
    assert client.count_tokens(messages) == count_message_tokens(["one two three"]) == 8
    assert client.remaining_tokens(messages) == 128_000 - 8
    assert client.model_info["family"] == "unknown" and client.model_info["function_calling"] is False


async def test_positions_resume_a_run_where_it_stopped() -> None:
    cassette = Cassette.model_validate(
        {
            "turns": [{"role": "Specialist", "content": f"S{i}"} for i in range(1, 4)]
            + [{"role": "Planner", "content": "P"}]
        }
    )
    player = CassettePlayer(cassette, positions={"Specialist": 2})
    client = ScriptedChatCompletionClient(player, "Specialist")
    assert (await client.create([UserMessage(content="x", source="u")])).content == "S3"
    assert player.positions == {"Planner": 0, "Specialist": 3, "Evaluator": 0}
    with pytest.raises(CassetteError, match="Specialist=4"):
        CassettePlayer(cassette, positions={"Specialist": 4})
    with pytest.raises(CassetteError, match="Reviewer"):
        CassettePlayer(cassette, positions={"Reviewer": 0})


def test_the_public_sample_cassette_loads() -> None:
    player = CassettePlayer.from_file(SAMPLE)
    assert {r: player.remaining(r) for r in ("Planner", "Specialist", "Evaluator")} == {
        "Planner": 1,
        "Specialist": 4,
        "Evaluator": 4,
    }


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"version": 2, "turns": []}, r"version: Input should be 1"),
        ({"version": 1, "turns": [{"role": "Planner", "content": "a"}, {"role": "Judge", "content": "b"}]},
         r"turn 1 \(counting from 0\), role: Value error, role must be one of Planner, Specialist, Eval"),
        ({"version": 1, "turns": [{"role": "Planner", "contnet": "a"}]},
         r"turn 0 \(counting from 0\), contnet: Extra inputs are not permitted"),
        ({"version": 1, "turns": [{"role": "Planner"}]},
         r"turn 0 \(counting from 0\), the turn: Value error, a turn needs content, tool_calls or both"),
        ({"version": 1, "turns": [{"role": "Planner", "tool_calls": []}]},
         r"turn 0 \(counting from 0\), tool_calls: List should have at least 1 item"),
        ({"version": 1, "turns": [{"role": "Planner", "tool_calls": [{"name": "", "arguments": {}}]}]},
         r"turn 0 \(counting from 0\), tool_calls.0.name: String should have at least 1 character"),
        ({"version": 1, "turns": [{"role": "Planner", "content": "a",
                                   "usage": {"prompt_tokens": -1, "completion_tokens": 1}}]},
         r"turn 0 \(counting from 0\), usage.prompt_tokens: Input should be greater"),
    ],
)  # fmt: skip
def test_a_malformed_cassette_names_file_turn_and_problem(
    tmp_path: Path, data: object, expected: str
) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(CassetteError, match=expected) as info:
        CassettePlayer.from_file(path)
    assert str(path) in str(info.value)


def test_unreadable_and_non_json_cassettes_are_cassette_errors(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"cannot read cassette .*missing\.json"):
        Cassette.from_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1,\n "turns": [}', encoding="utf-8")
    with pytest.raises(CassetteError, match=r"not valid JSON: .* line 2"):
        Cassette.from_file(bad)


def test_cassette_round_trips_through_a_file_atomically(tmp_path: Path) -> None:
    cassette = Cassette.model_validate({"turns": [{"role": "Planner", "content": "é <plan/>"}]})
    path = tmp_path / "sub" / "c.json"
    cassette.to_file(path)
    assert Cassette.from_file(path) == cassette
    assert [p.name for p in path.parent.iterdir()] == ["c.json"]  # no temp file left behind


async def test_factory_builds_scripted_clients_from_the_shared_player(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = load_settings()
    assert settings.model_spec(
        "Planner"
    ).provider_was_defaulted  # the CLI announces it; the factory stays quiet
    player = _player(("Planner", "P1"), ("Evaluator", "E1"))
    planner = create_model_client(settings, "Planner", player=player)
    evaluator = create_model_client(settings, "Evaluator", player=player)
    assert isinstance(planner, ScriptedChatCompletionClient) and planner.player is player
    assert (await evaluator.create([UserMessage(content="x", source="u")])).content == "E1"
    assert player.positions["Evaluator"] == 1
    assert capsys.readouterr() == ("", "")


async def test_factory_loads_the_cassette_setting_when_given_no_player(tmp_path: Path) -> None:
    path = _write(tmp_path, {"version": 1, "turns": [{"role": "Specialist", "content": "from file"}]})
    client = create_model_client(load_settings(cassette=path), "Specialist")
    assert (await client.create([UserMessage(content="x", source="u")])).content == "from file"


def test_factory_without_cassette_says_how_to_give_one() -> None:
    with pytest.raises(CassetteError, match=r"--cassette FILE or set PSE_CASSETTE"):
        create_model_client(load_settings(), "Planner")
