"""A small GBNF recognizer, for tests: does this grammar accept this whole text? No model needed.

It reads the subset of GBNF that `pse.protocol.turn_grammar` writes (one rule per line; string
literals; character classes, negated or not, with ranges and escapes; rule references; groups; `?`, `*`,
`+`, `{m}`, `{m,}`, `{m,n}`) and rejects anything else loudly, so a grammar that uses more than this
subset fails its tests instead of passing untested. `sample` walks the grammar at random, for tests
that check every text the grammar allows against PSE's own parsers.

It recognizes the way llama.cpp's sampler does: a set of parse stacks, each the list of elements still to
match, advanced one character at a time. Groups and repetitions become generated rules exactly as
llama.cpp expands them (`x*` is `r ::= x r | ""`, `x{0,3}` three nested optionals), and a reference in
tail position is replaced, not pushed, so right recursion keeps stacks flat. Left recursion is not
supported (llama.cpp rejects it too).

It also refuses what llama.cpp's parser refuses or silently changes: a repetition whose item's rules
(one for a rule reference, class or literal; a group's own rule and every rule made inside it) times its
bound exceed `LLAMA_REPETITION_THRESHOLD`, or a bound above it (which llama.cpp turns into `*`). llama-cpp-python's
server dies on such a grammar.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LLAMA_REPETITION_THRESHOLD", "Grammar", "GrammarSyntaxError"]

LLAMA_REPETITION_THRESHOLD = 2000
"""llama.cpp's `MAX_REPETITION_THRESHOLD` (src/llama-grammar.cpp)."""


class GrammarSyntaxError(ValueError):
    """The grammar text is not in the supported subset (or not GBNF at all)."""


@dataclass(frozen=True)
class _Chars:
    ranges: tuple[tuple[int, int], ...]
    negated: bool

    def matches(self, char: str) -> bool:
        code = ord(char)
        return any(lo <= code <= hi for lo, hi in self.ranges) != self.negated


_Element = _Chars | int  # a character test, or a reference to a rule by index
_Frame = tuple[int, int, int]  # (rule, alternative, next element)
_Stack = tuple[_Frame, ...]
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_RULE = re.compile(r"([A-Za-z0-9-]+)\s*::=\s*(.*)")
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


