"""The sandbox: path confinement, command limits and isolation, in bwrap and fallback modes."""

from __future__ import annotations

import os
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pse.exceptions import SandboxViolation, ToolInfrastructureError
from pse.sandbox import Sandbox, SandboxLimits, bwrap_problem, resolve_in_workspace, scrubbed_environment

BWRAP_MISSING = bwrap_problem()
needs_bwrap = pytest.mark.skipif(BWRAP_MISSING is not None, reason=f"bwrap unusable here: {BWRAP_MISSING}")
MODES = [pytest.param("bwrap", marks=needs_bwrap), "fallback"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "a.txt").write_text("alpha\n")
    (ws / "src" / "m.py").write_text("x = 1\n")
    return ws


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under root: file bytes, or 'dir' / 'link -> target'."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = f"link -> {os.readlink(path)}"
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = path.read_bytes()
    return found


def sandbox(workspace: Path, mode: str, **limits: float) -> Sandbox:
    return Sandbox(workspace, SandboxLimits(**limits), mode)  # type: ignore[arg-type]


def bash(box: Sandbox, command: str, *, writable: bool = False) -> tuple[int | None, str]:
    result = box.run(["bash", "-c", command], writable=writable)
    return result.exit_code, result.output


# ---- paths -----------------------------------------------------------------------------------------


def test_paths_inside_the_workspace_resolve(workspace: Path) -> None:
    real = Path(os.path.realpath(workspace))
    assert resolve_in_workspace(workspace, "src/m.py") == real / "src" / "m.py"
    assert resolve_in_workspace(workspace, " ./src/./m.py \n") == real / "src" / "m.py"
    assert resolve_in_workspace(workspace, ".") == real
    assert resolve_in_workspace(workspace, "new/dir/file.txt") == real / "new" / "dir" / "file.txt"
    (workspace / "inner").symlink_to(workspace / "src")  # a symlink that stays inside is fine
    assert resolve_in_workspace(workspace, "inner/m.py") == real / "src" / "m.py"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/passwd", "absolute path '/etc/passwd' is not allowed"),
        ("~/.ssh/id_rsa", "absolute path"),
        ("../outside.txt", "contains '..'"),
        ("src/../../outside.txt", "contains '..'"),
        ("", "empty path"),
        ("a\x00b", "NUL"),
    ],
)
def test_path_strings_that_are_refused(workspace: Path, path: str, message: str) -> None:
    with pytest.raises(SandboxViolation, match=message.replace("(", r"\(").replace(".", r"\.")):
        resolve_in_workspace(workspace, path)


def test_symlinks_that_escape_are_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (workspace / "file_link").symlink_to(outside / "secret.txt")
    (workspace / "dir_link").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "not-yet.txt")
    (workspace / "src" / "up").symlink_to(workspace.parent)
    for path in ["file_link", "dir_link/secret.txt", "dir_link", "dangling", "src/up/outside/secret.txt"]:
        with pytest.raises(SandboxViolation, match="leads outside the workspace"):
            resolve_in_workspace(workspace, path)
    with pytest.raises(SandboxViolation, match=r"contains '\.\.'"):
        resolve_in_workspace(workspace, "src/up/../..")  # `..` inside a symlinked dir


# ---- commands ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_read_only_command_cannot_change_the_workspace(workspace: Path, mode: str) -> None:
    before = snapshot(workspace)
    box = sandbox(workspace, mode)
    _, output = bash(box, "cat a.txt; echo x > new.txt; echo y >> a.txt; rm -rf src; mkdir made; ls")
    assert "alpha" in output
    assert snapshot(workspace) == before
    if (
        mode == "bwrap"
    ):  # every write fails: read-only mount, or a root-owned file the command's uid may not write
        assert output.count("Read-only file system") + output.count("Permission denied") == 4
    result = box.run(["bash", "-c", "true"], writable=False)
    assert result.sandbox == ("bwrap-ro" if mode == "bwrap" else "fallback-copy")


@pytest.mark.parametrize("mode", MODES)
def test_read_write_command_changes_the_workspace(workspace: Path, mode: str) -> None:
    box = sandbox(workspace, mode)
    result = box.run(["bash", "-c", "echo made > new.txt && rm a.txt"], writable=True)
    assert result.exit_code == 0, result.output
    assert result.sandbox == ("bwrap-rw" if mode == "bwrap" else "fallback-rw")
    assert (workspace / "new.txt").read_text() == "made\n" and not (workspace / "a.txt").exists()
    assert result.changes == ("new.txt", "a.txt") and result.refused == ()


