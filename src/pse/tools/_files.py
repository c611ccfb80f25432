"""File tools: read_file, list_files, write_file. Every path goes through `resolve_in_workspace`."""

from __future__ import annotations

import os
from pathlib import Path

from pse.sandbox import resolve_in_workspace
from pse.tools._registry import ToolContext, ToolOutcome

__all__ = ["list_files", "read_file", "write_file"]

MAX_READ_BYTES = 4_000_000
"""read_file reads at most this much of a file; the executor then caps what the role sees."""
MAX_LIST_ENTRIES = 1000
"""list_files stops after this many entries and says so."""
_SKIP_DIRS = frozenset(
    {".git", "__pycache__", ".venv", "venv", "node_modules", ".pytest_cache", ".ruff_cache"}
)


def _relative(ctx: ToolContext, real: Path) -> str:
    rel = real.relative_to(Path(os.path.realpath(ctx.workspace)))
    return rel.as_posix() or "."


def read_file(ctx: ToolContext, path: str) -> ToolOutcome:
    """Return a text file's content (UTF-8; undecodable bytes replaced)."""
    real = resolve_in_workspace(ctx.workspace, path)
    if real.is_dir():
        raise ValueError(f"{path.strip()!r} is a directory; use list_files to see what it holds")
    if not real.is_file():
        raise ValueError(f"no file {path.strip()!r} in the workspace; list_files shows what exists")
    size = real.stat().st_size
    with real.open("rb") as fh:
        data = fh.read(MAX_READ_BYTES)
    if b"\x00" in data[:8192]:
        raise ValueError(f"{path.strip()!r} is a binary file ({size} bytes); read_file shows text files only")
    text = data.decode("utf-8", errors="replace")
    if size > MAX_READ_BYTES:
        text += f"\n[… file continues: {size - MAX_READ_BYTES} more bytes not read …]"
    return ToolOutcome("ok", text, facts={"bytes": size})


def list_files(ctx: ToolContext, path: str = ".") -> ToolOutcome:
    """List a folder recursively: `dir/`, `file (N bytes)`, and `link@` for symlinks (never followed)."""
    real = resolve_in_workspace(ctx.workspace, path or ".")
    if not real.is_dir():
        raise ValueError(f"{path.strip()!r} is not a directory in the workspace")
    lines: list[str] = []
    for current, dirs, files in os.walk(real):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        here = Path(current)
        for name in [*dirs, *sorted(files)]:
            entry = here / name
            rel = _relative(ctx, entry)
            if entry.is_symlink():
                lines.append(f"{rel}@")
                if name in dirs:
                    dirs.remove(name)  # os.walk does not follow it anyway; keep the listing honest
            elif name in dirs:
                lines.append(f"{rel}/")
            else:
                lines.append(f"{rel} ({entry.stat().st_size} bytes)")
            if len(lines) >= MAX_LIST_ENTRIES:
                lines.append(f"[… listing stopped at {MAX_LIST_ENTRIES} entries; list a subdirectory …]")
                return ToolOutcome(
                    "ok", "\n".join(lines), facts={"entries": MAX_LIST_ENTRIES}, truncated=True
                )
    count = len(lines)
    return ToolOutcome("ok", "\n".join(lines) if lines else "(empty directory)", facts={"entries": count})


def write_file(ctx: ToolContext, path: str, content: str) -> ToolOutcome:
    """Create or replace a file inside the workspace (parent directories are created)."""
    if not ctx.writable:
        raise ValueError("write_file needs a read-write grant; this role's grant is read-only")
    real = resolve_in_workspace(ctx.workspace, path)
    if real.is_dir():
        raise ValueError(f"{path.strip()!r} is a directory; give a file path")
    real.parent.mkdir(parents=True, exist_ok=True)
    # Re-check after mkdir and open without following a last-component symlink (narrows the TOCTOU window).
    real = resolve_in_workspace(ctx.workspace, path)
    data = content.encode("utf-8")
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return ToolOutcome("ok", f"wrote {_relative(ctx, real)} ({len(data)} bytes)", facts={"bytes": len(data)})
