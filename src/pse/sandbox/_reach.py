"""Fallback as root with PSE inside a folder other users cannot enter: a mirror the sandbox uid can reach.

A root user's clone under /root, or in a `mktemp -d` folder (mode 0700), holds the venv and PSE's source
where the sandbox uid cannot enter: no fallback command could start its interpreter. That folder is never
opened (no chmod, no ACL). PSE mirrors what commands run from it instead: the interpreter's prefixes (the
venv), the folders its `.pth` files add (an editable install's source) and the folders a command is given
read-only, as hard links (no copy: the mirror is on the same file system, beside the closed folder, in
/var/tmp or in /tmp), with the few text files that name their own place rewritten to the mirror's (`.pth`
files, editable finders, script headers, absolute symlinks). The mirror's folder is root's, mode 0711,
and holds one folder of a random name: a uid that is told the name (a command, in its argv) reaches it;
no other user can list it. A file (a link) and a folder keep their own mode, so what was private stays so.

`Reach.argv` is the one place a fallback command's paths change: every path under a mirrored folder, in
any argument (the interpreter, a file PSE names in a shell string), and PATH's entries, name the
mirror. The mirror is brought up to date once per process (a file replaced since, by `pip install` or a
checkout, is linked again; new files are linked, removed ones stay).

What this does NOT do: open the closed folder itself, or anything in it but those folders (a task's
folder and the workspace reach commands as private copies anyway); it needs the mirror's folder on the
same file system (else PSE refuses the fallback, as before, naming the fixes).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import stat
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Reach", "reach_for"]

_REWRITTEN_MAX_BYTES = 256 * 1024
"""Largest text file checked for its own path (`.pth`, finders, scripts); bigger ones are linked."""
_lock = threading.Lock()


@dataclass(frozen=True)
class Reach:
    """Where each mirrored folder is, and how a command's paths are turned to it."""

    closed: str
    """The folder other users cannot enter."""
    mirrors: tuple[tuple[str, str], ...]
    """(host folder, its mirror), longest host folder first."""

    def text(self, value: str) -> str:
        """`value` with every mirrored folder (a whole path component) named at its mirror."""
        for host, mirror in self.mirrors:
            value = re.sub(re.escape(host) + r"(?=/|$|[^\w.\-])", lambda _: mirror, value)  # noqa: B023
        return value

    def argv(self, argv: Sequence[str]) -> list[str]:
        """The command's arguments, naming the mirror."""
        return [self.text(arg) for arg in argv]


def _import_folders() -> set[Path]:
    """The folders the interpreter's `.pth` files add to the import path (an editable install's source):
    what an isolated (`-I`) command imports from besides the prefixes."""
    found: set[Path] = set()
    for where in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for pth in Path(where).glob("*.pth"):
            try:
                lines = pth.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                path = Path(line.strip())
                if (
                    line.strip()
                    and not line.startswith(("#", "import "))
                    and path.is_absolute()
                    and path.is_dir()
                ):
                    found.add(path)
    return found


def _needed(closed: Path, extra: Iterable[Path]) -> tuple[Path, ...]:
    """The folders under `closed` a command runs from: the interpreter's prefixes, the folders its `.pth`
    files add, and `extra` (a command's read-only folders); the outermost of each nest."""
    found = {Path(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}
    found |= _import_folders() | {Path(os.path.realpath(p)) for p in extra}
    inside = sorted(p for p in found if p != closed and p.is_relative_to(closed))
    return tuple(p for p in inside if not any(p != q and p.is_relative_to(q) for q in inside))


def _home(closed: Path) -> Path | None:
    """A folder on `closed`'s file system, outside it, where root may keep the mirror."""
    device = os.stat(closed).st_dev
    for candidate in (closed.parent, Path("/var/tmp"), Path("/tmp")):
        try:
            if (
                candidate != Path("/")
                and os.stat(candidate).st_dev == device
                and os.access(candidate, os.W_OK)
            ):
                return candidate
        except OSError:
            continue
    return None


def _root(home: Path, closed: Path) -> Path:
    """The mirror's folder (`.pse-reach-…`, 0711) and in it the one folder of a random name."""
    base = home / f".pse-reach-{hashlib.sha256(str(closed).encode()).hexdigest()[:12]}"
    base.mkdir(mode=0o711, exist_ok=True)
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise OSError(f"{base} is not a folder of PSE's")
    os.chmod(base, 0o711)
    names = [e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False)]
    if names:
        return base / names[0]
    inner = base / secrets.token_hex(16)
    inner.mkdir(mode=0o755)
    return inner


