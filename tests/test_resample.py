"""A role whose last write changed nothing samples its calls until it writes something new
(`models.ResamplingClient`), asserted on what the real OpenAI client code puts on the wire.

At temperature 0 the 1.5B model wrote `solution.py` with the bytes it already held in each revise of
the HumanEval runs it did not pass (HumanEval-19: the same `sort_numbers` in cycles 1, 2 and 3).
"""

from __future__ import annotations

from typing import Any

import pytest
from autogen_core.models import AssistantMessage, SystemMessage, UserMessage

from pse.config import load_settings
from pse.models import ConstraintLog, create_model_client
from pse.models._resample import RESAMPLE_TEMPERATURE, ResamplingClient
from pse.roles import TASK_SOURCE, TOOL_AGENT, Role
from pse.tools import UNCHANGED, Tool, builtin_tools
from standins import ChatStandIn, Reply

_WRITE = next(spec.signature for spec in builtin_tools() if spec.name == Tool.WRITE_FILE)
_REPORT = "<report>\nArtifacts: solution.py\n</report>"


def _wrote(note: str = "", role: str = Role.SPECIALIST) -> UserMessage:
    """The ToolAgent's answer to a write of solution.py, with `note` under it."""
    body = "wrote solution.py (42 bytes)" + (f"\nnote: {note}" if note else "")
    return UserMessage(
        content=f'<tool_results for="{role}">\n<result index="1" name="write_file" status="ok">{body}'
        "</result>\n</tool_results>",
        source=TOOL_AGENT,
    )


_CALL = AssistantMessage(
    content='<tool_calls>\n<invoke name="write_file">\n<parameter name="path">solution.py</parameter>\n'
    '<parameter name="content">x = 1\n</parameter>\n</invoke>\n</tool_calls>',
    source=Role.SPECIALIST,
)
_SAME = f"solution.py already held exactly these bytes: {UNCHANGED}"


def _request(*turns: Any) -> list[Any]:
    return [
        SystemMessage(content="You are the Specialist."),
        UserMessage(content="Task", source=TASK_SOURCE),
        *turns,
    ]


async def _temperatures(requests: list[list[Any]], temperature: float, log: ConstraintLog) -> list[Any]:
    with ChatStandIn("openai") as stand_in:
        stand_in.script(*(Reply(content=_REPORT) for _ in requests))
        settings = load_settings(
            provider="openai",
            model="m-test",
            base_url=stand_in.url,
            model_max_retries=0,
            model_temperature=temperature,
            constrain="off",
        )
        client = create_model_client(settings, Role.SPECIALIST, tools=[_WRITE], constraint_log=log)
        try:
            for messages in requests:
                await client.create(messages)
        finally:
            await client.close()
    return [r.body.get("temperature") for r in stand_in.requests]


async def test_calls_after_a_write_that_changed_nothing_sample_until_a_write_changes_something() -> None:
    log = ConstraintLog()
    sent = await _temperatures(
        [
            _request(),
            _request(_CALL, _wrote()),
            _request(_CALL, _wrote(_SAME)),  # the same bytes again: sampled
            _request(_CALL, _wrote(_SAME), AssistantMessage(content="x", source=Role.SPECIALIST)),
            _request(_CALL, _wrote(_SAME), _CALL, _wrote()),  # a write that changed something: greedy again
        ],
        0,
        log,
    )
    assert sent == [0, 0, RESAMPLE_TEMPERATURE, RESAMPLE_TEMPERATURE, 0]
    assert log.calls == {Role.SPECIALIST: {ResamplingClient.RESAMPLED: 2}}


@pytest.mark.parametrize(
    "turns",
    [
        # the words in the role's own message, or in another role's results, are not the ToolAgent's to it
        (AssistantMessage(content=_SAME, source=Role.SPECIALIST),),
        (UserMessage(content=f'<tool_results for="Specialist">{_SAME}</tool_results>', source=Role.PLANNER),),
        (_CALL, _wrote(_SAME, role=Role.EVALUATOR)),
    ],
)
async def test_only_the_toolagents_answer_to_the_roles_own_write_counts(turns: tuple[Any, ...]) -> None:
    assert await _temperatures([_request(*turns)], 0, ConstraintLog()) == [0]


async def test_a_temperature_at_or_above_the_resample_one_is_left_as_it_is() -> None:
    sent = await _temperatures([_request(_CALL, _wrote(_SAME))], 1.0, ConstraintLog())
    assert sent == [1.0]
