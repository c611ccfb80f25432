"""The on-disk index of a knowledge folder: `knowledge/.index/` with a manifest, the chunks and a FAISS index.

Layout (the folder ignores itself in git with its own `.gitignore`)::

    knowledge/.index/manifest.json   backend, embedder identity, chunking, and per file: sha256, bytes, chunks
    knowledge/.index/chunks.json     every chunk (file, lines, heading, text), in index order
    knowledge/.index/vectors.faiss   a flat inner-product FAISS index of the chunks' unit vectors

A build re-embeds only the files whose hash changed (or all, when the embedder or the chunking changed),
reusing the stored vectors of the others (searching is refused when the embedder changed: see
`KnowledgeBase`). Files are replaced atomically, the manifest last, and builds
of one folder are serialised with a lock file, so concurrent runs never see half an index.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
from pydantic import BaseModel, Field, ValidationError

from pse.exceptions import UserError
from pse.knowledge._chunks import Chunk, chunk_document, find_documents
from pse.knowledge._embedders import Embedder, Vectors, backend_of

__all__ = [
    "INDEX_DIR",
    "BuildReport",
    "FileEntry",
    "LoadedIndex",
    "Manifest",
    "build_index",
    "load_index",
    "read_manifest",
]

INDEX_DIR = ".index"
INDEX_VERSION = 2
"""2: chunks carry nested heading paths and setext / reStructuredText headings (a v1 index is rebuilt)."""
_MANIFEST, _CHUNKS, _VECTORS, _LOCK = "manifest.json", "chunks.json", "vectors.faiss", ".lock"


class FileEntry(BaseModel):
    """One indexed file as the manifest keeps it."""

    sha256: str
    bytes: int
    chunks: int


class Manifest(BaseModel):
    """What the index was built from; a rebuild compares the folder against it."""

    version: int = INDEX_VERSION
    backend: str = Field("", description="minilm, offline, ollama or openai (empty in older indexes)")
    embedder: str
    dim: int
    chunk_chars: int
    chunk_overlap: int
    files: dict[str, FileEntry] = Field(default_factory=dict)
    built_at: str = ""


class BuildReport(BaseModel):
    """What a build did. `embedded` lists exactly the files whose chunks were (re-)embedded."""

    index_dir: str
    backend: str = ""
    backend_reason: str = Field("", description="why this backend: the setting, or what auto found")
    embedder: str
    previous_embedder: str | None = Field(
        None, description="the embedder of the index this build replaced, when it was another one"
    )
    files: int
    chunks: int
    embedded: list[str] = Field(default_factory=list)
    reused: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    chunks_embedded: int = 0
    bytes: int = 0
    seconds: float = 0.0
    full_rebuild: bool = False

    @property
    def changed(self) -> bool:
        """Whether the build wrote a new index."""
        return bool(self.embedded or self.removed or self.full_rebuild)


@dataclass(frozen=True, slots=True)
class LoadedIndex:
    """An index in memory: its manifest, its chunks, and their vectors in FAISS."""

    manifest: Manifest
    chunks: list[Chunk]
    faiss_index: faiss.Index | None

    @property
    def vectors(self) -> Vectors:
        """Every chunk's vector, in chunk order (rows of width `manifest.dim`)."""
        if self.faiss_index is None or self.faiss_index.ntotal == 0:
            return np.zeros((0, self.manifest.dim), dtype=np.float32)
        out: Vectors = self.faiss_index.reconstruct_n(0, self.faiss_index.ntotal)
        return out


def index_dir_of(knowledge_dir: Path, backend: str) -> Path:
    """The index folder of a knowledge folder for one embedding backend: `knowledge/.index/<backend>/`
    (each backend keeps its own vectors, so switching backends never finds the other's index), or, for
    a task that ships inside an installed PSE, a folder in the user's cache (`$XDG_CACHE_HOME/pse/
    knowledge/`): nothing is ever written into site-packages.

    Raises:
        UserError: `.index` (or the backend's folder in it) points outside the knowledge folder.
    """
    root = Path(os.path.realpath(knowledge_dir))
    if _installed(root):
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
        return _cache_dir() / "knowledge" / f"{root.parent.name}-{digest}" / backend
    base = knowledge_dir / INDEX_DIR
    for target, parent in ((base, root), (base / backend, root / INDEX_DIR)):
        if target.exists() or target.is_symlink():
            real = Path(os.path.realpath(target))
            if real.parent != parent or target.is_symlink():
                raise UserError(
                    f"{target} leads outside the knowledge folder ({real}); the index is only ever written "
                    "inside the task's knowledge folder: remove that link and build again"
                )
    return base / backend


def _installed(folder: Path) -> bool:
    """Whether a folder ships inside the installed package (a wheel's `pse/_bundled/`), not a checkout."""
    bundled = Path(os.path.realpath(Path(__file__).resolve().parent.parent / "_bundled"))
    return folder == bundled or bundled in folder.parents


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pse"


def read_manifest(knowledge_dir: Path, backend: str) -> Manifest | None:
    """The stored manifest alone (no vectors loaded), or None when there is none or it is unreadable."""
    try:
        text = (index_dir_of(knowledge_dir, backend) / _MANIFEST).read_text(encoding="utf-8")
        return Manifest.model_validate_json(text)
    except (OSError, ValueError, ValidationError):
        return None


