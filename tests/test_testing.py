"""`pse.testing`: its models, its harness, and docs/testing.md's example, run as it is written."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from autogen_core.models import LLMMessage, SystemMessage, UserMessage

from pse.exceptions import CassetteError, UserError
from pse.models import message_texts
from pse.testing import FunctionModel, ScriptedModel, in_memory_task, run_task
from pse.tokens import count_message_tokens, count_tokens

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
PLAN = """<plan>
  <goal>Deliver a.txt</goal>
  <step id="S1">Write a.txt</step>
  <criterion id="AC1">a.txt says hi</criterion>
  <output path="a.txt"/>
</plan>"""
WRITE = (
    '<tool_calls><invoke name="write_file"><parameter name="path">a.txt</parameter>'
    '<parameter name="content">hi\n</parameter></invoke></tool_calls>'
)
REPORT = "<report>\nArtifacts: a.txt\nEvidence: written\nAssumptions: none\nUnresolved: none\n</report>"
VERDICT = (
    '<verdict status="PASS"><reason_code>ALL_MET</reason_code><criterion id="AC1" met="true">it does'
    "</criterion><summary>Done.</summary></verdict>"
)
TASK = {"goal": "Write a.txt saying hi.", "expected_outputs": ["a.txt"]}


def test_the_docs_example_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    [block] = re.findall(r"## An example\n.*?```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its run folder: under the test's own
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_example"})
    assert [p.name.startswith("pse-testing-") for p in tmp_path.iterdir()] == [True]


async def test_a_function_model_counts_usage_as_the_scripted_client_does() -> None:
    seen: list[int] = []

    async def reply(messages: Sequence[LLMMessage]) -> str:
        seen.append(len(messages))
        return "two words"

    model = FunctionModel(reply)
    messages: list[LLMMessage] = [SystemMessage(content="be brief"), UserMessage(content="hi", source="user")]
    result = await model.create(messages)
    assert result.content == "two words" and seen == [2] and model.requests == [messages]
    assert result.usage.prompt_tokens == count_message_tokens(message_texts(messages))
    assert result.usage.completion_tokens == count_tokens("two words")
    await model.create(messages)
    assert model.total_usage().prompt_tokens == 2 * result.usage.prompt_tokens


async def test_a_run_with_models_meters_them_into_the_trace(tmp_path: Path) -> None:
    specialist = ScriptedModel([WRITE, REPORT])
    summary, trace, prepared = await run_task(
        TASK,
        models={"Specialist": specialist},
        turns=[("Planner", PLAN), ("Evaluator", VERDICT)],
        runs_dir=tmp_path,
    )
    assert summary.outcome == "PASSED" and trace.task == "test-task"
    assert (prepared.workspace / "a.txt").read_text() == "hi\n"
    assert specialist.remaining == 0 and len(specialist.requests) == 2
    assert prepared.player is not None and prepared.player.positions == {
        "Planner": 1,
        "Specialist": 0,
        "Evaluator": 1,
    }
    # The given model's calls count like the scripted ones: PSE's counter over what was sent.
    spent = trace.cycles[0].tokens["Specialist"]
    assert spent.calls == 2
    assert spent.prompt == sum(count_message_tokens(message_texts(r)) for r in specialist.requests)
    assert spent.completion == count_tokens(WRITE) + count_tokens(REPORT)


async def test_a_scripted_model_out_of_turns_ends_the_run_as_error(tmp_path: Path) -> None:
    summary, _, _ = await run_task(
        TASK, models={"Specialist": ScriptedModel([WRITE])}, turns=[("Planner", PLAN)], runs_dir=tmp_path
    )
    assert summary.outcome == "ERROR" and "has no turn 2 (it holds 1)" in summary.outcome_reason


def test_a_task_in_memory_refuses_what_needs_a_folder_and_prompts_for_no_role() -> None:
    with pytest.raises(UserError, match=r"seed .*workspace_files"):
        in_memory_task({**TASK, "seed": ["data"]})
    with pytest.raises(UserError, match=r"checks.c uses \{task_dir\}"):
        in_memory_task({**TASK, "checks": {"c": "{python} {task_dir}/c.py"}})
    with pytest.raises(UserError, match="Reviewer, which is no role"):
        in_memory_task(TASK, prompts={"Reviewer": "x"})
    task = in_memory_task(TASK, prompts={"Specialist": "Say hi."})
    assert task.folder is None and task.cassette_path is None and task.role_prompt("Planner") == ""
    assert task.system_prompt("Specialist").rstrip().endswith("Say hi.")


async def test_a_model_or_turn_for_no_role_is_refused_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="models: 'Reviewer' is no role of this run"):
        await run_task(TASK, models={"Reviewer": FunctionModel(lambda m: "")}, runs_dir=tmp_path)
    with pytest.raises(CassetteError, match=r"turns: .*role must be one of"):
        await run_task(TASK, turns=[("Reviewer", "x")], runs_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_a_keyword_that_is_no_run_option_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    """prepare_run and prepare_task share their options (`RunOptions`): a misspelt one is a TypeError, as
    with a plain signature, and no run folder is made."""
    from pse.config import Settings
    from pse.runner import prepare_run, prepare_task

    settings = Settings(runs_dir=tmp_path / "runs")
    with pytest.raises(TypeError, match=r"prepare_run\(\) got an unexpected keyword argument 'input'"):
        prepare_run("hello-world", settings, input={"X": "1"})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"prepare_task\(\) got an unexpected keyword argument 'tag'"):
        prepare_task(in_memory_task(TASK), settings, tag={"a": "b"})  # type: ignore[call-arg]
    assert not (tmp_path / "runs").exists()
