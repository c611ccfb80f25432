"""GBNF building blocks: quoted literals, character classes, and "any text in which these words never occur".

GBNF is llama.cpp's grammar format; XGrammar (behind vLLM and SGLang) reads the same notation. It has no
lookahead, so "raw text up to the first `</parameter>`" cannot be written as a lazy `.*?`. It can be
written as the automaton that reads text while remembering how much of a forbidden word it has just seen
(Aho-Corasick's states: the longest suffix of the text read so far that begins a forbidden word). Each
state is one right-linear rule, so the grammar is deterministic (a sampler keeps one parse, not one per
ambiguity) and a long file body costs no parser stack: every rule ends in its tail reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["avoiding", "char_class", "literal"]

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
