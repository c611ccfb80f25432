"""What a role may send next, read from the request its model is about to get: the steering of constrained
decoding (`ConstrainedChatCompletionClient` turns the shape into a grammar or a schema).

A small model's first moves decide its run, and a grammar can make them for it (issue 44):

* **the plan's criteria** are the Evaluator's to judge, read from the Planner's message or PSE's brief
  (a `<plan>` another role wrote never narrows them);
* **evidence first**: the Specialist and the Evaluator report or judge only after tool results of their
  own; a judge (the Evaluator, the single agent) only after a check it ran since its last write;
* **write first**: a doer whose outputs are all new (none was in the workspace when the run began) and
  none yet written in its phase is offered no look (a look finds an output missing, and the model
  blocks on "missing data"), nor is one whose brief showed where its code raised (it has the file);
  once it wrote one, it is free again (kept to writing until every output was written, the 1.5B model
  wrote the same file ten times over); an Evaluator that owes tests of its own writes them and runs
  them in one turn;
* **no endless looks**: a Specialist whose last `LOOKS_BEFORE_ACTING` results only looked is offered none;
* **a last turn is a final**: a role whose phase has room for no tool call and its answer before the turn
  cap (PSE's notice, `LAST_TURN`, ends its request) is offered no tool;
* **no endless turns**: a role whose turns brought it nothing new `STALE_TURNS` times (every call failed,
  or made before with nothing changed since) is offered no tool: it ends with its final;
* **where a file block writes**: the plan's outputs (the Specialist's), the one test file of the
  Evaluator's own (`OWN_TEST_FILE`);
* **findings** and the **SPEC_CONFLICT** ending where the role's instructions tell it of them;
* **no block straight back**: the turn that answers PSE's question about a role's block (`BLOCK_ASKED`)
  may not block; the role may block again once it has acted.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from pse.config import ModelSpec
from pse.events import PlanRecord
from pse.models._answers import answer_texts, answered
from pse.models._digest import message_texts
from pse.protocol import (
    ResultItem,
    ToolSignature,
    TurnShape,
    asks_findings,
    files_as_calls,
    last_plan,
    offers_conflict,
    parse_tool_results,
    plan_outputs,
    read_invokes,
)
from pse.roles import (
    BLOCK_ASKED,
    LAST_TURN,
    NOT_WRITTEN,
    SINGLE_AGENT,
    TASK_SOURCE,
    WRITE_AGAIN,
    Role,
)
from pse.tools import (
    EVALUATION_PREFIX,
    FAULT_HEADING,
    OWN_TEST_FILE,
    OWN_TESTS,
    WITHHELD,
    Tool,
    names_check,
    passed_names,
)

__all__ = ["LOOKS_BEFORE_ACTING", "STALE_TURNS", "UNKNOWN_GROUND", "TaskGround", "turn_shape_of"]

_PLAN_SOURCES = frozenset({Role.PLANNER, TASK_SOURCE})
"""Who may hand the Evaluator the plan it judges: the Planner, or PSE's own messages (briefs)."""

_LOOKS = frozenset({Tool.READ_FILE, Tool.LIST_FILES})
"""Tools that only look."""
_CHECKS = frozenset({Tool.RUN_PYTEST, Tool.RUN_RUFF, Tool.RUN_CHECK})
"""Tools whose results are a judge's evidence."""
_AREA = (f"{EVALUATION_PREFIX}/",)
"""Where an Evaluator's file blocks may write: its evaluation area (its only writable area)."""
LOOKS_BEFORE_ACTING = 3
"""A Specialist whose last this many tool results in a row were only looks, and which may write, is
offered no look in its next turn: it writes, reports or blocks."""
STALE_TURNS = 3
"""A role (not the Planner) whose turns since PSE's last message brought it nothing new this many times
(`_stale_turns`) is offered no tool in its next turn: it sends its final (a report, a verdict, a block)
on what it has, and the loop goes on from there instead of ending the run at the turn cap."""
_RESULT_NAME = re.compile(r'<result index="\d+" name="([^"]+)"')


@dataclass(frozen=True)
class TaskGround:
    """What the task gives a role to stand on, known when the run is wired: the files in the workspace
    then (its seed, an instance's files, a repository's tree; None: not known, or too many to list),
    and the outputs it expects (the single agent's plan: it has no Planner)."""

    present: frozenset[str] | None = None
    expected: tuple[str, ...] = ()


UNKNOWN_GROUND = TaskGround()
"""A task PSE was told nothing of: any file may be there, no output is known."""


