"""What the task says of an output, quoted where a role is about to write it.

A small model that wrote one file copies it into the next; told the whole task at once, the 1.5B model
put the test file's `import random` into `quicksort.py`. What the most specific text says of the file
to write, quoted last, is what it follows: the Specialist's opening note of what it is to write
(`to_write`, a `Note` of `engine._briefs`) and the nudge of a report that comes before an output is
written (`engine._nudges.unwritten`) quote it from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pse.events import PlanRecord
from pse.tasks import seeded_files

__all__ = ["quoted_for", "said_about", "to_write"]

_BLOCK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*#]|\d+\.)\s)")
"""Where a paragraph, list item or heading of a prompt ends (wrapped lines inside one are joined)."""
_HEADING = re.compile(r"^[ \t]*#+[ \t].*$", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_QUOTE_CHARS = 600
"""At most this much of what the task says of the unwritten outputs is quoted back."""


def _seeded(packet: str) -> set[str] | None:
    """The files the task message lists as already in the workspace (None: the list was cut short)."""
    listed, whole = seeded_files(packet)
    return set(listed) if whole else None


def to_write(plan: PlanRecord | None, packet: str, kind: str, told: Sequence[str] = ()) -> str | None:
    """The Specialist's note of what it is to write, from the plan, the task message and what the role was
    told (`told`, as for `unwritten`) alone, so a resumed cycle opens as the interrupted one did: a small
    model read the outputs first, found none, and blocked on missing data. On a first cycle it also quotes
    what the task says of the first new output: told the whole task at once, the 1.5B model put the test
    file's `import random` into `quicksort.py`; with the sentences of that file quoted last, it did not."""
    if plan is None or not plan.outputs:
        return None
    seeded = _seeded(packet)
    if kind == "initial" and seeded is not None:
        new = [path for path in plan.outputs if path not in seeded]
        if new:
            note = (
                f"Not in the workspace yet, for you to write with write_file: {', '.join(new)}. "
                "They are yours to create, not missing data."
            )
            quoted = quoted_for(new[0], told, plan)
            return f"{note} Write {new[0]} first. What the task says of it: {quoted}" if quoted else note
    return (
        f"The plan's outputs, for you to write with write_file: {', '.join(plan.outputs)}. "
        "An output you have not written yet is not missing data."
    )


def said_about(
    path: str, texts: Sequence[str], plan: PlanRecord | None = None, others: Sequence[str] = ()
) -> list[str]:
    """The sentences of `texts`, then of the plan's steps and goal, that name `path` (as a whole name: `x.py`
    is not named by `test_x.py`), each with the sentences after it in its paragraph until one names another
    output (`others`, and the plan's), in that order, once each (put the most specific text first). A small
    model that wrote one file copies it into the next; what the task says of the next file, quoted where
    the model is about to write, is what it follows. The sentences that go on about it ("It raises
    KeyError when ...") are its requirements too: quoted without them, the 1.5B model wrote csv-mean's
    module to the first sentence alone."""
    name = _named(path)
    outputs = [*others, *(plan.outputs if plan is not None else ())]
    other = [_named(o) for o in dict.fromkeys(outputs) if o != path]
    steps = [step.text for step in plan.steps] if plan is not None else []
    sources = [*texts, *steps, *([plan.goal] if plan is not None else [])]
    found: dict[str, None] = {}
    for text in sources:
        for block in _BLOCK.split(_HEADING.sub("", text)):
            about = False
            for sentence in _SENTENCE_END.split(" ".join(block.split())):
                sentence = sentence.lstrip("-*# ")
                if sentence and name.search(sentence):
                    about = True
                elif any(o.search(sentence) for o in other):
                    about = False
                if sentence and about:
                    found.setdefault(sentence)
    return list(found)


def _named(path: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w./-])" + re.escape(path) + r"(?![\w/-])")


def quoted_for(paths: str | Sequence[str], told: Sequence[str], plan: PlanRecord | None) -> str:
    """What the task says of `paths` (`_first_said` of each), within `_QUOTE_CHARS`; empty if nothing."""
    quoted, room = [], _QUOTE_CHARS
    for path in [paths] if isinstance(paths, str) else paths:
        for sentence in _first_said(path, told, plan):
            if len(sentence) > room:
                continue
            quoted.append(sentence)
            room -= len(sentence)
    return " ".join(quoted)


def _first_said(path: str, told: Sequence[str], plan: PlanRecord | None) -> list[str]:
    """What the most specific text that names `path` says of it: the task's own prompt if it does, else the
    task message, else the plan. Only the first such text: a small model follows the sentence it is given
    last, and the task's instruction for a file is worth more than the goal naming it again."""
    for text in told:
        others = plan.outputs if plan is not None else ()
        found = [
            sentence for sentence in said_about(path, [text], others=others) if sentence.strip("`.") != path
        ]
        if found:
            return found
    return [sentence for sentence in said_about(path, [], plan) if sentence.strip("`.") != path]
