"""Fallback as root with PSE inside a folder other users cannot enter (issue 47, item 7): a mirror.

`git clone` into a `mktemp -d` folder (mode 0700) and `make test` as root: the fallback sandbox's uid could
not start the clone's `.venv` Python, and every fallback test failed or was skipped. Now the sandbox runs
commands from a mirror of the interpreter's folders (`pse.sandbox._reach`): hard links beside the closed
folder, the files that name their own place rewritten, the folder itself never opened. Here a real venv
(no pip: quick) and an "editable" source folder are made in a closed folder, and the sandbox uid starts
that venv's Python from the mirror and imports the source through its `.pth` file. The whole suite in
such a clone is `.ci/run`'s own check.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pse.sandbox import DEFAULT_SANDBOX_UID
from pse.sandbox._reach import Reach, _mirrored, reach_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="the mirror serves PSE running as root (tool commands then run as another uid); needs setpriv",
)
NOBODY = ["setpriv", f"--reuid={DEFAULT_SANDBOX_UID}", f"--regid={DEFAULT_SANDBOX_UID}", "--clear-groups"]


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NOBODY, *argv], capture_output=True, text=True, cwd="/", check=False)


@pytest.fixture
def closed() -> Iterator[Path]:
    """A folder as `mktemp -d` makes it, under a folder every user may enter (/tmp's own mode)."""
    base = Path(tempfile.mkdtemp(prefix="pse-reach-test-", dir="/tmp"))  # mode 0700, as mktemp -d
    _mirrored.cache_clear()
    yield base
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(Path("/tmp") / f".pse-reach-{hashlib.sha256(str(base).encode()).hexdigest()[:12]}", True)


def _project(closed: Path) -> tuple[Path, Path]:
    """A venv and an editable source folder inside `closed`, the venv importing the source by a `.pth`."""
    venv, src = closed / "clone" / ".venv", closed / "clone" / "src"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    (src / "probe_pkg").mkdir(parents=True)
    (src / "probe_pkg" / "__init__.py").write_text("WHERE = __file__\n")
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "_editable_probe.pth").write_text(f"{src}\n")
    (closed / "clone" / "secret.txt").write_text("the person's own file\n")
    return venv, src


def test_the_sandbox_uid_runs_a_venv_in_a_closed_folder_from_its_mirror(closed: Path) -> None:
    venv, src = _project(closed)
    python = str(venv / "bin" / "python")
    # as before: setpriv may exec it (it looks the path up before its capabilities go), but the
    # interpreter then cannot read its own venv, nor the source its `.pth` names
    assert _as_nobody(python, "-I", "-c", "import probe_pkg").returncode != 0
    reach = _mirrored(closed, (venv, src))
    mirrored = reach.text(python)
    assert mirrored != python and not mirrored.startswith(str(closed))
    done = _as_nobody(
        mirrored, "-I", "-c", "import sys, probe_pkg; print(sys.prefix); print(probe_pkg.WHERE)"
    )
    assert done.returncode == 0, done.stderr
    prefix, where = done.stdout.split()
    assert prefix == reach.text(str(venv)) and where == reach.text(str(src / "probe_pkg" / "__init__.py"))
    # the closed folder is as it was; only the mirrored folders are in the mirror, never the rest of it
    assert stat.S_IMODE(os.stat(closed).st_mode) == 0o700
    inner = Path(reach.text(str(venv))).parents[1]
    assert not (inner / "clone" / "secret.txt").exists()
    assert stat.S_IMODE(os.stat(inner.parent).st_mode) == 0o711  # nobody may list it to find the name
    assert _as_nobody("ls", str(inner.parent)).returncode != 0


def test_the_mirror_follows_what_changed_and_names_every_path_of_a_command(closed: Path) -> None:
    venv, src = _project(closed)
    first = _mirrored(closed, (venv, src))
    module = src / "probe_pkg" / "__init__.py"
    module.unlink()
    module.write_text("WHERE = 'changed'\n")  # a new file (a checkout, an editor's save): a new inode
    _mirrored.cache_clear()  # a new process
    second = _mirrored(closed, (venv, src))
    assert second == first  # the same place, brought up to date
    assert Path(second.text(str(module))).read_text() == "WHERE = 'changed'\n"
    command = f"{venv}/bin/python -I {src}/probe_pkg/__init__.py; ls {closed}/clone/srcx"
    assert second.text(command) == (
        f"{second.text(str(venv))}/bin/python -I {second.text(str(src))}/probe_pkg/__init__.py; "
        f"ls {closed}/clone/srcx"  # a longer name that only starts like a mirrored folder stays
    )


def test_reach_for_mirrors_a_read_only_folder_a_command_is_given(closed: Path) -> None:
    (closed / "task" / "checks").mkdir(parents=True)
    (closed / "task" / "checks" / "check.py").write_text("print('checked')\n")
    reach = reach_for(closed, [closed / "task"])
    assert isinstance(reach, Reach) and reach.closed == str(closed)
    done = _as_nobody(
        sys.base_prefix + "/bin/python3", "-I", reach.text(str(closed / "task" / "checks" / "check.py"))
    )
    assert (done.returncode, done.stdout) == (0, "checked\n")


def test_a_hidden_path_readable_through_the_mirror_refuses_the_fallback(closed: Path) -> None:
    """The mirror links the venv's files, a hidden dataset's answers among them: what the closed folder kept
    from the sandbox uid would be readable at the mirror, so the fallback refuses as it would elsewhere."""
    from pse.exceptions import ToolInfrastructureError
    from pse.sandbox import Identity
    from pse.sandbox._hidden import check_hidden

    venv, src = _project(closed)
    answers = next(venv.glob("lib/python3*/site-packages")) / "answers" / "data.json"
    answers.parent.mkdir()
    answers.write_text('{"canonical_solution": "..."}')
    nobody = Identity(DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID, True)
    check_hidden([answers.parent], nobody)  # at its own place the closed folder hides it
    reach = _mirrored(closed, (venv, src))
    with pytest.raises(ToolInfrastructureError) as refused:
        check_hidden([answers.parent], nobody, reach)
    assert str(refused.value).startswith(
        f"{answers.parent} must be hidden from every tool command, but uid {DEFAULT_SANDBOX_UID} (the fallback "
        f"sandbox's) can read it at {reach.text(str(answers.parent))}, where PSE mirrors the interpreter's folders"
    )
    for path in (answers.parent, answers):  # the fix it names, chmod -R o-rwx: the mirror follows
        os.chmod(path, os.stat(path).st_mode & ~0o007)
    _mirrored.cache_clear()  # the next process
    check_hidden([answers.parent], nobody, _mirrored(closed, (venv, src)))