def turn_shape_of(
    spec: ModelSpec,
    tools: Sequence[ToolSignature],
    messages: Sequence[LLMMessage],
    *,
    max_invokes: int = 16,
    questions: bool = False,
    ground: TaskGround = UNKNOWN_GROUND,
) -> TurnShape:
    """What `spec.role` may send in answer to `messages` (see the module docstring), unsized.

    Args:
        spec: the role's model settings (its role, its write format).
        tools: the tools its policy grants.
        messages: the request its model is about to get.
        max_invokes: most invokes one message may hold.
        questions: the Planner may send a `<clarification>` (PSE_PLANNER_QUESTIONS).
        ground: what the task put in the workspace and expects out of it.
    """
    tools = tuple(tools)
    # PSE's notice of the role's last turn in its phase ends the request (`team.WithholdingContext`); the
    # readers of PSE's last message read the one before it.
    last = _pse_says(messages, LAST_TURN)
    messages = messages[:-1] if last else messages
    # The plan is the Planner's message (or PSE's own brief): a <plan> another role wrote, such as
    # one inside the Specialist's report, never narrows the criteria the Evaluator may judge.
    authored = [m for m in messages if isinstance(m, UserMessage) and m.source in _PLAN_SOURCES]
    judged = last_plan(message_texts(authored)) if spec.role == Role.EVALUATOR else None
    criteria = tuple(c.id for c in judged.criteria) if judged is not None else None
    # Its own tool results, as the ToolAgent sent them: text another role wrote never counts.
    own = f'<tool_results for="{spec.role}"'
    evidence = bool(answer_texts(messages, own))
    if spec.role in (Role.EVALUATOR, SINGLE_AGENT) and any(t.name in _CHECKS for t in tools):
        # A judge's verdict rests on a check it ran since the last write: told to run pytest before
        # its PASS, the 1.5B model's Evaluator sent PARTIAL for TESTS_FAILING, with no test run.
        ran = _results(messages, own)
        last_write = max((i for i, (name, _) in enumerate(ran) if name == Tool.WRITE_FILE), default=-1)
        evidence = any(name in _CHECKS and status != "denied" for name, status in ran[last_write + 1 :])
    # Findings where the role's instructions tell it of them (a repository run's Evaluator).
    instructions = message_texts([m for m in messages if isinstance(m, SystemMessage)])
    written = _written(messages, own)
    # The doer of the work: the Specialist (its plan's outputs), or the single agent (the task's).
    writes = spec.role in (Role.SPECIALIST, SINGLE_AGENT) and any(t.name == Tool.WRITE_FILE for t in tools)
    outputs = (plan_outputs(message_texts(authored)) or ground.expected or None) if writes else None
    # Every output is new work and one is still to write: a look can only find it missing. The 1.5B
    # model read `PROBLEM` and listed `solution.py`, then blocked on "missing data", and read again after
    # being told to write; on code-delivery (its acceptance tests seeded) it read `quicksort.py` and
    # blocked the same way. Where an output was there to change (a repository's file), it looks first.
    # The first write only: made to write every output anew in a revise cycle, the model copied the
    # file it had just written into the next one.
    new = ground.present is not None and not set(outputs or ()) & ground.present
    # Or PSE's brief showed it the lines its code raised at, and the files (a revise cycle): told only
    # which test failed, the model read the task's inputs and reported without writing.
    shown = any(
        isinstance(m, UserMessage) and m.source == TASK_SOURCE and f"{FAULT_HEADING}:" in str(m.content)
        for m in messages
    )
    to_write = writes and (new or shown) and bool(outputs) and not set(outputs or ()) & written
    # Or PSE just told it which outputs it has still to write (its report or its block came first): the
    # 1.5B model, so told, read a file that was not there and blocked on "missing data" (heldout-9
    # top-words). That turn writes one of those, and only those (not the file it wrote last again).
    told = _told_to_write(messages, outputs or ()) if writes else ()
    to_write = to_write or bool(told)
    # Tests of its own are what an Evaluator owes first, and its phase opened with the outputs it
    # judges: the 1.5B model's Evaluator read each output in turn, one a turn, and then ran pytest
    # over no test of its own.
    owes_tests = spec.role == Role.EVALUATOR and any(t.name == Tool.WRITE_FILE for t in tools)
    owes_tests = owes_tests and not any(path.startswith(_AREA[0]) for path in written)
    looked = writes and _looks_in_a_row(messages, own) >= LOOKS_BEFORE_ACTING
    if looked or to_write or owes_tests:
        tools = tuple(t for t in tools if t.name not in _LOOKS)
    if last or (spec.role != Role.PLANNER and _stale_turns(messages, own, writes) >= STALE_TURNS):
        tools, to_write, owes_tests = (), False, False  # its final now: what it has is all it will get
    fenced = spec.write_format == "fenced"
    # An Evaluator's tests go in one file its prompt names: in csv-mean (heldout-19) the 1.5B model wrote
    # `@evaluation/test_csvmean.py` with a test that took a parameter no fixture gives, then, asked to
    # fix its tests, wrote the named file again, and the broken one failed every run until the cap.
    judges = (OWN_TEST_FILE,) if spec.role == Role.EVALUATOR else None
    paths = (told or outputs) if writes and outputs else judges
    return TurnShape(
        spec.role,
        tools,
        criteria,
        max_invokes,
        evidence=evidence,
        questions=questions,
        findings=spec.role == Role.EVALUATOR and asks_findings(instructions),
        files=fenced,
        conflicts=offers_conflict(instructions),
        blocks=not _asked_about_block(messages),
        writes_first=to_write or owes_tests,
        then_runs=owes_tests,
        paths=paths if fenced else None,
        backing=_backing(messages, own) if spec.role == Role.EVALUATOR else (),
        checked=_checked(judged, tools),
    )


