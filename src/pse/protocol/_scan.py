"""Forward-only scanning: what keeps every protocol scan linear in the length of a model message.

A model message is hostile input, and every scan of it runs on the event loop. Scans written the obvious
way are quadratic: a regex like `<!\\[CDATA\\[.*?\\]\\]>` reads to the end of the text once per unclosed
opener, a loop that re-runs `close.search(text, pos)` per CDATA section reads it once per section, and a
regex search for `name="value"` re-reads a long word from each of its letters. 256 KiB of `<![CDATA[`
once held the loop for 27 s. Three facts make one pass enough:

* A scan's position only moves forward, so the next match found from an earlier position is still the
  next match until the scan passes it: a `Cursor` remembers it instead of searching again.
* When an opener has no closer after it, no later opener of the same kind has one either, so a scan stops
  looking for that kind (`strip_blocks`).
* An attribute name runs to the end of its word, so all starts inside one word succeed or fail alike
  (`AttributeScanner`).

`tests/test_protocol_hostile.py` attacks every scanner with such messages; `bench/bench_protocol.py`
measures them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence

__all__ = ["AttributeScanner", "Cursor", "strip_blocks"]


class Cursor:
    """The next match of one pattern in one text, for a scan whose position only moves forward.

    Asked from a position no later than the match it found last, it answers without searching, so over a
    forward scan it reads the text about once, however often it is asked. Asked from before its last
    search it searches again: always right, linear only when used forward.
    """

    __slots__ = ("_match", "_pattern", "_searched_from", "_text")

    def __init__(self, text: str, pattern: re.Pattern[str]) -> None:
        self._text = text
        self._pattern = pattern
        self._searched_from = sys.maxsize  # no search yet
        self._match: re.Match[str] | None = None

    def find(self, pos: int) -> re.Match[str] | None:
        """The first match that starts at or after `pos`, or None when there is none."""
        last = self._match
        if self._searched_from <= pos and (last is None or last.start() >= pos):
            return last  # nothing starts between the last search and its match (or after it, if None)
        self._searched_from = pos
        self._match = self._pattern.search(self._text, pos)
        return self._match


BlockKind = tuple[re.Pattern[str], re.Pattern[str]]
"""An opener (matching a fixed number of characters) and the closer that ends its block."""


def strip_blocks(text: str, kinds: Sequence[BlockKind]) -> str:
    """`text` without its `opener … closer` blocks, in one forward pass.

    The same as `re.sub("opener.*?closer|…", "", text, flags=re.DOTALL)`: the leftmost opener that has a
    closer after it starts a block, the first closer after it ends the block, and the scan goes on behind
    it. Unlike that regex it does not read to the end of the text again for every unclosed opener.
    """
    openers = [Cursor(text, opener) for opener, _ in kinds]
    closers = [Cursor(text, closer) for _, closer in kinds]
    live = list(range(len(kinds)))
    kept: list[str] = []
    pos = 0
    while live:
        found = [(match, kind) for kind in live if (match := openers[kind].find(pos)) is not None]
        if not found:
            break
        opener, kind = min(found, key=lambda item: (item[0].start(), item[1]))
        closer = closers[kind].find(opener.end())
        if closer is None:
            live.remove(kind)  # a later opener of this kind ends later still: it has no closer either
            continue
        kept.append(text[pos : opener.start()])
        pos = closer.end()
    kept.append(text[pos:])
    return "".join(kept)


class AttributeScanner:
    """The `name="value"` and `name='value'` pairs in a tag, found in one pass however garbled the tag.

    Finds exactly what `re.finditer(r'''([A-Za-z_][NAME]*)\\s*=\\s*(?:"([^"]*)"|'([^']*)')''', tag)`
    finds, where NAME is `name_chars`. That search restarts at every letter of a word and reads the word to
    its end each time: quadratic for a tag that is one long word. But a name always ends where its word
    ends (no name character is a space or `=`), so every start inside one word succeeds or fails alike:
    this tries only the first start of each word and skips a failed word whole.

    Args:
        name_chars: the body of a character class for the characters of a name, e.g. `\\w-`; it must
            include `A-Za-z_`, which may start a name.
    """

    def __init__(self, name_chars: str) -> None:
        self._pair = re.compile(rf"""([A-Za-z_][{name_chars}]*+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
        # From the start of a word (a run of name characters), up to the first character that may begin
        # a name: a word with no such character costs one read, and a start inside a word costs nothing.
        self._first_start = re.compile(rf"(?<![{name_chars}])[{name_chars}]*?(?=[A-Za-z_])")

    def pairs(self, tag: str) -> Iterator[re.Match[str]]:
        """Each pair as a match: group 1 the name, group 2 a double-quoted value, group 3 a single-quoted."""
        pos = 0
        while (start := self._first_start.search(tag, pos)) is not None:
            pair = self._pair.match(tag, start.end())
            if pair is not None:
                yield pair
                pos = pair.end()
            else:
                pos = start.end() + 1  # inside this word now, where no start is tried