def _rewritten(source: Path, closed: bytes, mirror: bytes) -> bytes | None:
    """The mirror's text of a file that names its own place (None: link it as it is)."""
    name = source.name
    text_kinds = name.endswith(".pth") or name.startswith("__editable__") or source.parent.name == "bin"
    if not text_kinds:
        return None
    try:
        if os.path.getsize(source) > _REWRITTEN_MAX_BYTES:
            return None
        data = source.read_bytes()
    except OSError:
        return None
    if closed not in data or (source.parent.name == "bin" and not data.startswith(b"#!")):
        return None
    return data.replace(closed, mirror)


def _sync(folder: Path, target: Path, closed: Path, mirror: Path) -> None:
    """Mirror `folder` at `target`: folders made, files linked (or rewritten), symlinks copied."""
    old, new = str(closed).encode(), str(mirror).encode()
    for here, dirs, files in os.walk(folder, followlinks=False):
        there = target / Path(here).relative_to(folder)
        there.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(there, stat.S_IMODE(os.lstat(here).st_mode))  # a folder closed to others stays closed
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(here, d)))]:
            source, copy = Path(here) / name, there / name
            info = os.lstat(source)
            if stat.S_ISLNK(info.st_mode):
                link = os.readlink(source)
                if link.startswith(str(closed) + "/"):
                    link = str(mirror) + link[len(str(closed)) :]
                if not os.path.islink(copy) or os.readlink(copy) != link:
                    _replace(copy, functools.partial(os.symlink, link))
            elif stat.S_ISREG(info.st_mode):
                data = _rewritten(source, old, new)
                if data is not None:
                    if not copy.is_file() or copy.read_bytes() != data:
                        _replace(copy, functools.partial(_write, data=data, mode=info.st_mode))
                elif not os.path.lexists(copy) or os.lstat(copy).st_ino != info.st_ino:
                    _replace(copy, functools.partial(os.link, source))


def _write(path: Path, data: bytes, mode: int) -> None:
    path.write_bytes(data)
    os.chmod(path, stat.S_IMODE(mode))


def _replace(path: Path, make: Callable[[Path], object]) -> None:
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    make(path)


@functools.cache
def _mirrored(closed: Path, folders: tuple[Path, ...]) -> Reach:
    home = _home(closed)
    if home is None:
        raise OSError(f"no folder on the file system of {closed} outside it where PSE may keep a mirror")
    mirror = _root(home, closed)
    for folder in folders:
        _sync(folder, mirror / folder.relative_to(closed), closed, mirror)
    pairs = [(str(f), str(mirror / f.relative_to(closed))) for f in folders]
    return Reach(str(closed), tuple(sorted(pairs, key=lambda p: -len(p[0]))))


def reach_for(closed: Path, extra: Iterable[Path] = ()) -> Reach:
    """The mirror of what commands run from under `closed` (made, or brought up to date, once per process
    and set of folders).

    Raises:
        OSError: no mirror can be made (no folder on the same file system to keep it in, a link refused).
    """
    folders = _needed(closed, extra)
    with _lock:
        reach = _mirrored(closed, folders)
        if any(not os.path.isdir(mirror) for _, mirror in reach.mirrors):  # removed since (a /tmp cleaner)
            _mirrored.cache_clear()
            reach = _mirrored(closed, folders)
        return reach
