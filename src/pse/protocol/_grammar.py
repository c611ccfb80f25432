"""The grammar of what a role may send now: GBNF for constrained decoding, built from PSE's own protocol.

A `TurnShape` says who speaks and what they may use: the role, the tools its policy grants (with their
parameters) and, for an Evaluator, the criterion ids of the plan it judges (`plan_criteria` reads them
from the messages it is sent, with PSE's own `parse_plan`). `turn_grammar` turns it into GBNF:

* **Planner**: a `<plan>` (goal, steps S1.., criteria AC1.., outputs), a `<blocked>`, or tool calls.
* **Specialist**: its `<report>` (Artifacts / Evidence / Assumptions / Unresolved lines), a `<blocked>`,
  or tool calls.
* **Evaluator**: tool calls, or one `<verdict>` with a status, an UPPER_SNAKE reason code, exactly the
  plan's criteria in plan order (each once) and a summary; a criterion it marks met names a test of its
  own its last run passed, where that run listed any (`TurnShape.backing`); an Evaluator told of
  findings (a repository run's, `asks_findings`) may name up to `GrammarSizes.findings` of them before
  the summary, `<finding id="F1" severity="high|medium|low" [criterion="AC2"] [path="src/x.py"]
  [line="41"]>`, numbered in order, each attribute optional but id and severity, a criterion one of the
  plan's.
* The Specialist, the Evaluator and the single agent may also end with a `conflict`:
  `<blocked reason_code="SPEC_CONFLICT" test="TEST">SENTENCE</blocked>`, a given test that contradicts
  the specification, named, with the sentence it contradicts.

Each message is some prose (at most `PROSE_CHARS` characters, no `<`), exactly one block, and at most two
whitespace characters: a model under this grammar cannot ramble past its block or write none. Every
text, list and value is bounded by `TurnShape.sizes()` (`_budget.fit_sizes`): with a `max_chars`, so
that the longest message the grammar accepts fits the call's token limit.

Tool calls name only granted tools, each with exactly its parameters (required ones present, any order
for up to four). A parameter body is raw text that never contains `</parameter` or `<![CDATA[` (the
`_gbnf.avoiding` automaton), or CDATA sections that never contain `]]>`: exactly what
`render_tool_calls` writes, so every value can be sent. Texts inside plans, reports and verdicts hold no
`<`, so no tag can hide in them. Every message the grammar accepts is parsed by PSE's parsers as the
block it shows (tests/test_grammar.py holds that against the reference cassettes).
"""

from __future__ import annotations

from dataclasses import dataclass

from pse.events import SEVERITIES
from pse.protocol._budget import (
    CONFLICT_TEST_CHARS,
    FINDING_LINE_DIGITS,
    MAX_PLAN_ITEMS,
    PROSE_CHARS,
    GrammarSizes,
    fit_sizes,
)
from pse.protocol._call_grammar import call_rules, open_tag
from pse.protocol._files import FILE_TOOL, file_rules
from pse.protocol._gbnf import char_class, literal, repeat
from pse.protocol._tags import BLOCKED_REASONS, SPEC_CONFLICT, VERDICT_STATUSES
from pse.protocol._types import ToolSignature
from pse.roles import ROLE_SPECS, Role

__all__ = ["MAX_PLAN_ITEMS", "PROSE_CHARS", "TurnShape", "turn_grammar"]

_PATH_CHAR = char_class('."<> \t\r\n', negate=True)


def _common(sizes: GrammarSizes) -> list[str]:
    """The rules every role's grammar shares. `text` is a body without `<` that starts with a visible
    character. `prose`, the words before a block, holds no backtick either: a fence there opens a file
    block (the fenced write format), and the 1.5B model, offered only its report, began `words.py` and a
    fence in its prose: the file block was never closed and the report was lost with it."""
    prose, prose_rules = repeat("[^<`]", sizes.prose, "prose")
    text, text_rules = repeat("[^<]", sizes.text - 1, "text")
    return [
        f"prose ::= {prose}",
        "ws ::= [ \\t\\r\\n]{0,16}",
        "end ::= [ \\t\\r\\n]{0,2}",
        f"text ::= [^< \\t\\r\\n] {text}",
        *prose_rules,
        *text_rules,
    ]


_PASSED = " passed"
_CLOSE_TAG = literal('">')
_MET = literal('" met="')
_SELF_CLOSE = literal('"/>')
_QUOTE = literal('"')


