"""The participants of a run: each LLM role as one `RoleSpec`, the crews they form, and the ToolAgent.

Role names are a public contract (cassettes, traces, `PSE_<ROLE>_*` variables, policy tables); every
other module refers to them through `Role`. `Role` is a `StrEnum`, so a member equals its name as a
string and serializes as one.

A role's facts live in its `RoleSpec` (`ROLE_SPECS`, read with `role_spec`): its description, base
prompt, the task prompts it reads, what its final message owes and how PSE reads it, the states its
phase enters, the blocks its grammar allows. A crew (`CrewSpec`, `CREWS`) is which roles speak, in which
order, and how their review is judged; `PSE_TEAM` selects one (`Settings.crew`). A role's default tool
grants are the policy's table (`toolagent.DEFAULT_GRANTS`): this module sits below the tools in the
layers, so it cannot name them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = [
    "ALL_ROLES",
    "BLOCK_ASKED",
    "CREWS",
    "LAST_TURN",
    "NOT_WRITTEN",
    "PSE_CREW",
    "REVIEW_CREW",
    "ROLES",
    "ROLE_SPECS",
    "SINGLE_AGENT",
    "SINGLE_CREW",
    "TASK_SOURCE",
    "TOOL_AGENT",
    "WRITE_AGAIN",
    "CrewSpec",
    "CycleKind",
    "FinalKind",
    "Note",
    "Nudge",
    "PhaseSpec",
    "Role",
    "RoleSpec",
    "role_spec",
]


class Role(StrEnum):
    """An LLM role with separated powers."""

    PLANNER = "Planner"
    """Defines the work and its acceptance criteria; never executes, never judges."""
    SPECIALIST = "Specialist"
    """Executes inside its bounds and reports; never changes the criteria, never grades itself."""
    EVALUATOR = "Evaluator"
    """Judges each criterion against evidence it gathers itself; never fixes."""


ROLES: tuple[str, ...] = tuple(Role)
"""The role names (members of `Role`) in their speaking order, typed as the strings they are."""
SINGLE_AGENT = "Agent"
"""The one LLM agent of the `single` team (`PSE_TEAM=single`, the evaluation baseline): it does the work
and then reviews it itself, with the Specialist's and the Evaluator's tools. Not a PSE role: it has no
separated powers, which is what the baseline measures."""
ALL_ROLES: tuple[str, ...] = (*ROLES, SINGLE_AGENT)
"""Every LLM participant a cassette may script."""
TOOL_AGENT = "ToolAgent"
"""The group-chat name of the ToolAgent: a participant, not a role (no model, no policy of its own)."""
TASK_SOURCE = "user"
"""The source AutoGen gives the task message that opens a cycle."""
NOT_WRITTEN = "not written yet"
"""How PSE tells a role of the plan's outputs it has still to write (`OUTPUTS is/are not written yet:`),
and how the next turn's shape finds them (`models._turn_shape`): that turn writes one of them."""
WRITE_AGAIN = "to write again"
"""How a revise brief tells the Specialist of outputs to write again first (`OUTPUTS is/are to write
again:`), read the same way as `NOT_WRITTEN`."""

BLOCK_ASKED = ("You blocked on ", "Your SPEC_CONFLICT ")
"""How PSE opens its question about a role's `<blocked>` (`engine._nudges`: a block the records refute, a
SPEC_CONFLICT code does not confirm), and how the next turn's shape knows one (`models._turn_shape`):
the turn that answers it may not block again at once. Under a grammar the 1.5B model's Evaluator,
told its SPEC_CONFLICT quoted no sentence of the task, sent the same conflict again, and it stood."""

LAST_TURN = "This is your last turn in this phase"
"""How PSE opens the notice that ends a role's request when its phase has room for one message of its
own only: a tool call now would be answered after the phase's turn cap, and no final would follow
(`team.WithholdingContext`). The next turn's shape offers no tool (`models._turn_shape`): the role ends
with its final on what it has. Held-out roman and csv-mean (heldout-19): a right module, and the run
ended TIMEOUT at the cap of 20 turns with the Evaluator's tool call in flight and no verdict."""

