"""GBNF building blocks: quoted literals, character classes, and "any text in which these words never occur".

GBNF is llama.cpp's grammar format; XGrammar (behind vLLM and SGLang) reads the same notation. It has no
lookahead, so "raw text up to the first `</parameter>`" cannot be written as a lazy `.*?`. It can be
written as the automaton that reads text while remembering how much of a forbidden word it has just seen
(Aho-Corasick's states: the longest suffix of the text read so far that begins a forbidden word). Each
state is one right-linear rule, so the grammar is deterministic (a sampler keeps one parse, not one per
ambiguity) and a long file body costs no parser stack: every rule ends in its tail reference.

**Repetition limits.** llama.cpp expands `x{m,n}` into n rules and refuses a grammar where the rules a
repeated item makes times its bound exceed 2000 (`MAX_REPETITION_THRESHOLD`; a bound above 2000 quietly
becomes unbounded), and llama-cpp-python's server then dies. A group `( a | b "c"? )` makes one rule per
group and optional inside it, so `( … ){0,1249}` is refused. Every bound here stays at most
`REPEAT_LIMIT` and is applied to a single rule or character class: `repeat` nests a longer run as blocks
of exact repetitions (`x{400}` copies, which makes no rules), and `chunked` bounds a text of multi-character
pieces by its characters.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["REPEAT_LIMIT", "avoiding", "char_class", "chunked", "literal", "repeat"]

REPEAT_LIMIT = 400
"""The largest bound PSE writes in one `{m,n}` (llama.cpp refuses from 2000 rules; XGrammar unrolls too)."""
CHUNK = 64
"""Characters of one block of a `chunked` text."""

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CLASS_ESCAPES = {"\\": "\\\\", "]": "\\]", "[": "\\[", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _hex(char: str) -> str:
    return f"\\x{ord(char):02X}"


def literal(text: str) -> str:
    """`text` as a GBNF string literal: `"..."` with backslash, quote and control characters escaped."""
    body = "".join(_ESCAPES.get(c, _hex(c) if ord(c) < 0x20 else c) for c in text)
    return f'"{body}"'


def char_class(chars: Iterable[str], *, negate: bool = False) -> str:
    """A GBNF character class of exactly `chars` (or every other character, with `negate`).

    `-` and `^` are written as hex escapes, so no member is ever read as a range or a negation.
    """
    members = "".join(
        _CLASS_ESCAPES.get(c, _hex(c) if ord(c) < 0x20 or c in "-^" else c) for c in sorted(set(chars))
    )
    return f"[{'^' if negate else ''}{members}]"


def avoiding(name: str, words: Sequence[str], *, exclude: str = "") -> list[str]:
    """The rules of `name`: every string, of any characters but `exclude`, in which none of `words` occurs.

    The empty string included. Rule `name` is the start; the others are `name-1`, `name-2`, ... (one per
    proper prefix of a word). Each rule is `( [^special] name | "c" name-k | ... )?`, so the text may end
    in any state: what follows it in the grammar (a closing tag) starts a forbidden word and ends it.

    Args:
        name: the rule name (letters, digits and `-`, as GBNF wants).
        words: the forbidden words, none empty.
        exclude: characters that may not occur at all.
    """
    if not words or any(not w for w in words):
        raise ValueError("avoiding() needs at least one word and no empty word")
    states = sorted({w[:i] for w in words for i in range(len(w))}, key=lambda p: (len(p), p))
    index = {prefix: i for i, prefix in enumerate(states)}
    alphabet = sorted({c for w in words for c in w} - set(exclude))

    def rule(state: str) -> str:
        return name if not state else f"{name}-{index[state]}"

    def step(state: str, char: str) -> str | None:
        """The state after reading `char`; None when that completes a forbidden word."""
        seen = state + char
        if any(seen.endswith(w) for w in words):
            return None
        return next(seen[k:] for k in range(len(seen) + 1) if seen[k:] in index)

    rules = []
    for state in states:
        targets = {c: step(state, c) for c in alphabet}
        special = [c for c, target in targets.items() if target != ""] + list(exclude)
        alternatives = [f"{char_class(special, negate=True)} {name}"]
        alternatives += [f"{literal(c)} {rule(t)}" for c, t in targets.items() if t]
        rules.append(f"{rule(state)} ::= ( {' | '.join(alternatives)} )?")
    return rules


def repeat(item: str, most: int, name: str) -> tuple[str, list[str]]:
    """An expression for 0..`most` repetitions of `item` (a rule name or a character class), and the rules
    it needs. A bound over `REPEAT_LIMIT` becomes blocks of `REPEAT_LIMIT` exact copies (rule `name-x`,
    which makes no rules in llama.cpp): fewer than all of them and up to a block less one more items, or
    all of them and the rest. Exactly 0..`most`; the parse is ambiguous only between those two ways.

    Raises:
        ValueError: `most` over `REPEAT_LIMIT` squared.
    """
    if most <= REPEAT_LIMIT:
        return (f"{item}{{0,{most}}}" if most > 0 else '""'), []
    blocks, rest = divmod(most, REPEAT_LIMIT)
    if blocks > REPEAT_LIMIT:
        raise ValueError(f"{most} repetitions: at most {REPEAT_LIMIT**2} are written")
    block = f"{name}-x"
    fewer = f"{block}{{0,{blocks - 1}}} " if blocks > 1 else ""
    full = f"{block}{{{blocks}}}" + (f" {item}{{0,{rest}}}" if rest else "")
    expression = f"( {fewer}{item}{{0,{REPEAT_LIMIT - 1}}} | {full} )"
    return expression, [f"{block} ::= {item}{{{REPEAT_LIMIT}}}"]


def chunked(name: str, pieces: Sequence[tuple[str, int]], most: int) -> list[str]:
    """The rules of `name`: a sequence of `pieces` at most `most` characters long, counted exactly.

    A piece is (expression, its length in characters); the first must be one character, and each must be
    told apart from the others by its first characters (the parse stays deterministic). Blocks of `CHUNK`
    characters are read greedily, a block's last piece may run up to two characters over it (`name-b`),
    and the rest is one remainder shorter than a block (`name-r-K`): a text `most` long or shorter is
    accepted in one way, and the longest accepted is at most `most`.
    """
    longest_piece = max(length for _, length in pieces)
    block_max = CHUNK + longest_piece - 1
    rest = min(most, CHUNK - 1)
    blocks = max(0, (most - rest) // block_max)

    def steps(prefix: str, k: int, *, overflow: bool) -> list[str]:
        alternatives = []
        for expression, length in pieces:
            left = k - length
            if left < 0 and not overflow:
                continue
            alternatives.append(f"{expression} {prefix}-{left}" if left > 0 else expression)
        return alternatives

    rules: list[str] = []
    head = ""
    if blocks:
        head, rules = repeat(f"{name}-b", blocks, f"{name}-b")
        rules.append(f"{name}-b ::= {name}-f-{CHUNK}")
        rules += [
            f"{name}-f-{k} ::= {' | '.join(steps(f'{name}-f', k, overflow=True))}"
            for k in range(1, CHUNK + 1)
        ]
    rules += [
        f"{name}-r-{k} ::= ( {' | '.join(steps(f'{name}-r', k, overflow=False))} )?"
        for k in range(1, rest + 1)
    ]
    body = " ".join(part for part in (head, f"{name}-r-{rest}" if rest else "") if part) or '""'
    return [f"{name} ::= {body}", *rules]