@dataclass(frozen=True)
class TurnShape:
    """What a role may send in its next message: the input of `turn_grammar` and `turn_schema`.

    Attributes:
        role: the speaking role (a `Role`).
        tools: the tools its policy grants, with their parameters; none means it may not call any.
        criteria: for an Evaluator, the ids of the plan's criteria, in plan order; None when no plan is
            known (then any ids are allowed).
        max_invokes: most invokes one message may hold (`PSE_MAX_INVOKES_PER_MESSAGE`).
        max_chars: most characters of the whole message (from the call's token limit), or None; see
            `fit_sizes`.
        evidence: the role has tool results in its context. Until it has (and if it may call tools),
            the Specialist and the Evaluator may only call tools — a report or a verdict rests on
            evidence gathered in this context — and the Planner may plan or call tools, not block:
            "missing data" is claimed after a look, not instead of one.
    """

    role: str
    tools: tuple[ToolSignature, ...] = ()
    criteria: tuple[str, ...] | None = None
    max_invokes: int = 16
    max_chars: int | None = None
    evidence: bool = True
    questions: bool = False
    """The Planner may ask a person instead of planning (`<clarification>`, PSE_PLANNER_QUESTIONS)."""
    findings: bool = False
    """The Evaluator may name findings in its verdict (`<finding>`s): it was told of them
    (`asks_findings`)."""
    files: bool = False
    """The role writes files as file blocks (the `fenced` write format, `_files`), not as `write_file`
    invokes: a granted `write_file` becomes the `files` kind."""
    conflicts: bool = True
    """The role may end with a `conflict` (a SPEC_CONFLICT naming a given test): it was told of the
    task's tests (`offers_conflict`). Without any, the kind is not offered."""
    blocks: bool = True
    """The role may end with a `<blocked>` or a `conflict` (as its `RoleSpec` allows). False in the turn
    that answers PSE's question about its block: it acts, reports or judges first, and may block again
    after that (a block it then repeats stands)."""
    writes_first: bool = False
    """The role's next message writes files (with `files`): its first block is a file block (others, such
    as a `<tool_calls>` of its other tools, may follow it). An Evaluator that owes tests of its own, or a
    Specialist with nothing to read and an output to write, gets it from constrained decoding."""
    then_runs: bool = False
    """With `writes_first`: the message ends with a `<tool_calls>` block after its file blocks (an
    Evaluator writes its tests and runs them in one turn, instead of two)."""
    paths: tuple[str, ...] | None = None
    """Where a file block may write (with `files`): these paths, a path ending in `/` any file under it;
    None, any relative path. The Specialist's are its plan's outputs, the Evaluator's its area."""
    backing: tuple[str, ...] = ()
    """For an Evaluator, its own tests that passed in its last run_pytest, by name: a criterion it marks
    met names one of them (`test_ties passed`), the evidence the `criteria_backed` gate confirms."""
    checked: tuple[str, ...] = ()
    """The criteria whose plan text names a check the role runs ("pytest passes"): that check shows one,
    and the Evaluator says what it showed in its own words."""

    def call_tools(self) -> tuple[ToolSignature, ...]:
        """The tools the role calls in a `<tool_calls>` block (all but `write_file` when it writes files
        as file blocks)."""
        return tuple(t for t in self.tools if not (self.files and t.name == FILE_TOOL))

    def writes_files(self) -> bool:
        """Whether the role may send file blocks now."""
        return self.files and any(t.name == FILE_TOOL for t in self.tools)

    def sizes(self) -> GrammarSizes:
        """The bounds of every part of the message (raises ValueError when nothing fits `max_chars`)."""
        return fit_sizes(
            self.role, self.tools, self.criteria, self.max_chars, self.max_invokes, files=self.writes_files()
        )

    def kinds(self) -> tuple[str, ...]:
        """The blocks the role may send now, in order: `plan`, `report`, `verdict`, `blocked`, `conflict`,
        `calls`.

        Raises:
            ValueError: an unknown role.
        """
        spec = ROLE_SPECS.get(self.role)  # what a role may end with is its `RoleSpec`'s
        if spec is None:
            raise ValueError(f"unknown role {self.role!r}; roles are {', '.join(Role)}")
        finals = spec.finals
        if self.questions and self.role == Role.PLANNER:
            finals = ("plan", "clarification", *finals[1:])
        if (
            self.tools and not self.evidence
        ):  # a look comes first: only a plan (or a question) may precede one
            finals = tuple(k for k in finals if k in ("plan", "clarification"))
        if not self.conflicts:
            finals = tuple(k for k in finals if k != "conflict")
        if not self.blocks:
            finals = tuple(k for k in finals if k not in ("blocked", "conflict"))
        files = ("files",) if self.writes_files() else ()
        if files and self.writes_first:
            return files
        return finals + files + (("calls",) if self.call_tools() else ())