def load_index(knowledge_dir: Path, backend: str) -> LoadedIndex | None:
    """The stored index, or None when there is none or it is incomplete (then it is rebuilt)."""
    folder = index_dir_of(knowledge_dir, backend)
    try:
        manifest = Manifest.model_validate_json((folder / _MANIFEST).read_text(encoding="utf-8"))
        raw = json.loads((folder / _CHUNKS).read_text(encoding="utf-8"))
        chunks = [Chunk.model_validate(item) for item in raw]
        vectors_path = folder / _VECTORS
        index = faiss.read_index(str(vectors_path)) if vectors_path.is_file() else None
    except (OSError, ValueError, ValidationError, RuntimeError):
        return None
    stored = index.ntotal if index is not None else 0
    expected = sum(entry.chunks for entry in manifest.files.values())
    if manifest.version != INDEX_VERSION or stored != len(chunks) or expected != len(chunks):
        return None
    return LoadedIndex(manifest, chunks, index)


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("*\n", encoding="utf-8")
    with (folder / _LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_index(
    knowledge_dir: Path,
    embedder: Embedder,
    chunk_chars: int,
    overlap: int,
    *,
    backend: str,
    force: bool = False,
) -> BuildReport:
    """Bring the index of `knowledge_dir` up to date, embedding only new and changed files.

    Raises:
        UserError: the index folder would be outside the knowledge folder, or the chunking is invalid.
        EmbeddingBackendError: the embedder failed (the previous index is left as it was).
    """
    if overlap >= chunk_chars:
        raise UserError(
            f"PSE_KB_CHUNK_OVERLAP ({overlap}) must be smaller than PSE_KB_CHUNK_CHARS ({chunk_chars})"
        )
    started = time.perf_counter()
    folder = index_dir_of(knowledge_dir, backend)
    with _locked(folder):
        documents, skipped = find_documents(knowledge_dir, INDEX_DIR)
        existing = load_index(knowledge_dir, backend)
        old = None if force else existing
        compatible = (
            old is not None
            and old.manifest.embedder == embedder.identity
            and (old.manifest.chunk_chars, old.manifest.chunk_overlap) == (chunk_chars, overlap)
        )
        old_rows: dict[str, tuple[list[Chunk], Vectors]] = {}
        if old is not None and compatible:
            vectors, at = old.vectors, 0
            for name, entry in old.manifest.files.items():
                old_rows[name] = (old.chunks[at : at + entry.chunks], vectors[at : at + entry.chunks])
                at += entry.chunks
        report = BuildReport(
            index_dir=str(folder),
            backend=backend_of(embedder.identity),
            embedder=embedder.identity,
            previous_embedder=(
                existing.manifest.embedder
                if existing is not None and existing.manifest.embedder != embedder.identity
                else None
            ),
            files=len(documents),
            chunks=0,
            skipped=skipped,
            bytes=sum(len(d.data) for d in documents),
            full_rebuild=not compatible,
        )
        entries: dict[str, FileEntry] = {}
        pieces: list[tuple[list[Chunk], Vectors | None]] = []
        to_embed: list[Chunk] = []
        for document in documents:
            digest = document.sha256
            previous = old.manifest.files.get(document.relative) if compatible and old else None
            if previous is not None and previous.sha256 == digest:
                chunks, rows = old_rows[document.relative]
                pieces.append((chunks, rows))
                report.reused.append(document.relative)
            else:
                chunks = chunk_document(document, chunk_chars, overlap)
                pieces.append((chunks, None))
                to_embed.extend(chunks)
                report.embedded.append(document.relative)
            entries[document.relative] = FileEntry(
                sha256=digest, bytes=len(document.data), chunks=len(chunks)
            )
        if old is not None and compatible:
            report.removed = sorted(set(old.manifest.files) - set(entries))
        report.chunks = sum(len(chunks) for chunks, _ in pieces)
        report.chunks_embedded = len(to_embed)
        if not report.changed:
            report.seconds = round(time.perf_counter() - started, 4)
            return report
        fresh = embedder.embed([c.searchable for c in to_embed]) if to_embed else None
        width_changed = fresh is not None and old is not None and fresh.shape[1] != old.manifest.dim
        if compatible and old_rows and width_changed:
            assert fresh is not None and old is not None
            raise UserError(
                f"{embedder.identity} now returns vectors of width {fresh.shape[1]}, the index holds "
                f"{old.manifest.dim}: rebuild it whole with `pse kb build TASK --force`"
            )
        all_chunks: list[Chunk] = []
        blocks: list[Vectors] = []
        at = 0
        for chunks, stored in pieces:
            all_chunks.extend(chunks)
            if stored is None:
                if fresh is not None and chunks:
                    blocks.append(fresh[at : at + len(chunks)])
                at += len(chunks)
            elif len(stored):
                blocks.append(stored)
        dim = blocks[0].shape[1] if blocks else (old.manifest.dim if old and compatible else 0)
        _save(folder, all_chunks, blocks, dim)
        manifest = Manifest(
            backend=backend_of(embedder.identity),
            embedder=embedder.identity,
            dim=dim,
            chunk_chars=chunk_chars,
            chunk_overlap=overlap,
            files=entries,
            built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        _write_atomic(folder / _MANIFEST, manifest.model_dump_json(indent=2).encode())
        report.seconds = round(time.perf_counter() - started, 4)
        return report


def _save(folder: Path, chunks: list[Chunk], blocks: list[Vectors], dim: int) -> None:
    # The manifest is replaced last and a stale one is removed first: a crash in between leaves an index
    # that load_index rejects (and rebuilds), never one whose vectors and chunks disagree.
    (folder / _MANIFEST).unlink(missing_ok=True)
    payload = json.dumps([c.model_dump() for c in chunks], ensure_ascii=False).encode()
    _write_atomic(folder / _CHUNKS, payload)
    vectors_path = folder / _VECTORS
    if not chunks:
        vectors_path.unlink(missing_ok=True)
        return
    index = faiss.IndexFlatIP(dim)
    index.add(np.ascontiguousarray(np.vstack(blocks), dtype=np.float32))
    _write_atomic(vectors_path, faiss.serialize_index(index).tobytes())
