"""Did you mean: the closest valid name to a misspelt one, one rule for every message that suggests.

The settings (`pse.run(max_partial_retry=…)`, a `PSE_*` variable), task names, and the keys, tables and
values of `task.toml`, `rules.toml` and `registry.toml` all suggest through `closest`, so a typo gets
the same hint wherever it is made.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "did_you_mean"]

_CUTOFF = 0.6
"""difflib's similarity ratio a name must reach to be suggested (its own default)."""


def closest(name: str, names: Iterable[str]) -> str | None:
    """The name of `names` closest to `name`, or None when none is close enough to be a typo of it.

    The same name in another case comes first, then the same letters in another order (`=>` for
    `>=`, a transposition difflib ranks low on short names), then difflib's closest match.
    """
    candidates = list(names)
    for same in (str.casefold, sorted):
        found = [c for c in candidates if same(c) == same(name)]
        if found:
            return found[0]
    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=_CUTOFF)
    return matches[0] if matches else None


def did_you_mean(name: str, names: Iterable[str], shown: str = "{!r}") -> str:
    """`did you mean 'X'?` for the closest of `names` (formatted by `shown`), or "" when none is close."""
    near = closest(name, names)
    return "" if near is None else f"did you mean {shown.format(near)}?"