def turn_grammar(shape: TurnShape) -> str:
    """The GBNF of every message `shape.role` may send now (root rule `root`).

    Raises:
        ValueError: an unknown role, or no message fits `shape.max_chars`.
    """
    kinds, sizes = shape.kinds(), shape.sizes()
    rules: list[str] = []
    for kind in kinds:
        if kind == "plan":
            rules += _plan_rules(sizes)
        elif kind == "report":
            rules += _report_rules(sizes)
        elif kind == "verdict":
            rules += _verdict_rules(shape.criteria, sizes, shape)
        elif kind == "blocked":
            rules += _blocked_rules()
        elif kind == "conflict":
            rules += _conflict_rules()
        elif kind == "clarification":
            rules += _clarification_rules(sizes)
        elif kind == "files":
            rules += file_rules(
                sizes, then_calls=bool(shape.call_tools()), paths=shape.paths, must_call=shape.then_runs
            )
            if "calls" not in kinds and shape.call_tools():
                rules += call_rules(shape.call_tools(), sizes)[1:]  # its `invoke`, not a `calls` of its own
        else:
            rules += call_rules(shape.call_tools(), sizes)
    # File blocks come first in their message, with no prose before them: the path is the first thing
    # written (the 1.5B model, held from opening a code block in prose, wrote its prompt's text there).
    others = [kind for kind in kinds if kind != "files"]
    roots = [f"prose ( {' | '.join(others)} ) end"] if others else []
    head = [f"root ::= {' | '.join([*roots, *(['files end'] if 'files' in kinds else [])])}"]
    return "\n".join(head + _common(sizes) + rules) + "\n"


def _open(tag: str, attribute: str) -> str:
    """The literal of an opening tag up to the opening quote of an attribute the grammar fills in."""
    return literal(f'<{tag} {attribute}="')


def _numbered(rule: str, tag: str, prefix: str, items: int, *, first_required: bool) -> list[str]:
    """`rule-1` .. `rule-N`: items `<tag id="prefix1">text</tag>` numbered in order, each followed by ws."""
    rules = []
    for k in range(1, items + 1):
        item = f"{open_tag(tag, id=f'{prefix}{k}')} text {literal(f'</{tag}>')} ws"
        tail = f" {rule}-{k + 1}" if k < items else ""
        body = f"{item}{tail}"
        rules.append(f"{rule}-{k} ::= {body}" if k == 1 and first_required else f"{rule}-{k} ::= ( {body} )?")
    return rules


def _plan_rules(sizes: GrammarSizes) -> list[str]:
    first = char_class('"<>/. \t\r\n', negate=True)
    goal, goal_rules = repeat("[^<]", (sizes.goal or sizes.text) - 1, "goal-text")
    return [
        f"goal-text ::= [^< \\t\\r\\n] {goal}",
        *goal_rules,
        f"plan ::= {open_tag('plan')} ws {open_tag('goal')} goal-text {literal('</goal>')} ws "
        f"step-1 criterion-1 ( output ws ){{0,{sizes.items}}} {literal('</plan>')}",
        *_numbered("step", "step", "S", sizes.items, first_required=False),
        *_numbered("criterion", "criterion", "AC", sizes.items, first_required=True),
        # A relative path: no leading "/", no "..", no quote, tag character or whitespace. Each unit is
        # a character other than "." or a "." and such a character, so no two dots ever meet.
        f'output ::= {_open("output", "path")} "."? {first} path {_SELF_CLOSE}',
        f'path ::= ( {_PATH_CHAR} | "." {_PATH_CHAR} ){{0,{sizes.path}}}',
    ]


def _clarification_rules(sizes: GrammarSizes) -> list[str]:
    return [
        f"clarification ::= {open_tag('clarification')} ws question-1 {literal('</clarification>')}",
        *_numbered("question", "question", "Q", sizes.items, first_required=True),
    ]


def _blocked_rules() -> list[str]:
    reasons = " | ".join(literal(code) for code in BLOCKED_REASONS)
    opening = _open("blocked", "reason_code")
    return [f"blocked ::= {opening} ( {reasons} ) {_CLOSE_TAG} text {literal('</blocked>')}"]