CycleKind = Literal["initial", "revise", "replan"]
"""A cycle's kind: a first one, a revise after a PARTIAL, a re-plan after a FAIL (the trace's `kind`)."""
FinalKind = Literal["plan", "report", "verdict"]
"""What a role's final message is read as (`engine._result.read_final`): the reader its spec names."""
Note = Literal["to_write", "outputs"]
"""What PSE adds to a role's opening: `to_write`, the plan's outputs it is to write (and what the task
says of the first); `outputs`, what the plan's outputs hold as its phase starts (read by PSE)."""
Nudge = Literal[
    "unparsed",
    "unwritten",
    "unchanged",
    "blocked_early",
    "pass_early",
    "own_faults",
    "contradicted",
    "fail_for_work",
]
"""A premature final a role is asked about once (`engine._nudges`); a `<blocked>` whose SPEC_CONFLICT is
unfounded is asked about for every role."""


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """One LLM participant, as configuration: who it is and what its turn owes. The loop lives elsewhere.

    Attributes:
        name: the seat's name (a `Role`, or `SINGLE_AGENT`): cassettes, traces and policies use it.
        description: the one line AutoGen shows for its agent.
        prompt: its base prompt, a file of `prompts/`.
        final: what its final message is read as (the reader PSE reads it with, once).
        owes: what its final message must hold, as the repair request words it ("Your turn must end
            with …").
        finals: the blocks its grammar lets it end with (`protocol.turn_grammar`), beside tool calls.
        notes: what PSE adds to its opening (`Note`).
        nudges: the premature finals it is asked about once (`Nudge`).
        borrows: the roles whose work it does: it reads their task prompts and holds the union of their
            grants (the single team's Agent); empty for a role with its own.
    """

    name: str
    description: str
    prompt: str
    final: FinalKind
    owes: str
    finals: tuple[str, ...]
    notes: tuple[Note, ...] = ()
    nudges: tuple[Nudge, ...] = ()
    borrows: tuple[str, ...] = ()


_OWES_VERDICT = (
    'exactly one <verdict status="PASS|PARTIAL|FAIL|BLOCKED"> holding <reason_code>, one '
    '<criterion id="…" met="true|false">finding</criterion> per plan criterion, and <summary>'
)

ROLE_SPECS: Mapping[str, RoleSpec] = {
    spec.name: spec
    for spec in (
        RoleSpec(
            name=Role.PLANNER,
            description="Defines the work and its acceptance criteria. Never executes, never judges.",
            prompt="planner.md",
            final="plan",
            owes='exactly one <plan> with a <goal>, numbered <criterion id="AC1">…</criterion> entries and '
            '<output path="…"/> entries (or <blocked reason_code="…">why</blocked> if you cannot plan)',
            finals=("plan", "blocked"),
        ),
        RoleSpec(
            name=Role.SPECIALIST,
            description="Executes the plan inside its bounds and reports artifacts and evidence.",
            prompt="specialist.md",
            final="report",
            owes="every output of the plan written with write_file, then exactly one <report> (or "
            '<blocked reason_code="…">why</blocked> if the plan cannot be carried out)',
            finals=("report", "blocked", "conflict"),
            notes=("to_write",),
            nudges=("unparsed", "unwritten", "unchanged", "blocked_early"),
        ),
        RoleSpec(
            name=Role.EVALUATOR,
            description="Judges each criterion against evidence it gathers itself. Never fixes.",
            prompt="evaluator.md",
            final="verdict",
            owes=_OWES_VERDICT,
            finals=("verdict", "conflict"),
            notes=("outputs",),
            nudges=("pass_early", "own_faults", "contradicted", "fail_for_work"),
        ),
        # The single team's one agent: no Planner (the task is its plan), no Evaluator (it reviews itself).
        RoleSpec(
            name=SINGLE_AGENT,
            description="Does the whole task alone, then reviews its own work (the evaluation baseline).",
            prompt="single.md",
            final="verdict",
            owes='exactly one <verdict status="PASS|PARTIAL|FAIL|BLOCKED"> on your own work, holding '
            '<reason_code>, one <criterion id="…" met="true|false">finding</criterion> per requirement you '
            "checked, and <summary>",
            finals=("verdict", "conflict"),
            borrows=(Role.SPECIALIST, Role.EVALUATOR),
        ),
    )
}
"""Every LLM participant's spec, by name: the three roles and the single team's Agent."""


def role_spec(name: str) -> RoleSpec:
    """The spec of the participant `name`.

    Raises:
        ValueError: `name` is no participant.
    """
    spec = ROLE_SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown role {name!r}; roles are {', '.join(ALL_ROLES)}")
    return spec


