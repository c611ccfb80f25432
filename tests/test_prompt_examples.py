"""Every role's full prompt shows its formats with placeholders, never with values a small model copies.

Qwen2.5-Coder-1.5B under the grammar copied the prompts' worked examples word for word (issue 29): the
Specialist's first turn was protocol.md's example block (`read_file data/metrics.csv`, a `notes.md` of
"raw text: code, quotes, …"), then its example `<blocked reason_code="MISSING_DATA">`; the Planner
returned planner.md's quicksort plan; verdicts reused the example sentences on unrelated problems. These
tests render what each role of each built-in task is really sent (protocol, role prompt, task prompt,
additions such as the evaluation area, steps and questions, and the tool list) and read every example
block in it: each slot (element text, attribute value, report line) must be a placeholder in capitals
or a numbered id, so there is nothing concrete to copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pse.config import load_settings
from pse.protocol._tags import BLOCKED_REASONS, SPEC_CONFLICT, VERDICT_STATUSES
from pse.roles import SINGLE_AGENT, Role
from pse.runner import prepare_run
from pse.tasks import TaskRegistry
from repo_support import make_repo

# A block never holds another opening of its own tag: a tag named in prose ("answer `<blocked>`") is no block.
_BLOCK = re.compile(
    r"<(tool_calls|plan|report|verdict|blocked|clarification)\b[^>]*>(?:(?!<\1\b).)*?</\1>", re.S
)
_ATTRIBUTE = re.compile(r'\b([a-z_]+)="([^"]*)"')
_TEXT = re.compile(r">([^<]+)<")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*( [A-Z][A-Z0-9_]*)*")
_ID = re.compile(r"(S|AC|R|Q)\d+")
# Words of the protocol itself look like placeholders but are values a model copies (a status, a reason).
_PROTOCOL_WORDS = {
    *VERDICT_STATUSES,
    *BLOCKED_REASONS,
    SPEC_CONFLICT,
    *("ALL_MET", "TESTS_FAILING", "LINT_FAILING", "CHECK_FAILING", "OUTPUT_MISSING", "CRITERIA_UNMET"),
}
_REPORT_LINE = re.compile(r"^(Artifacts|Evidence|Assumptions|Unresolved): (.*)$", re.M)
_INPUTS = {
    "humaneval": {"PROBLEM": "def f(x: int) -> int:\n    return x\n", "ENTRY_POINT": "f"},
    "code-change": {"REQUEST": "Make the function return its input."},
}
_REGISTRY = TaskRegistry.discover()
_TASKS = sorted(name for name in _REGISTRY.names() if _REGISTRY.location(name).builtin)

# What the prompts used to show, each copied by the 1.5B model somewhere: none may come back.
_COPIED_BEFORE = (
    "data/metrics.csv",
    "notes.md",
    "raw text: code, quotes",
    "gateway logs for 22:14",
    "Deliver quicksort.py and passing tests",
    "test_input_untouched",
    "duplicate values are lost",
    "test_sorted passes",
    "Every requirement of the task is met",
    "Should the sort be stable",
    "test_acceptance.py",
    "mod.py",
)


_GIVEN_TESTS = {"test_given.py": "from solution import f\n\n\ndef test_1():\n    assert f(1) == 1\n"}
"""An evaluation instance's visible tests: the Specialist, Evaluator and Agent then read spec_conflict.md."""


def _prompts(
    tmp_path: Path, task: str, files: dict[str, str] | None = None, **settings: object
) -> dict[str, str]:
    """Each speaking role's whole system message for a run of `task` (nothing is sent to a model)."""
    config = load_settings(
        provider="openai",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        api_key="k",
        runs_dir=tmp_path,
        **settings,
    )
    repo = make_repo(tmp_path / "repository") if task == "code-change" else None  # it works on one
    prepared = prepare_run(task, config, inputs=_INPUTS.get(task), files=files, repo=repo)
    return {role.name: role.system_message for role in prepared.engine.setup.team.roles}


def _slots(block: str) -> Iterator[str]:
    """Every value an example block fills in: attribute values, element texts and report lines."""
    for name, value in _ATTRIBUTE.findall(block):
        yield f'{name}="{value}"'
    if block.startswith("<report"):
        yield from (f"{label}: {value}" for label, value in _REPORT_LINE.findall(block))
        return
    yield from (text.strip() for text in _TEXT.findall(block) if text.strip())


def _concrete(slot: str) -> bool:
    value = slot.split('="', 1)[1][:-1] if '="' in slot else slot.split(": ", 1)[-1]
    placeholder = _PLACEHOLDER.fullmatch(value) and value not in _PROTOCOL_WORDS
    return not (placeholder or _ID.fullmatch(value))