def _checked(plan: PlanRecord | None, tools: Sequence[ToolSignature]) -> tuple[str, ...]:
    """The criteria of `plan` that name a check the role may run (`pytest`, `run_ruff`)."""
    checks = [
        str(t.name).removeprefix("run_") for t in tools if t.name in _CHECKS and t.name != Tool.RUN_CHECK
    ]
    return tuple(c.id for c in plan.criteria if any(names_check(c.text, k) for k in checks)) if plan else ()


def _backing(messages: Sequence[LLMMessage], own: str) -> tuple[str, ...]:
    """The role's own tests that passed in its last run_pytest that listed them (`pse.tools._backing`),
    read from its own tool results only."""
    for text in reversed(answer_texts(messages, own)):
        if OWN_TESTS in text:
            return passed_names(text)
    return ()


def _looks_in_a_row(messages: Sequence[LLMMessage], own: str) -> int:
    """How many of the role's latest tool results, in a row, held only looks (`read_file`, `list_files`).

    Why: in a revise or re-plan cycle the 1.5B model's Specialist read its files in turn, nine to ten
    times, until the turn cap, and never wrote; a note on the repeated read changed nothing. Under a
    grammar, a turn that cannot look must act."""
    count = 0
    for text in reversed(answer_texts(messages, own)):
        names = _RESULT_NAME.findall(text)
        if not names or any(name not in _LOOKS for name in names):
            break
        count += 1
    return count


def _results(messages: Sequence[LLMMessage], own: str) -> list[tuple[str, str]]:
    """(tool, status) of every result the ToolAgent sent the role in this request, in order."""
    return [(r.name, r.status) for r in answered(messages, own)]


_Turn = tuple[list[tuple[str, dict[str, str]]], list[str]]
"""A turn that called tools: its calls as (tool, parameters), the status of each one's result."""


def _turns(messages: Sequence[LLMMessage], own: str) -> list[_Turn]:
    """The role's turns that called tools, in order: each call of its message (as (tool, parameters)) and
    the status of each result, paired by position; a PSE message (a nudge, a brief) between turns is an
    empty turn, which ends a run of stale ones (`_stale_turns`)."""
    turns: list[_Turn] = []
    for asked, answer in itertools.pairwise(messages):
        if isinstance(asked, UserMessage) and asked.source == TASK_SOURCE:
            turns.append(([], []))
            continue
        if not (isinstance(asked, AssistantMessage) and isinstance(asked.content, str)):
            continue
        if not (isinstance(answer, UserMessage) and str(answer.content).lstrip().startswith(own)):
            continue
        invokes = read_invokes(files_as_calls(asked.content))  # the role saw its writes as file blocks
        try:
            _, results = parse_tool_results(str(answer.content))
        except ValueError:
            continue
        calls = _aligned(invokes, results) if invokes is not None else None
        if calls is not None:
            turns.append((calls, [r.status for r in results]))
    return turns


_WROTE = re.compile(r"wrote (\S+) \(\d+ bytes\)")