@dataclass(frozen=True, slots=True)
class PhaseSpec:
    """One phase of a crew's cycle: the role that works in it, and the states it moves the run through.

    Attributes:
        role: who works (a `ROLE_SPECS` name).
        enters: the states the phase enters before the role speaks, each with the transition's reason
            (a state the run is in already is not entered again).
        enters_after: the state the role's final, once read, moves the run to (a self-review's).
    """

    role: str
    enters: tuple[tuple[str, str], ...] = ()
    enters_after: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class CrewSpec:
    """Who works in a run, in which order, who judges and how: data, selected by `PSE_TEAM`
    (`Settings.crew`). The engine reads nothing else of a crew's shape.

    What each role's opening holds follows from the cycle's kind and the roles' specs (`RoleSpec.notes`):
    a first cycle gives every phase the task message; a revise carries the fixed plan as its author's
    final and gives the step_buffer to the first phase as a note; a re-plan gives it to the first phase
    in its task message; the roles after the first read the bare task (`engine._briefs`).

    Attributes:
        name: the `PSE_TEAM` value that selects it.
        phases: the phases of a first cycle, in order; the last one's role gives the verdict (the judge).
        revise_from: the role a PARTIAL's cycle starts from (None: nobody revises; a PARTIAL re-plans, or
            escalates when nobody re-plans either).
        replan_from: the role a FAIL's cycle (and an answered question's) starts from (None: nobody
            re-plans; a FAIL escalates).
        gated: the hard gates may turn its PASS into PARTIAL (PSE_HARD_GATES permitting): false for a
            crew whose judge reviews its own work (no independent evidence for the gates to check).
    """

    name: str
    phases: tuple[PhaseSpec, ...]
    revise_from: str | None = None
    replan_from: str | None = None
    gated: bool = True

    @property
    def speakers(self) -> tuple[str, ...]:
        """The participants, in speaking order; a run's first cycle runs them all."""
        return tuple(phase.role for phase in self.phases)

    @property
    def reviewer(self) -> str:
        """Who gives the crew's verdicts (and whose check runs the gates count): its last speaker."""
        return self.speakers[-1]

    @property
    def self_review(self) -> bool:
        """The judge reviews its own work: its verdict is final (nobody revises or re-plans)."""
        return self.revise_from is None and self.replan_from is None

    @property
    def plans(self) -> bool:
        """Whether a plan's steps can run (`execution = "steps"`): a Planner plans, a worker does them."""
        return Role.PLANNER in self.speakers and self.worker is not None

    @property
    def worker(self) -> str | None:
        """Who does the work a plan's step asks for: the speaker whose final is a report (None: nobody
        writes, so a plan's steps cannot run)."""
        return next((r for r in self.speakers if ROLE_SPECS[r].final == "report"), None)

    @property
    def independent_review(self) -> bool:
        """Whether an Evaluator speaks: only then can it have tests of its own (`independent_tests`)."""
        return Role.EVALUATOR in self.speakers

    def phases_for(self, kind: CycleKind) -> tuple[PhaseSpec, ...]:
        """The phases of a cycle of `kind`, in order: a revise starts from `revise_from`, a re-plan from
        `replan_from`, a first cycle with every phase."""
        first = {"revise": self.revise_from, "replan": self.replan_from}.get(kind)
        return self.phases[self.speakers.index(first) :] if first is not None else self.phases


PSE_CREW = CrewSpec(
    "pse",
    (
        PhaseSpec(Role.PLANNER),
        PhaseSpec(Role.SPECIALIST, enters=(("RUNNING", "Specialist started"),)),
        PhaseSpec(Role.EVALUATOR, enters=(("REVIEWING", "Specialist reported; Evaluator started"),)),
    ),
    revise_from=Role.SPECIALIST,
    replan_from=Role.PLANNER,
)
"""The Planner, the Specialist and the Evaluator, their review held to the hard gates."""
SINGLE_CREW = CrewSpec(
    "single",
    (
        PhaseSpec(
            SINGLE_AGENT,
            enters=(
                ("PLANNED", "single team: no Planner, the task is the plan"),
                ("RUNNING", "Agent started"),
            ),
            enters_after=("REVIEWING", "the Agent reviewed its own work"),
        ),
    ),
    gated=False,
)
"""The evaluation baseline: one Agent that does the work and reviews it itself."""
REVIEW_CREW = CrewSpec(
    "review",
    (
        PhaseSpec(Role.PLANNER),
        PhaseSpec(
            Role.EVALUATOR,
            enters=(
                ("RUNNING", "review team: nobody writes, the workspace as it is is the work"),
                ("REVIEWING", "Evaluator started"),
            ),
        ),
    ),
)
"""A review of the workspace as it is: the Planner sets the criteria, the Evaluator judges them with the
task's checks under the hard gates; nobody writes, so a review that does not pass goes to a person."""
CREWS: Mapping[str, CrewSpec] = {crew.name: crew for crew in (PSE_CREW, SINGLE_CREW, REVIEW_CREW)}
"""Every crew, by its `PSE_TEAM` value."""