def _all_prompts(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    for task in _TASKS:
        for team, extra in (("pse", {}), ("single", {}), ("pse", {"planner_questions": True})):
            where = tmp_path / f"{task}-{team}-{len(extra)}"
            for role, prompt in _prompts(where, task, team=team, **extra).items():
                yield f"{task}/{team}{'+questions' if extra else ''}/{role}", role, prompt
    for team in ("pse", "single"):  # a run whose workspace holds tests the task gave
        for role, prompt in _prompts(
            tmp_path / f"given-{team}", "humaneval", _GIVEN_TESTS, team=team
        ).items():
            yield f"humaneval/{team}+given-tests/{role}", role, prompt


def test_every_example_block_of_every_prompt_is_placeholders(tmp_path: Path) -> None:
    concrete: list[str] = []
    shown: dict[str, set[str]] = {}
    for where, role, prompt in _all_prompts(tmp_path):
        for match in _BLOCK.finditer(prompt):
            shown.setdefault(role, set()).add(match.group(1))
            concrete += [f"{where}: {slot}" for slot in _slots(match.group(0)) if _concrete(slot)]
    assert concrete == []
    # The formats are still shown to each role (the test would pass on prompts with no example at all).
    assert shown[Role.PLANNER] >= {"tool_calls", "plan", "blocked", "clarification"}
    assert shown[Role.SPECIALIST] >= {"tool_calls", "report", "blocked"}
    assert shown[Role.EVALUATOR] >= {"tool_calls", "verdict"}
    assert shown[SINGLE_AGENT] >= {"tool_calls", "verdict", "blocked"}


def test_the_honest_way_out_is_told_only_where_the_task_gave_tests(tmp_path: Path) -> None:
    conflict = '<blocked reason_code="REASON_CODE" test="TEST">SENTENCE</blocked>'
    given = _prompts(tmp_path / "given", "humaneval", _GIVEN_TESTS)
    assert {role for role, prompt in given.items() if conflict in prompt} == {Role.SPECIALIST, Role.EVALUATOR}
    assert "REASON_CODE is SPEC_CONFLICT." in given[Role.EVALUATOR]
    single = _prompts(tmp_path / "single", "humaneval", _GIVEN_TESTS, team="single")
    assert conflict in single[SINGLE_AGENT]
    for task in _TASKS:  # a built-in task that seeds no test: its prompts are as they were
        told = any(conflict in prompt for prompt in _prompts(tmp_path / task, task).values())
        # code-delivery seeds its acceptance tests; a repository comes with its own tests
        assert told == (task in ("code-change", "code-delivery")), task


def test_no_prompt_holds_what_the_model_copied_before(tmp_path: Path) -> None:
    found = [
        (where, literal)
        for where, _, prompt in _all_prompts(tmp_path)
        for literal in _COPIED_BEFORE
        if literal in prompt
    ]
    assert found == []


def test_the_checker_flags_the_examples_the_model_copied() -> None:
    """The slot reader itself: the old examples are concrete, placeholders and ids are not."""
    old = (
        '<tool_calls>\n<invoke name="read_file">\n<parameter name="path">data/metrics.csv</parameter>\n'
        "</invoke>\n</tool_calls>"
    )
    assert [s for s in _slots(old) if _concrete(s)] == ['name="read_file"', 'name="path"', "data/metrics.csv"]
    verdict = '<verdict status="PARTIAL">\n  <criterion id="AC1" met="true">test_sorted passes</criterion>\n</verdict>'
    assert [s for s in _slots(verdict) if _concrete(s)] == [
        'status="PARTIAL"',
        'met="true"',
        "test_sorted passes",
    ]
    blocked = '<blocked reason_code="MISSING_DATA">WHAT IS MISSING</blocked>'
    assert [s for s in _slots(blocked) if _concrete(s)] == ['reason_code="MISSING_DATA"']
    report = "<report>\nArtifacts: quicksort.py\nEvidence: EVIDENCE\n</report>"
    assert [s for s in _slots(report) if _concrete(s)] == ["Artifacts: quicksort.py"]
    new = '<plan>\n  <goal>GOAL</goal>\n  <step id="S2" depends_on="S1">STEP</step>\n  <output path="PATH"/>\n</plan>'
    assert [s for s in _slots(new) if _concrete(s)] == []


def test_the_evaluator_is_told_where_its_tests_go_and_to_run_every_required_check(tmp_path: Path) -> None:
    for task in _TASKS:
        evaluator = _prompts(tmp_path / task, task)[Role.EVALUATOR]
        assert "every required check" in evaluator, task
        assert "with target `.`" in evaluator, task
    humaneval = _prompts(tmp_path / "he", "humaneval")[Role.EVALUATOR]  # independent_tests = true
    assert "`@evaluation/test_criteria.py`" in humaneval
    assert "never an `@evaluation/` path alone" in humaneval
    code_delivery = _prompts(tmp_path / "cd", "code-delivery")[Role.EVALUATOR]
    assert "@evaluation/" not in code_delivery  # no evaluation area there: nothing to point at


@pytest.mark.parametrize("role", [Role.PLANNER, Role.SPECIALIST, Role.EVALUATOR])
def test_the_placeholders_are_explained_next_to_the_format(tmp_path: Path, role: str) -> None:
    prompt = _prompts(tmp_path, "code-delivery")[role]
    assert "placeholders in capitals" in prompt and "never copy a placeholder" in prompt
    explained = {Role.PLANNER: "GOAL is", Role.SPECIALIST: "ARTIFACTS:", Role.EVALUATOR: "FINDING is"}
    assert explained[role] in prompt
