"""Secrets and cassettes: configured keys are scrubbed by whole value (8+ characters, the ToolAgent's rule),
everywhere a cassette keeps text, and a scrubbed recording still replays strictly."""

from __future__ import annotations

from pathlib import Path

import pytest
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from pse.config import load_settings
from pse.events import ToolCallRecord
from pse.exceptions import UnscrubbedSecretWarning
from pse.models import Cassette, CassettePlayer, CassetteRecorder, Scrubber, create_model_client
from pse.roles import ROLES, TOOL_AGENT, Role
from pse.toolagent import MIN_SECRET_CHARS, Redactor
from pse.tools import Tool
from standins import ChatStandIn, Reply

LONG_KEY = "live-secret-value-0123456789"  # no key shape: only the value rule can scrub it


async def _record(tmp_path: Path, key: str, replies: list[str], task: str) -> Path:
    """The Planner answers `task`, then the Specialist is asked with the Planner's reply in its request."""
    path = tmp_path / "recorded.json"
    recorder = CassetteRecorder(path)
    with ChatStandIn("openai") as stand_in:
        stand_in.script(*(Reply(content=r) for r in replies))
        settings = load_settings(provider="openai", model="m", base_url=stand_in.url, api_key=key)
        clients = {role: create_model_client(settings, role, recorder=recorder) for role in ROLES}
        first = await clients[Role.PLANNER].create(_planner(task))
        assert isinstance(first.content, str)
        await clients[Role.SPECIALIST].create(_specialist(first.content))
        for client in clients.values():
            await client.close()
        assert {r.headers["authorization"] for r in stand_in.requests} == {f"Bearer {key}"}
    recorder.add_tool_run(
        ToolCallRecord.ran(
            requester=Role.SPECIALIST, tool=Tool.READ_FILE, arguments={"path": f"{key}.txt"}, index=1,
            rule="r", status="ok", output=f"token={key}; exposing", ms=1, sandbox=None,
            facts={"note": f"<{key}>"},
        )
    )  # fmt: skip
    recorder.save()
    return path


def _planner(task: str) -> list[LLMMessage]:
    return [SystemMessage(content="You plan."), UserMessage(content=task, source="user")]


def _specialist(plan: str) -> list[LLMMessage]:
    return [
        SystemMessage(content="You execute."),
        AssistantMessage(content=plan, source=Role.PLANNER),
        UserMessage(content="<tool_results for='Specialist'>ok</tool_results>", source=TOOL_AGENT),
    ]


async def _replays_strictly(path: Path, task: str, secrets: list[tuple[str, str]] | None = None) -> None:
    player = CassettePlayer.from_file(path, strict="tools", scrubber=Scrubber(secrets or []))
    planner = create_model_client(load_settings(), Role.PLANNER, player=player)
    specialist = create_model_client(load_settings(), Role.SPECIALIST, player=player)
    reply = await planner.create(_planner(task))
    assert isinstance(reply.content, str)
    await specialist.create(_specialist(reply.content))  # the replayed reply inside the next request
    assert player.positions == {Role.PLANNER: 1, Role.SPECIALIST: 1, Role.EVALUATOR: 0}


async def test_a_short_key_is_not_scrubbed_and_the_recorder_says_so_once(tmp_path: Path) -> None:
    replies = ["quicksort.py exposing quicksort(items)", "done"]
    with pytest.warns(UnscrubbedSecretWarning) as warned:
        path = await _record(tmp_path, "x", replies, task="Deliver quicksort.py exposing quicksort.")
    assert [str(w.message) for w in warned] == [
        f"PSE_API_KEY is shorter than {MIN_SECRET_CHARS} characters, so the recording {path} keeps it as "
        "it is: a value that short would match ordinary text. A real key is longer; if this one is real, "
        "check the cassette before you share it."
    ]  # once, though three clients were given the key
    text = path.read_text()
    assert "e***posing" not in text and "[redacted" not in text
    cassette = Cassette.from_file(path)
    assert cassette.turns[0].content == "quicksort.py exposing quicksort(items)"
    assert cassette.turns[0].request is not None
    assert cassette.turns[0].request.excerpt == "Deliver quicksort.py exposing quicksort."
    assert cassette.tool_runs[0].output == "token=x; exposing"
    await _replays_strictly(path, "Deliver quicksort.py exposing quicksort.")


async def test_a_long_key_is_scrubbed_everywhere_also_inside_longer_strings(tmp_path: Path) -> None:
    task = f"Use config={LONG_KEY};now."
    replies = [f"the key is abc{LONG_KEY}xyz, exposing it", "done"]
    path = await _record(tmp_path, LONG_KEY, replies, task=task)
    text = path.read_text()
    assert LONG_KEY not in text
    cassette = Cassette.from_file(path)
    marker = "[redacted:PSE_API_KEY]"
    assert cassette.turns[0].content == f"the key is abc{marker}xyz, exposing it"
    assert cassette.turns[0].request is not None
    assert cassette.turns[0].request.excerpt == f"Use config={marker};now."
    run = cassette.tool_runs[0]
    assert (run.arguments, run.output, run.facts) == (
        {"path": f"{marker}.txt"}, f"token={marker}; exposing", {"note": f"<{marker}>"},
    )  # fmt: skip
    # The scrubbed reply comes back inside the Specialist's request: digests are of scrubbed text, so
    # it matches; the task is scrubbed the same way on replay (the key configured then, too).
    await _replays_strictly(path, task, [("PSE_API_KEY", LONG_KEY)])


def test_one_rule_for_tool_output_and_cassettes() -> None:
    secrets = [("PSE_API_KEY", LONG_KEY), ("PSE_PLANNER_API_KEY", "short")]
    scrubber = Scrubber(secrets, environ={})
    redactor = Redactor(secrets, environ={})
    for text in [f"a{LONG_KEY}b", "the word short stays", f"{LONG_KEY}{LONG_KEY}"]:
        assert scrubber.text(text) == redactor.text(text)
    assert scrubber.too_short == ["PSE_PLANNER_API_KEY"]
    # Key shapes are scrubbed from cassettes too (not from tool output, where tests legitimately hold them).
    assert scrubber.text("key sk-abcdefghijklmnopqrstuvwx here") == "key *** here"