def _alive(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.mark.parametrize("mode", MODES)
def test_timeout_kills_the_command_and_its_children(workspace: Path, mode: str) -> None:
    marker = f"pse-child-{uuid.uuid4().hex}"
    command = f"(exec -a {marker} sleep 60) & (exec -a {marker} sleep 60) & echo started > started.txt; wait"
    box = sandbox(workspace, mode, timeout_s=1.5)
    result = box.run(["bash", "-c", command], writable=True)
    assert (workspace / "started.txt").exists()  # the children did start
    assert result.timed_out is True and result.exit_code is None
    assert "[killed: timed out after 1.5 s]" in result.output
    assert _alive(marker) == []


@pytest.mark.parametrize("mode", MODES)
def test_background_children_of_a_finished_command_are_reaped(workspace: Path, mode: str) -> None:
    marker = f"pse-bg-{uuid.uuid4().hex}"
    result = sandbox(workspace, mode).run(
        ["bash", "-c", f"(exec -a {marker} sleep 60) & echo ok"], writable=False
    )
    assert result.exit_code == 0 and result.output.strip() == "ok"
    assert _alive(marker) == []


@pytest.mark.parametrize("mode", MODES)
def test_output_is_capped_with_a_visible_marker(workspace: Path, mode: str) -> None:
    result = sandbox(workspace, mode, output_limit=1000).run(["bash", "-c", "seq 1 100000"], writable=False)
    assert result.truncated is True and result.exit_code == 0
    assert len(result.output) <= 1000
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("99999\n100000\n")
    total = len("".join(f"{i}\n" for i in range(1, 100001)).encode())
    shown = result.output.split("\n[… truncated ")
    removed = int(shown[1].split(" ")[0])
    assert removed == total - len(shown[0].encode()) - len(shown[1].split("…]\n", 1)[1].encode())


@pytest.mark.parametrize("mode", MODES)
def test_api_keys_in_the_parent_environment_are_absent(
    workspace: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-test-0123456789",
        "PSE_API_KEY": "pse-secret-value",
        "MY_SERVICE_TOKEN": "tok-abcdef",
        "DB_PASSWORD": "hunter2",
        "LC_SECRET_THING": "lc-leak",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    box = sandbox(workspace, mode)
    code, output = bash(box, "env; echo HOME=$HOME")
    assert code == 0
    for name, value in secrets.items():
        assert value not in output and name not in output
    assert f"HOME={os.environ.get('HOME', '/root')}\n" not in output
    interpreter = str(Path(sys.executable).parent)  # as root with PSE in a closed folder: its mirror's
    assert f"PATH={box.reach.text(interpreter) if box.reach is not None else interpreter}" in output


def test_scrubbed_environment_is_an_allow_list() -> None:
    env = scrubbed_environment("/h", parent={"PATH": "/bin", "LANG": "en_US.UTF-8", "LC_ALL": "C", "EDITOR": "vi",
                                             "GITHUB_TOKEN": "x", "AWS_REGION": "eu", "PSE_MODEL": "m"})  # fmt: skip
    assert env["PATH"] == f"{Path(sys.executable).parent}{os.pathsep}/bin"
    assert env["LANG"] == "en_US.UTF-8" and env["LC_ALL"] == "C" and env["HOME"] == env["TMPDIR"] == "/h"
    assert not {"EDITOR", "GITHUB_TOKEN", "AWS_REGION", "PSE_MODEL"} & set(env)


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(10)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"hello\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


NET_PROBE = (
    "python -c \"import socket,sys; s=socket.create_connection(('127.0.0.1', {port}), timeout=3); "
    "print('GOT', s.recv(6).decode().strip())\""
)


@needs_bwrap
def test_no_network_from_bash_under_bwrap(workspace: Path, listener: int) -> None:
    code, output = bash(sandbox(workspace, "bwrap"), NET_PROBE.format(port=listener))
    assert code != 0 and "GOT hello" not in output
    assert "Connection refused" in output or "unreachable" in output


def test_fallback_mode_does_reach_the_network(workspace: Path, listener: int) -> None:
    """Documented limit: fallback is not network isolation (and this proves the probe above can fail)."""
    code, output = bash(sandbox(workspace, "fallback"), NET_PROBE.format(port=listener))
    assert code == 0 and "GOT hello" in output


def test_forcing_bwrap_where_it_is_missing_is_an_infrastructure_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pse.sandbox._runner.bwrap_problem", lambda *_: "bwrap is not installed")
    with pytest.raises(ToolInfrastructureError, match="PSE_SANDBOX=bwrap but bwrap is not installed"):
        Sandbox(workspace, SandboxLimits(), "bwrap")
    assert Sandbox(workspace, SandboxLimits(), "auto").mode == "fallback"


@pytest.mark.parametrize("mode", MODES)
def test_resource_limits_are_applied(workspace: Path, mode: str) -> None:
    limits = {"cpu_s": 7, "memory_mb": 512, "file_size_mb": 3, "max_processes": 99}
    code, output = bash(sandbox(workspace, mode, **limits), "ulimit -t; ulimit -v; ulimit -f; ulimit -u")
    assert code == 0 and output.split() == ["7", str(512 * 1024), str(3 * 1024), "99"]


@pytest.mark.parametrize("mode", MODES)
def test_file_size_limit_stops_a_huge_write(workspace: Path, mode: str) -> None:
    code, _ = bash(
        sandbox(workspace, mode, file_size_mb=1), "head -c 3000000 /dev/zero > big.bin", writable=True
    )
    assert code != 0 and (workspace / "big.bin").stat().st_size <= 1024 * 1024


class TestSandboxSecurity:
    """Attacks a hostile role might try from bash (bwrap mode unless noted)."""

    @needs_bwrap
    def test_cannot_write_the_system_or_remount(self, workspace: Path) -> None:
        box = sandbox(workspace, "bwrap")
        for command in [
            "echo x > /etc/pse-pwned",
            "echo x > /usr/pse-pwned",
            f"mount -o remount,rw {workspace}",
            f"mount -o remount,rw --bind {workspace} {workspace} && echo x > {workspace}/pwned",
        ]:
            code, _ = bash(box, command)
            assert code != 0, command
        assert not Path("/etc/pse-pwned").exists() and not Path("/usr/pse-pwned").exists()
        assert not (workspace / "pwned").exists()

    @needs_bwrap
    def test_absolute_path_to_the_real_workspace_is_read_only_too(self, workspace: Path) -> None:
        before = snapshot(workspace)
        code, _ = bash(sandbox(workspace, "bwrap"), f"echo x > {os.path.realpath(workspace)}/a.txt")
        assert code != 0 and snapshot(workspace) == before

    @needs_bwrap
    def test_host_files_outside_the_mounts_are_invisible(self, workspace: Path, tmp_path: Path) -> None:
        secret = tmp_path / "host-secret.txt"
        secret.write_text("top secret")
        code, output = bash(sandbox(workspace, "bwrap"), f"cat {secret}")
        assert code != 0 and "No such file or directory" in output and "top secret" not in output

    @needs_bwrap
    def test_private_tmp(self, workspace: Path) -> None:
        host_file = Path("/tmp") / f"pse-host-{uuid.uuid4().hex}"
        inner_file = Path("/tmp") / f"pse-inner-{uuid.uuid4().hex}"
        host_file.write_text("host")
        try:
            _, output = bash(
                sandbox(workspace, "bwrap"), f"cat {host_file}; echo tmp > {inner_file} && echo W"
            )
            assert "No such file" in output and "W" in output  # /tmp is the sandbox's own, and writable
            assert not inner_file.exists()
        finally:
            host_file.unlink()

    @needs_bwrap
    def test_cannot_signal_host_processes(self, workspace: Path) -> None:
        _, output = bash(sandbox(workspace, "bwrap"), f"kill -0 {os.getpid()} && echo VISIBLE")
        assert "VISIBLE" not in output

    @pytest.mark.parametrize("mode", MODES)
    def test_many_children_are_all_killed(self, workspace: Path, mode: str) -> None:
        # Bounded on purpose (a real fork bomb would hurt the shared test machine). RLIMIT_NPROC is not
        # enforced for root, so what must hold is that the timeout's group kill takes every child.
        marker = f"pse-swarm-{uuid.uuid4().hex}"
        command = f"for i in $(seq 150); do (exec -a {marker} sleep 30) & done; wait"
        result = sandbox(workspace, mode, timeout_s=1.5).run(["bash", "-c", command], writable=False)
        assert result.timed_out
        assert _alive(marker) == []
