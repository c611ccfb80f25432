"""A person's answer to an escalated run: take it on (with a note, a grant, more cycles, a re-plan),
accept its last artifacts, or close it. The answer is recorded in the trace before anything runs.

The engine never leaves ESCALATED by itself; `answer_run` makes the move a person chose, through the
state table (ESCALATED → REVISING | REPLANNING | ACCEPTED_BY_HUMAN), and the caller resumes the run
(`prepare_resume`) when it was taken on. A resumed run goes on with its counters, its cassette
position and the grants of every answer (rule `human.ROLE.TOOL` in the audit).
"""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pse.config import Settings
from pse.engine import check_run_id, load_trace
from pse.engine._state import State, StateMachine
from pse.events import HumanAnswer, utc_now
from pse.exceptions import UserError
from pse.repo import release_worktree
from pse.roles import ROLES, Role
from pse.runner._index import save_trace
from pse.toolagent import Policy
from pse.trace import Trace, write_trace

__all__ = ["MAX_NOTE_CHARS", "answer_run", "load_run", "parse_grant"]

MAX_NOTE_CHARS = 2000
"""A note leads the next step_buffer: it is kept short so a retry stays flat."""


def load_run(run_id: str, settings: Settings) -> tuple[Trace, Path]:
    """The trace and folder of a run a person acts on.

    Raises:
        UserError: a malformed id, no such run, or a trace that cannot be read.
    """
    runs_dir = settings.runs_dir.resolve()
    run_dir = runs_dir / check_run_id(run_id)
    try:
        return load_trace(run_dir, beneath=runs_dir), run_dir
    except FileNotFoundError:
        raise UserError(
            f"no run {run_id!r} in {settings.runs_dir}; `pse trace list` shows the runs"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read the trace of run {run_id!r}: {exc}") from None


def parse_grant(text: str, policy: Policy) -> tuple[str, str, str]:
    """`[ROLE.]TOOL[:MODE]` → (role, tool, mode); the role defaults to the Specialist, the mode to the
    tool's first one.

    Raises:
        UserError: an unknown role, tool or mode, with the valid ones.
    """
    head, _, mode = text.partition(":")
    role, dot, tool = head.rpartition(".")
    role = role if dot else Role.SPECIALIST
    canonical = {r.lower(): r for r in ROLES}.get(role.lower())
    if canonical is None:
        raise UserError(f"--grant {text!r}: no role {role!r}; the roles are {', '.join(ROLES)}")
    modes = policy.modes_of(tool)
    if modes is None:
        raise UserError(f"--grant {text!r}: no tool {tool!r}; the tools are {', '.join(policy.tool_names())}")
    chosen = mode or modes[0]
    if chosen not in modes:
        raise UserError(f"--grant {text!r}: {tool} takes the modes {', '.join(modes)}, not {chosen!r}")
    return canonical, tool, chosen


def _answer_questions(
    trace: Trace,
    run_dir: Path,
    text: str | None,
    note: str | None,
    grants: Sequence[str],
    decision: str,
    by: str | None,
    via: Literal["cli", "api"],
) -> Trace:
    last = trace.cycles[-1] if trace.cycles else None
    asked = last.clarification.questions if last is not None and last.clarification is not None else []
    listed = "; ".join(f"{q.id}: {q.text}" for q in asked) or "(none recorded)"
    if not text or not text.strip():
        raise UserError(
            f"run {trace.run_id} waits for answers to its Planner's questions ({listed}): "
            f"pse answer {trace.run_id} --text '…'"
        )
    if note or grants or decision != "resume":
        raise UserError("a run waiting for answers takes --text only")
    if len(text) > MAX_NOTE_CHARS:
        raise UserError(f"--text is {len(text)} characters; at most {MAX_NOTE_CHARS}")
    trace.answers.append(
        HumanAnswer(
            by=by or getpass.getuser(),
            via=via,
            decision="answer",
            text=text.strip(),
            questions=list(asked),
            after_cycle=len(trace.cycles),
            outcome_before=trace.state,
            reason_before=last.result_reason if last is not None else "",
        )
    )
    write_trace(trace, run_dir)  # the caller indexes it
    return trace


def answer_run(
    run_id: str,
    settings: Settings,
    *,
    decision: Literal["resume", "accept", "reject"] = "resume",
    note: str | None = None,
    text: str | None = None,
    grants: Sequence[str] = (),
    retries: int = 1,
    replan: bool = False,
    by: str | None = None,
    via: Literal["cli", "api"] = "cli",
) -> Trace:
    """Record a person's answer to an ESCALATED run and move it; return the updated trace (on disk).

    resume: the run goes back to REVISING (its last verdict and plan are kept) or, with `replan` or
    when it has no verdict to revise, to REPLANNING; it gets `retries` cycles (this one included),
    revisions and re-plans as its limits allow within them, before it escalates again. accept:
    outcome ACCEPTED_BY_HUMAN. reject: it stays ESCALATED, closed.

    A run AWAITING_ANSWER (its Planner asked questions) takes `text` instead: the answers, given to
    the Planner's next cycle; the caller resumes it.

    Raises:
        UserError: no such run, a run that did not end ESCALATED (or was closed), or a bad answer.
    """
    trace, run_dir = load_run(run_id, settings)
    if trace.state == "AWAITING_ANSWER" and trace.outcome is None:
        trace = _answer_questions(trace, run_dir, text, note, grants, decision, by, via)
        save_trace(trace, run_dir, settings)
        return trace
    if text is not None:
        raise UserError(
            f"--text answers a Planner's questions, and run {run_id} asks none "
            f"({trace.outcome or trace.state}); an ESCALATED run takes --note, --retries, --grant, --accept"
        )
    if trace.outcome != "ESCALATED":
        state = trace.outcome or f"not ended ({trace.state})"
        raise UserError(f"run {run_id} is {state}: only an ESCALATED run takes an answer")
    if trace.answers and trace.answers[-1].decision == "reject":
        raise UserError(f"run {run_id} was closed by {trace.answers[-1].by} at {trace.answers[-1].at}")
    if decision != "resume" and (note or grants or replan):
        raise UserError("--accept and --reject take no --note, --grant or --replan: they end the run")
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise UserError(
            f"--note is {len(note)} characters; at most {MAX_NOTE_CHARS} (it leads the next cycle)"
        )
    if retries < 1:
        raise UserError("--retries must be at least 1 (the cycle the answer starts)")
    policy = Policy.default(settings)
    checked = [":".join(parse_grant(g, policy)).replace(":", ".", 1) for g in grants]
    answer = HumanAnswer(
        by=by or getpass.getuser(),
        via=via,
        decision=decision,
        note=note,
        grants=checked,
        retries=retries if decision == "resume" else 0,
        replan=replan,
        after_cycle=len(trace.cycles),
        outcome_before=trace.outcome,
        reason_before=trace.outcome_reason,
    )
    trace.answers.append(answer)
    machine = StateMachine(trace.run_id, trace.transitions, State(trace.state), lambda _: None)
    who = f"answered by {answer.by}"
    if decision == "accept":
        machine.move(State.ACCEPTED_BY_HUMAN, f"{who}: the last artifacts accepted")
        trace.outcome, trace.outcome_reason, trace.ended_at = (
            "ACCEPTED_BY_HUMAN",
            f"accepted by {answer.by}",
            utc_now(),
        )
    elif decision == "resume":
        last = trace.cycles[-1] if trace.cycles else None
        revise = not replan and trace.plan is not None and last is not None and last.verdict is not None
        target = State.REVISING if revise else State.REPLANNING
        machine.move(target, f"{who}: {retries} more cycle(s)" + (" and a note" if note else ""))
        # The engine holds the run to `retries` cycles from here (HumanAnswer.retries), whatever its limits.
        trace.outcome, trace.outcome_reason, trace.ended_at = None, "", None
    trace.state = machine.state.value
    if decision != "resume" and trace.repository is not None:  # it ended for good: out of the repository
        trace.repository = release_worktree(run_dir, trace.repository)
        if trace.repository.released:
            trace.repository.note += "; the answer ended the run: nothing of it is left in your repository"
    save_trace(trace, run_dir, settings)
    return trace