def _aligned(
    invokes: Sequence[tuple[str, Sequence[tuple[str, str]]]], results: Sequence[ResultItem]
) -> list[tuple[str, dict[str, str]]] | None:
    """The calls of a turn as the role sent them, one for each result, in order: a write PSE withheld from
    the role's view (`team.WithholdingContext`) stands where the view shows none (the fenced format shows
    such a write as nothing at all), its content `WITHHELD` and its path as its result names it. None
    when the calls and the results do not pair.

    Why: shown as nothing, the 1.5B model's writes of the very bytes its file held counted as no turn at
    all, and its Specialist wrote `solution.py` ten times over until the turn cap (HumanEval-10)."""
    calls: list[tuple[str, dict[str, str]]] = []
    shown = list(invokes)
    for result in results:
        wrote = _WROTE.match(result.output) if result.name == Tool.WRITE_FILE else None
        if shown and shown[0][0] == result.name:
            params = dict(shown[0][1])
            if wrote is None or wrote[1] == params.get("path", "").strip():
                calls.append((result.name, params))
                shown.pop(0)
                continue
        if result.name != Tool.WRITE_FILE:
            return None
        calls.append((Tool.WRITE_FILE, {"path": wrote[1] if wrote else "", "content": WITHHELD}))
    return None if shown else calls


_UNWRITTEN = re.compile(rf"(?P<paths>[^\s,:]+(?:, [^\s,:]+)*) (?:is|are) (?:{NOT_WRITTEN}|{WRITE_AGAIN}):")


def _told_to_write(messages: Sequence[LLMMessage], outputs: Sequence[str]) -> tuple[str, ...]:
    """The plan's outputs PSE's last message (a nudge, never a role's) says are still to write, if the
    request ends with one."""
    last = messages[-1] if messages else None
    if not (isinstance(last, UserMessage) and last.source == TASK_SOURCE):
        return ()
    found = _UNWRITTEN.search(str(last.content))
    named = [p.strip() for p in found["paths"].split(",")] if found else []
    return tuple(p for p in named if p in outputs)


def _asked_about_block(messages: Sequence[LLMMessage]) -> bool:
    """Whether the request ends with PSE's question about the role's block (a nudge, never a role's).

    Why: asked once whether its SPEC_CONFLICT stood (it quoted no sentence of the task), the 1.5B
    model's Evaluator sent the same conflict back, twice in a row, and the run ended for a person over
    work whose failing test was right (CI, code-delivery)."""
    return _pse_says(messages, BLOCK_ASKED)


def _pse_says(messages: Sequence[LLMMessage], opening: str | tuple[str, ...]) -> bool:
    """Whether the request ends with a message of PSE's own (never a role's) that starts with `opening`."""
    last = messages[-1] if messages else None
    if not (isinstance(last, UserMessage) and last.source == TASK_SOURCE):
        return False
    return str(last.content).startswith(opening)


def _written(messages: Sequence[LLMMessage], own: str) -> set[str]:
    """The paths the role's `write_file` calls wrote in this request's turns (status ok)."""
    return {
        params.get("path", "").strip()
        for calls, statuses in _turns(messages, own)
        for (name, params), status in zip(calls, statuses, strict=True)
        if name == Tool.WRITE_FILE and status == "ok"
    }


def _stale_turns(messages: Sequence[LLMMessage], own: str, writes: bool) -> int:
    """How many of the role's turns since PSE's last message could bring it nothing new: every call
    failed (denied, an error), or each call is one it made before with no file changed since, or writes a
    file with the bytes the role last wrote to it. `writes`: the role may write, so its `bash` may change
    files too.

    Why: the 1.5B model spent whole cycles until the turn cap on such turns: its Specialist wrote the
    same test file ten times over; its Evaluator listed `..` (denied), sent `rm -rf ..`, read the same
    file, and ran `pytest --help` and the same refused run_pytest again (held-out top-words, roman,
    slugify, csv-mean). A note in the results ("you sent this before") changed nothing."""
    stale, since_change = 0, set[str]()
    held: dict[str, str] = {}
    for calls, statuses in _turns(messages, own):
        if not calls:
            stale = 0
            continue
        old = True
        for (name, params), status in zip(calls, statuses, strict=True):
            path = params.get("path", "").strip()
            if name == Tool.WRITE_FILE and params.get("content") == WITHHELD:
                continue  # refused, not code to run, or the bytes its file held: nothing new
            if name == Tool.WRITE_FILE:
                same = held.get(path) == params.get("content")
                if status == "ok" and not same:
                    held[path], since_change = params.get("content", ""), set()
                old = old and same
                continue
            key = repr((name, sorted(params.items())))
            old = old and key in since_change
            since_change.add(key)
            if writes and name == Tool.BASH and status == "ok":
                since_change = set()
        failed = all(status in ("denied", "error") for status in statuses)
        stale += int(failed or old)
    return stale