class Grammar:
    """A parsed GBNF grammar. `accepts(text)` says whether the root rule matches all of `text`."""

    def __init__(self, source: str, root: str = "root") -> None:
        self._names: dict[str, int] = {}
        self._rules: list[list[list[_Element]]] = []
        defined: set[str] = set()
        for number, line in enumerate(source.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            match = _RULE.fullmatch(line.strip())
            if match is None:
                raise GrammarSyntaxError(f"line {number}: not a rule: {line!r}")
            name, body = match.groups()
            if name in defined:
                raise GrammarSyntaxError(f"line {number}: rule {name!r} is defined twice")
            defined.add(name)
            alternatives, pos = self._alternatives(body, 0)
            if pos != len(body):
                raise GrammarSyntaxError(f"line {number}: cannot read {body[pos:]!r}")
            self._rules[self._index(name)].extend(alternatives)
        undefined = sorted(set(self._names) - defined - {n for n in self._names if n.startswith("<")})
        if undefined:
            raise GrammarSyntaxError(f"rules used but never defined: {', '.join(undefined)}")
        if root not in defined:
            raise GrammarSyntaxError(f"no root rule {root!r}")
        self._root = self._names[root]

    # ---- reading the grammar -----------------------------------------------------------------
    def _index(self, name: str) -> int:
        if name not in self._names:
            self._names[name] = len(self._rules)
            self._rules.append([])
        return self._names[name]

    def _new_rule(self, alternatives: list[list[_Element]]) -> int:
        index = self._index(f"<generated {len(self._rules)}>")
        self._rules[index] = alternatives
        return index

    def _alternatives(self, text: str, pos: int) -> tuple[list[list[_Element]], int]:
        alternatives = []
        while True:
            sequence, pos = self._sequence(text, pos)
            alternatives.append(sequence)
            pos = _skip_space(text, pos)
            if pos < len(text) and text[pos] == "|":
                pos += 1
                continue
            return alternatives, pos

    def _sequence(self, text: str, pos: int) -> tuple[list[_Element], int]:
        sequence: list[_Element] = []
        while True:
            pos = _skip_space(text, pos)
            if pos >= len(text) or text[pos] in "|)":
                return sequence, pos
            before = len(self._rules)
            atom, pos = self._atom(text, pos)
            atom, pos = self._repeated(atom, text, pos, max(1, len(self._rules) - before))
            sequence.extend(atom)

    def _atom(self, text: str, pos: int) -> tuple[list[_Element], int]:
        char = text[pos]
        if char == '"':
            chars, pos = _literal(text, pos + 1)
            return [_Chars(((ord(c), ord(c)),), False) for c in chars], pos
        if char == "[":
            chars_class, pos = _char_class(text, pos + 1)
            return [chars_class], pos
        if char == "(":
            alternatives, pos = self._alternatives(text, pos + 1)
            if pos >= len(text) or text[pos] != ")":
                raise GrammarSyntaxError(f"unclosed group in {text!r}")
            return [self._new_rule(alternatives)], pos + 1
        name = re.compile(r"[A-Za-z0-9-]+").match(text, pos)
        if name is None:
            raise GrammarSyntaxError(f"unexpected {text[pos : pos + 20]!r}")
        return [self._index(name.group(0))], name.end()

    def _repeated(self, atom: list[_Element], text: str, pos: int, made: int) -> tuple[list[_Element], int]:
        if pos >= len(text):
            return atom, pos
        if text[pos] in "*+?":
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[text[pos]]
            pos += 1
        elif (bounds := _REPEAT.match(text, pos)) is not None:
            low = int(bounds.group(1))
            high = low if bounds.group(2) is None else (int(bounds.group(3)) if bounds.group(3) else None)
            pos = bounds.end()
        else:
            return atom, pos
        total = high if high else (low or 1)
        if max(low, high or 0, made * total) > LLAMA_REPETITION_THRESHOLD:
            raise GrammarSyntaxError(
                f"llama.cpp refuses {text[:pos]!r}...: an item of {made} rule(s) repeated up to "
                f"{high or low} times makes more than {LLAMA_REPETITION_THRESHOLD}"
            )
        result: list[_Element] = atom * low
        if high is None:
            star = self._new_rule([])
            self._rules[star] += [[*atom, star], []]
            return [*result, star], pos
        optional: list[_Element] = []
        for _ in range(high - low):  # (x (x (x)?)?)?, innermost first
            optional = [self._new_rule([[*atom, *optional], []])]
        return result + optional, pos

    # ---- recognizing -------------------------------------------------------------------------
    def _expand(self, stack: _Stack, out: set[_Stack], seen: set[_Stack]) -> None:
        """Add to `out` every stack reachable from `stack` without reading, whose top is a character test
        (or which is empty: the text may end here)."""
        if stack in seen:
            return
        seen.add(stack)
        if not stack:
            out.add(stack)
            return
        rule, alt, index = stack[-1]
        sequence = self._rules[rule][alt]
        if index == len(sequence):
            self._expand(stack[:-1], out, seen)
            return
        element = sequence[index]
        if isinstance(element, _Chars):
            out.add(stack)
            return
        rest = stack[:-1] + (((rule, alt, index + 1),) if index + 1 < len(sequence) else ())
        for sub in range(len(self._rules[element])):
            self._expand((*rest, (element, sub, 0)), out, seen)

    def accepts(self, text: str) -> bool:
        """Whether the root rule matches the whole of `text`."""
        stacks: set[_Stack] = set()
        for alt in range(len(self._rules[self._root])):
            self._expand(((self._root, alt, 0),), stacks, set())
        for char in text:
            advanced: set[_Stack] = set()
            seen: set[_Stack] = set()
            for stack in stacks:
                if not stack:
                    continue
                rule, alt, index = stack[-1]
                test = self._rules[rule][alt][index]
                assert isinstance(test, _Chars)
                if test.matches(char):
                    self._expand((*stack[:-1], (rule, alt, index + 1)), advanced, seen)
            if not advanced:
                return False
            stacks = advanced
        return () in stacks

    def sample(self, rng: random.Random, pool: str, *, budget: int = 300) -> str:
        """A random text the grammar accepts: alternatives picked at random, characters from `pool` (the
        ones a class allows); past `budget` characters, always the shortest way to the end."""
        shortest = self._shortest()
        out: list[str] = []
        todo: list[_Element] = [self._root]
        while todo:
            element = todo.pop()
            if isinstance(element, _Chars):
                allowed = [c for c in pool if element.matches(c)]
                if not allowed and not element.negated:  # a literal's character, or a range's first
                    allowed = [chr(element.ranges[0][0])]
                if not allowed:
                    raise ValueError(f"no character of the pool fits {element}")
                out.append(rng.choice(allowed))
                continue
            alternatives = self._rules[element]
            if len(out) < budget:
                sequence = rng.choice(alternatives)
            else:
                sequence = min(alternatives, key=lambda seq: sum(map(shortest, seq)))
            todo.extend(reversed(sequence))
        return "".join(out)

    def longest(self) -> float:
        """The length of the longest text the grammar accepts (`math.inf` when there is none: a rule
        that can repeat itself). Depth-first over the rules, without recursion: `x{0,1000}` nests
        a thousand rules deep."""
        lengths: dict[int, float] = {}
        on_path: set[int] = set()
        todo: list[tuple[int, bool]] = [(self._root, False)]
        while todo:
            index, children_done = todo.pop()
            if children_done:
                on_path.discard(index)
                lengths[index] = max(
                    (
                        sum(1 if isinstance(e, _Chars) else lengths[e] for e in seq)
                        for seq in self._rules[index]
                    ),
                    default=0,
                )
                continue
            if index in lengths:
                continue
            if index in on_path:  # a rule that reaches itself: every rule here reads before it recurses
                return math.inf
            on_path.add(index)
            todo.append((index, True))
            todo += [
                (e, False)
                for seq in self._rules[index]
                for e in seq
                if isinstance(e, int) and e not in lengths
            ]
        return lengths[self._root]

    def _shortest(self) -> _Measure:
        """The length of the shortest text of each element (a fixpoint over the rules)."""
        lengths = [math.inf] * len(self._rules)

        def measure(element: _Element) -> float:
            return 1 if isinstance(element, _Chars) else lengths[element]

        changed = True
        while changed:
            changed = False
            for index, alternatives in enumerate(self._rules):
                best = min((sum(map(measure, seq)) for seq in alternatives), default=math.inf)
                if best < lengths[index]:
                    lengths[index], changed = best, True
        return measure


_Measure = Callable[[_Element], float]


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _char(text: str, pos: int) -> tuple[str, int]:
    """One character of a literal or class at `pos`, escapes decoded."""
    if text[pos] != "\\":
        return text[pos], pos + 1
    code = text[pos + 1]
    if code == "x":
        return chr(int(text[pos + 2 : pos + 4], 16)), pos + 4
    if code == "u":
        return chr(int(text[pos + 2 : pos + 6], 16)), pos + 6
    if code not in _ESCAPES:
        raise GrammarSyntaxError(f"unknown escape \\{code}")
    return _ESCAPES[code], pos + 2


def _literal(text: str, pos: int) -> tuple[str, int]:
    chars = []
    while pos < len(text) and text[pos] != '"':
        char, pos = _char(text, pos)
        chars.append(char)
    if pos >= len(text):
        raise GrammarSyntaxError(f"unclosed string literal in {text!r}")
    return "".join(chars), pos + 1


def _char_class(text: str, pos: int) -> tuple[_Chars, int]:
    negated = text[pos] == "^"
    pos += negated
    ranges = []
    while pos < len(text) and text[pos] != "]":
        low, pos = _char(text, pos)
        high = low
        if text[pos] == "-" and text[pos + 1] != "]":
            high, pos = _char(text, pos + 1)
        ranges.append((ord(low), ord(high)))
    if pos >= len(text):
        raise GrammarSyntaxError(f"unclosed character class in {text!r}")
    return _Chars(tuple(ranges), negated), pos + 1
