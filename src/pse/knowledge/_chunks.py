"""Knowledge documents and their chunks: whole lines, a size budget, an overlap, and a citation each.

A document is split at its headings first (Markdown and reStructuredText: a chunk never spans two
sections, and a heading is never a chunk of its own), then each section into chunks of about
`chunk_chars` characters of whole lines, each repeating the last `overlap` characters' worth of lines of
the previous chunk, so a fact cut at a chunk border is whole in one of the two. Every chunk keeps its
heading path (`Title › Section › Subsection`), which is embedded and counted with its text.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SUPPORTED_SUFFIXES", "Chunk", "Document", "chunk_document", "find_documents"]

SUPPORTED_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".text", ".rst"})
"""File kinds indexed: Markdown, plain text and reStructuredText (its underlined titles are headings)."""
MAX_DOCUMENT_BYTES = 5_000_000
"""Larger files are skipped (and reported): a knowledge base holds prose, not data dumps."""

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SETEXT = re.compile(r"^ {0,3}(={3,}|-{3,})\s*$")
_NOT_SETEXT_TITLE = re.compile(r"^\s*([-*+>|]|\d+[.)]\s|#|```|~~~)")
"""Lines that cannot be a setext title: list items, quotes, tables, ATX headings, fences."""
_RST_ADORNMENT = frozenset("=-~^\"'`*+#:._")


class Chunk(BaseModel):
    """One searchable piece of a document, with where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    file: str = Field(description="path relative to the knowledge folder, with forward slashes")
    start_line: int = Field(ge=1, description="first line, counting from 1")
    end_line: int = Field(ge=1, description="last line, inclusive")
    heading: str = Field("", description="the document title and section, e.g. 'Runbook › Signs'")
    text: str

    @property
    def searchable(self) -> str:
        """What is embedded and counted: the heading gives a chunk the context of its section."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


@dataclass(frozen=True, slots=True)
class Document:
    """A knowledge file found on disk."""

    path: Path
    relative: str
    data: bytes

    @property
    def sha256(self) -> str:
        """The content hash the manifest keeps (a rebuild re-embeds a file only when it changes)."""
        return hashlib.sha256(self.data).hexdigest()


def find_documents(folder: Path, skip: str = ".index") -> tuple[list[Document], list[str]]:
    """The supported files under `folder` (sorted), and the relative paths skipped, each with why.

    Hidden files and folders (the index itself among them) are ignored; a symlink is followed only when it
    stays inside `folder`.
    """
    root = Path(os.path.realpath(folder))
    found: list[Document] = []
    skipped: list[str] = []
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != skip)
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(current) / name
            relative = path.relative_to(root).as_posix()
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(root):
                skipped.append(f"{relative} (a link out of the knowledge folder)")
            elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
                skipped.append(f"{relative} (unsupported kind; index .md, .txt or .rst files)")
            elif real.stat().st_size > MAX_DOCUMENT_BYTES:
                skipped.append(f"{relative} (larger than {MAX_DOCUMENT_BYTES} bytes)")
            else:
                found.append(Document(path, relative, real.read_bytes()))
    return found, skipped


def _underline(lines: list[str], i: int, rst: bool) -> tuple[int, bool] | None:
    """(adornment character, overlined) when `lines[i]` is a title underlined by `lines[i + 1]`, else None.

    Markdown (setext): `===` or `---` under a one-line paragraph. reStructuredText: a line of one
    punctuation character at least as long as the title, optionally repeated above it. The title stands
    after a blank line (or first, or under its overline), so a `---` that ends a paragraph, front matter
    or a list is not taken for a heading.
    """
    if i + 1 >= len(lines) or not lines[i].strip():
        return None
    text, under = lines[i].strip(), lines[i + 1].strip()
    above = lines[i - 1].strip() if i > 0 else ""
    if rst:
        adorned = len(under) >= max(3, len(text)) and len(set(under)) == 1 and under[0] in _RST_ADORNMENT
        overlined = bool(above) and above == under
        return (ord(under[0]), overlined) if adorned and (not above or overlined) else None
    if not above and _SETEXT.match(lines[i + 1]) and not _NOT_SETEXT_TITLE.match(lines[i]):
        return ord(under[0]), False
    return None


def _sections(lines: list[str], kind: str) -> list[tuple[str, int, int, int]]:
    """(heading path, first index, end index, heading lines) of each section of a document.

    Markdown: ATX (`## Title`) and setext (underlined) headings, none inside code fences.
    reStructuredText: underlined (and overlined) titles, levels in the order their styles first appear.
    Plain text has one section. The path is the document title (its first top-level heading) and every
    open heading above the section, e.g. `Runbook › Diagnosis › Kubernetes`, so a chunk carries the
    headings of its body even when it starts deep inside the section.
    """
    if kind == "text":
        return [("", 0, len(lines), 0)]
    title = ""
    open_headings: list[tuple[int, str]] = []  # (level, text) above the current section
    rst_levels: dict[int, int] = {}
    sections: list[tuple[str, int, int, int]] = []
    start, heading, head_lines, fenced = 0, "", 0, False
    for i, line in enumerate(lines):
        if kind == "markdown" and _FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        match = _HEADING.match(line) if kind == "markdown" else None
        underlined = None if match else _underline(lines, i, kind == "rst")
        at = i
        if match is not None:
            level, text, size = len(match.group(1)), match.group(2).strip(), 1
        elif underlined is not None:
            adornment, overlined = underlined
            if kind == "rst":
                level = rst_levels.setdefault(adornment * (2 if overlined else 1), len(rst_levels) + 1)
            else:
                level = 1 if adornment == ord("=") else 2
            text, size, at = line.strip(), 3 if overlined else 2, i - 1 if overlined else i
        else:
            continue
        if at > start:
            sections.append((heading, start, at, head_lines))
        if level == 1 and not title:
            title, open_headings = text, []
        else:
            open_headings = [(lv, t) for lv, t in open_headings if lv < level] + [(level, text)]
        names = [title] if title else []
        names += [t for _, t in open_headings if t != title]
        heading, start, head_lines = " › ".join(names), at, size
    sections.append((heading, start, len(lines), head_lines))
    return sections


def chunk_document(document: Document, chunk_chars: int, overlap: int) -> list[Chunk]:
    """Split one document into chunks of whole lines with overlap; blank-only chunks are dropped."""
    text = document.data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    suffix = document.path.suffix.lower()
    kind = "markdown" if suffix in {".md", ".markdown"} else "rst" if suffix == ".rst" else "text"
    chunks: list[Chunk] = []
    for heading, first, end, head_lines in _sections(lines, kind):
        i = first
        while i < end:
            size, j = 0, i
            while j < end and (j == i or size + len(lines[j]) + 1 <= chunk_chars):
                size += len(lines[j]) + 1
                j += 1
            body = "\n".join(lines[i:j]).strip()
            # A heading is never a chunk of its own: it goes with its body (or its sub-sections' paths).
            heading_only = i == first and head_lines > 0 and not "".join(lines[i + head_lines : j]).strip()
            if body and not heading_only:
                chunks.append(
                    Chunk(file=document.relative, start_line=i + 1, end_line=j, heading=heading, text=body)
                )
            if j >= end:
                break
            # Step back over whole lines worth `overlap` characters, but always move forward.
            back, k = 0, j
            while k - 1 > i and back + len(lines[k - 1]) + 1 <= overlap:
                back += len(lines[k - 1]) + 1
                k -= 1
            i = k
    return chunks
