"""Knowledge documents and their chunks: whole lines, a size budget, an overlap, and a citation each.

A document is split at Markdown headings first (a chunk never spans two sections), then each section
into chunks of about `chunk_chars` characters of whole lines, each repeating the last `overlap` characters'
worth of lines of the previous chunk, so a fact cut at a chunk border is whole in one of the two.
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
"""File kinds indexed: Markdown, plain text and reStructuredText (as text; its headings are not parsed)."""
MAX_DOCUMENT_BYTES = 5_000_000
"""Larger files are skipped (and reported): a knowledge base holds prose, not data dumps."""

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


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


def _sections(lines: list[str], markdown: bool) -> list[tuple[str, int, int]]:
    """(heading path, first index, end index) of each section; headings inside code fences do not count."""
    if not markdown:
        return [("", 0, len(lines))]
    title = ""
    sections: list[tuple[str, int, int]] = []
    start, heading, fenced = 0, "", False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match is None:
            continue
        if i > start:
            sections.append((heading, start, i))
        level, text = len(match.group(1)), match.group(2).strip()
        if level == 1 and not title:
            title = text
            heading = text
        else:
            heading = f"{title} › {text}" if title and text != title else text
        start = i
    sections.append((heading, start, len(lines)))
    return sections


def chunk_document(document: Document, chunk_chars: int, overlap: int) -> list[Chunk]:
    """Split one document into chunks of whole lines with overlap; blank-only chunks are dropped."""
    text = document.data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    markdown = document.path.suffix.lower() in {".md", ".markdown"}
    chunks: list[Chunk] = []
    for heading, first, end in _sections(lines, markdown):
        i = first
        while i < end:
            size, j = 0, i
            while j < end and (j == i or size + len(lines[j]) + 1 <= chunk_chars):
                size += len(lines[j]) + 1
                j += 1
            body = "\n".join(lines[i:j]).strip()
            heading_only = j - i == 1 and markdown and _HEADING.match(lines[i]) is not None
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
