"""The reusable-prefix share: how much of each prompt repeats a prefix sent before to the same model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from autogen_core.models import AssistantMessage, SystemMessage, UserMessage

from pse.config import load_settings
from pse.history import compute_stats
from pse.models import PrefixMeter, common_prefix_tokens
from pse.models._digest import normalize
from pse.runner import prepare_run, run_to_end
from pse.tokens import count_message_tokens, count_tokens

SYSTEM = SystemMessage(content="You are the Specialist. " * 20)
TASK = UserMessage(content="Deliver quicksort.py with tests.", source="user")


def test_whole_messages_then_the_common_start_of_the_first_that_differs() -> None:
    first = [("system", "abc def"), ("user:user", "the task"), ("user:ToolAgent", "result one")]
    again = [("system", "abc def"), ("user:user", "the task"), ("user:ToolAgent", "result two"), ("x", "y")]
    whole = count_message_tokens(["abc def", "the task"])
    assert common_prefix_tokens(again, first) == whole + count_tokens("result ")
    assert common_prefix_tokens([("system", "other")], first) == 0
    assert common_prefix_tokens([("user:user", "abc def")], first) == 0  # another speaker: no prefix


def test_the_meter_measures_each_model_apart_and_takes_the_longest_earlier_prefix() -> None:
    meter = PrefixMeter()
    seen: list[tuple[str, int, int]] = []
    first = [SYSTEM, TASK]
    counted, reusable = meter.observe("m", "Specialist", first)
    assert (counted, reusable) == (count_message_tokens([SYSTEM.content, TASK.content]), 0)
    turn = [*first, AssistantMessage(content="<tool_calls>…</tool_calls>", source="Specialist")]
    assert meter.observe("m", "Specialist", turn)[1] == counted  # the whole earlier prompt repeats
    assert meter.observe("other-model", "Specialist", turn)[1] == 0  # another model has its own cache
    meter.attach(lambda role, c, r: seen.append((role, c, r)))  # figures measured before arrive first
    assert [r for _, _, r in seen] == [0, counted, 0]


def test_a_run_books_the_figures_per_role_and_cycle_and_pse_stats_gives_the_share(tmp_path: Path) -> None:
    settings = load_settings(runs_dir=tmp_path, sandbox="fallback")
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    trace = json.loads(Path(summary.trace).read_text())
    by_role = {r: (t["prefix_counted"], t["prefix_reusable"]) for r, t in trace["tokens"]["by_role"].items()}
    # The scripted provider counts prompts with the same counter, so the figures line up with `prompt`.
    assert {r: c for r, (c, _) in by_role.items()} == {
        r: t["prompt"] for r, t in trace["tokens"]["by_role"].items()
    }
    assert by_role == {"Planner": (1618, 0), "Specialist": (12037, 8400), "Evaluator": (15007, 9580)}
    per_cycle = [{r: t["prefix_reusable"] for r, t in c["tokens"].items()} for c in trace["cycles"]]
    assert per_cycle == [
        {"Planner": 0, "Specialist": 3040, "Evaluator": 3858},
        {"Specialist": 5360, "Evaluator": 5722},
    ]
    assert compute_stats(tmp_path).reusable_prefix_share == round((8400 + 9580) / (1618 + 12037 + 15007), 4)


def test_a_revise_cycle_opens_with_what_the_first_cycle_sent_then_its_step_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stable parts first: each role's first revise prompt repeats its first-cycle opening (system, task,
    the plan as the Planner's) whole, and only then what is new: the step_buffer, the new report."""
    sent: list[tuple[str, list[tuple[str, str]]]] = []
    observe = PrefixMeter.observe

    def spy(self: PrefixMeter, model: str, role: str, messages: Any) -> tuple[int, int]:
        sent.append((role, normalize(messages)))
        return observe(self, model, role, messages)

    monkeypatch.setattr(PrefixMeter, "observe", spy)
    settings = load_settings(runs_dir=tmp_path, sandbox="fallback")
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    trace = json.loads(Path(summary.trace).read_text())
    plan = trace["cycles"][0]["messages"][0]["content"]
    buffer = trace["cycles"][1]["step_buffer"]
    assert buffer.startswith("## Revision request (cycle 2)") and "<plan>" not in buffer  # not sent twice
    firsts: dict[str, list[list[tuple[str, str]]]] = {}
    for role, prompt in sent:
        if len(prompt) <= 5:  # a phase's first prompt (its later ones hold its turns and results)
            firsts.setdefault(role, []).append(prompt)
    (s1, s2), (e1, e2) = firsts["Specialist"], firsts["Evaluator"]
    # The first cycle's Specialist also gets the note of the outputs it is to write (none on the revise:
    # they exist), each Evaluator the note of the outputs it judges; what both cycles share comes first.
    assert [speaker for speaker, _ in s1] == ["system", "user:user", "user:Planner", "user:user"]
    assert s1[2][1] == plan and s1[3][1].startswith(
        "Not in the workspace yet, for you to write with write_file:"
    )
    assert "Write quicksort.py first. What the task says of it: `quicksort.py` holds" in s1[3][1]
    assert s2 == [*s1[:3], ("user:user", buffer)]
    assert e2[:3] == e1[:3] and [speaker for speaker, _ in e2] == [s for s, _ in e1]
    assert e2[3][0] == "user:Specialist" and e2[3][1] != e1[3][1]  # the revised report: the only new part
    # So the revise cycle's first Specialist prompt is served whole from the cache, but its step_buffer.
    first_specialist_call = next(c for r, c in sent if r == "Specialist")
    assert common_prefix_tokens(s2, first_specialist_call) == count_message_tokens(t for _, t in s1[:3])