def _conflict_rules() -> list[str]:
    opening = literal(f'<blocked reason_code="{SPEC_CONFLICT}" test="')
    first = char_class('"<> \t\r\n', negate=True)
    rest, more = repeat(char_class('"<>\r\n', negate=True), CONFLICT_TEST_CHARS - 1, "conflict-test")
    return [
        f"conflict ::= {opening} {first} {rest} {_CLOSE_TAG} text {literal('</blocked>')}",
        *more,
    ]


_REPORT_LABELS = ("Artifacts", "Evidence", "Assumptions", "Unresolved")


def _report_rules(sizes: GrammarSizes) -> list[str]:
    sections = " ".join(f"{literal(label + ':')} line" for label in _REPORT_LABELS)
    line, more = repeat("[^<\\n]", sizes.text, "line")
    return [
        f'report ::= {open_tag("report")} "\\n"? {sections} {literal("</report>")}',
        f'line ::= {line} "\\n"',
        *more,
    ]


def _criterion_open(cid: str) -> str:
    return literal(f'<criterion id="{cid}" met="')


def _verdict_rules(criteria: tuple[str, ...] | None, sizes: GrammarSizes, shape: TurnShape) -> list[str]:
    statuses = " | ".join(literal(s) for s in VERDICT_STATUSES)
    reason = f"{open_tag('reason_code')} code {literal('</reason_code>')}"
    close = f"{open_tag('summary')} text {literal('</summary>')} ws {literal('</verdict>')}"
    judged = f"met {_CLOSE_TAG} text {literal('</criterion>')} ws"
    names = [name for name in shape.backing if len(name) + len(_PASSED) <= sizes.text]
    backed = judged
    if names:  # a criterion met names the test of its own that shows it (`pse.tools._backing`)
        test = f"( {' | '.join(literal(name) for name in names)} ) {literal(_PASSED)}"
        backed = (
            f"( {literal('true')} {_CLOSE_TAG} {test} | {literal('false')} {_CLOSE_TAG} text ) "
            f"{literal('</criterion>')} ws"
        )
    if criteria:
        items = " ".join(
            f"{_criterion_open(cid)} {judged if cid in shape.checked else backed}" for cid in criteria
        )
    else:
        items = f"( any-criterion ){{1,{sizes.items}}}"
    found = shape.findings and sizes.findings > 0
    rules = [
        f"verdict ::= {_open('verdict', 'status')} ( {statuses} ) {_CLOSE_TAG} ws {reason} ws {items} "
        + ("finding-1 " if found else "")
        + close,
        'met ::= "true" | "false"',
        "code ::= [A-Z] [A-Z0-9_]{0,39}",
    ]
    if not criteria or found:
        rules.append("criterion-id ::= [A-Za-z0-9] [A-Za-z0-9_.]{0,15}")
    if not criteria:
        rules.append(f"any-criterion ::= {_open('criterion', 'id')} criterion-id {_MET} {judged}")
    if found:
        rules += _finding_rules(criteria, sizes)
    return rules


def _finding_rules(criteria: tuple[str, ...] | None, sizes: GrammarSizes) -> list[str]:
    """`finding-1` .. `finding-N`: optional findings F1.. in order, each with a severity and, optionally, a
    criterion (one of the plan's), a relative path and a line number, in the order the prompt shows."""
    severities = " | ".join(literal(s) for s in SEVERITIES)
    cid = " | ".join(literal(c) for c in criteria) if criteria else "criterion-id"
    first = char_class('"<>/. \t\r\n', negate=True)
    criterion, path, line = literal(' criterion="'), literal(' path="'), literal(' line="')
    rules = [
        f"severity ::= {severities}",
        f"finding-criterion ::= ( {criterion} ( {cid} ) {_QUOTE} )?",
        f'finding-path ::= ( {path} "."? {first} finding-path-units {_QUOTE} )?',
        f'finding-path-units ::= ( {_PATH_CHAR} | "." {_PATH_CHAR} ){{0,{sizes.path}}}',
        f"finding-line ::= ( {line} [1-9] [0-9]{{0,{FINDING_LINE_DIGITS - 1}}} {_QUOTE} )?",
    ]
    for k in range(1, sizes.findings + 1):
        opening = literal(f'<finding id="F{k}" severity="')
        item = (
            f"{opening} severity {_QUOTE} finding-criterion finding-path finding-line {literal('>')} text "
            f"{literal('</finding>')} ws"
        )
        tail = f" finding-{k + 1}" if k < sizes.findings else ""
        rules.append(f"finding-{k} ::= ( {item}{tail} )?")
    return rules
