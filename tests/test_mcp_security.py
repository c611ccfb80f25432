"""Attacks by an MCP server (or by the role steering it), performed for real in both sandbox modes.

The threat model counts every MCP server as untrusted. A server runs where tool commands run: never as
root, without capabilities, with a scrubbed environment, no network unless the task allows it, and
the workspace only as its `[mcp.NAME] workspace` says (read-only by default). These tests are the
attacks: writes to the real workspace and outside it, secrets in its environment, the network.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcp_support import MODES, SERVER_DIR, calls, mcp_executor, needs_bwrap, notes_spec
from pse.config import Settings
from pse.events import ToolCallRecord
from pse.exceptions import ConfigError
from pse.mcp import McpServers
from pse.toolagent import ToolExecutor, sandbox_for

ALL = {"Specialist": {"mcp.notes.*": "read-only"}}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "run" / "workspace"
    root.mkdir(parents=True)
    (root / "data.txt").write_text("seeded\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host directory next to the workspace that anyone may enter and read, and only PSE may write."""
    folder = tmp_path / "run" / "outside"
    folder.mkdir()
    for place in (tmp_path, tmp_path / "run", folder):
        place.chmod(place.stat().st_mode | stat.S_IXOTH | stat.S_IROTH)
    return folder


def _write(ex: ToolExecutor, path: str, requester: str = "Specialist") -> ToolCallRecord:
    """The server's write_to tool, asked to write `path`."""
    return ex.execute_sync(requester, calls(("mcp.notes.write_to", {"path": path, "text": "pwned"}))).records[
        0
    ]


class TestMcpServerAttacks:
    """Each test is an attack a hostile server, or a role steering a server, would try."""

    @pytest.mark.parametrize("mode", MODES)
    def test_a_read_only_server_writes_neither_the_workspace_nor_outside_it(
        self, ws: Path, outside: Path, mode: str
    ) -> None:
        real = os.path.realpath(ws)
        with mcp_executor(ws, mode, ALL) as (ex, _):
            relative = _write(ex, "planted.txt")
            absolute = _write(ex, f"{real}/planted-abs.txt")
            beside = _write(ex, f"{outside}/planted.txt")
            task_dir = _write(ex, f"{SERVER_DIR}/planted.txt")
            read = ex.execute_sync("Specialist", calls(("mcp.notes.read", {"path": "data.txt"}))).records[0]
        assert sorted(p.name for p in ws.iterdir()) == ["data.txt"]
        assert list(outside.iterdir()) == [] and not (SERVER_DIR / "planted.txt").exists()
        for record in (absolute, beside, task_dir):
            assert record.status == "error", record  # the write itself failed inside the sandbox
        assert relative.facts.get("wrote") is None  # under fallback it wrote a throwaway copy
        assert (read.status, read.output) == ("ok", "seeded\n")  # reading is what read-only allows

    @pytest.mark.parametrize("mode", MODES)
    def test_a_read_write_servers_changes_come_back_only_through_pses_check(
        self, ws: Path, mode: str
    ) -> None:
        policy = {"Specialist": {"mcp.notes.*": "read-write"}, "Evaluator": {"mcp.notes.*": "read-only"}}
        with mcp_executor(ws, mode, policy, spec=notes_spec(workspace="read-write")) as (ex, _):
            kept = _write(ex, "out.txt")
            config = _write(ex, "conftest.py")
            evaluator = _write(ex, "eval.txt", requester="Evaluator")  # a read-only grant: nothing kept
            # the workspace as the server sees it is refreshed before each call
            (ws / "later.txt").write_text("written by PSE\n")
            seen = ex.execute_sync("Specialist", calls(("mcp.notes.read", {"path": "later.txt"}))).records[0]
        assert (kept.status, kept.facts["wrote"], kept.sandbox) == ("ok", ["out.txt"], f"{mode}-rw")
        assert (ws / "out.txt").read_text() == "pwned"
        assert not (ws / "conftest.py").exists() and config.facts["refused"][0]["path"] == "conftest.py"
        assert "[changes not kept, the workspace is unchanged there:]" in config.output
        assert evaluator.status == "ok" and not (ws / "eval.txt").exists() and "wrote" not in evaluator.facts
        assert seen.output == "written by PSE\n"

    @pytest.mark.parametrize("mode", MODES)
    def test_the_server_runs_unprivileged_with_a_scrubbed_environment(
        self, ws: Path, mode: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789abcdef")
        monkeypatch.setenv("PSE_CANARY_SETTING", "canary-setting-value")
        spec = notes_spec(env={"NOTES_LANG": "en", "NOTES_TOKEN": "tok-canary-9876543210"})
        with mcp_executor(ws, mode, ALL, spec=spec) as (ex, _):
            record = ex.execute_sync("Specialist", calls(("mcp.notes.whoami", {}))).records[0]
        seen = json.loads(record.output)
        # As root: bwrap's sandbox uid, or in fallback a uid leased for the server alone (after it).
        leased = range(65535, 65535 + Settings().sandbox_uids)
        assert seen["uid"] != 0 and (
            os.geteuid() != 0 or seen["uid"] in ({65534} if mode == "bwrap" else leased)
        )
        assert seen["caps"] == ["0000000000000000", "0000000000000000"]  # effective and bounding: none
        assert "OPENAI_API_KEY" not in seen["env"] and "PSE_CANARY_SETTING" not in seen["env"]
        assert seen["env"]["NOTES_LANG"] == "en"  # what the task gives it
        assert seen["env"]["NOTES_TOKEN"] == "[redacted:NOTES_TOKEN]"  # and its secret never leaves a tool
        assert "tok-canary" not in record.output

    @needs_bwrap
    def test_under_bwrap_a_server_reaches_no_network_unless_the_task_allows_it(self, ws: Path) -> None:
        with _listener() as port:
            with mcp_executor(ws, "bwrap", ALL) as (ex, _):
                cut = ex.execute_sync(
                    "Specialist", calls(("mcp.notes.connect", {"host": "127.0.0.1", "port": str(port)}))
                ).records[0]
            spec = notes_spec(network=True)
            with mcp_executor(ws, "bwrap", ALL, spec=spec, network=("notes",)) as (ex, _):
                allowed = ex.execute_sync(
                    "Specialist", calls(("mcp.notes.connect", {"host": "127.0.0.1", "port": str(port)}))
                ).records[0]
        assert cut.status == "error" and "connected" not in cut.output
        assert (allowed.status, allowed.output) == ("ok", "connected")

    def test_a_server_that_needs_the_network_is_refused_unless_the_task_allows_it(self, ws: Path) -> None:
        sandbox = sandbox_for(ws, Settings(sandbox="fallback"))
        with pytest.raises(
            ConfigError, match=r'mcp.notes: the server needs the network .* \[sandbox\] network = \["notes"\]'
        ):
            McpServers.start({"notes": notes_spec(network=True)}, sandbox, task_dir=SERVER_DIR)


class _Accepting(threading.Thread):
    def __init__(self, server: socket.socket) -> None:
        super().__init__(daemon=True)
        self.server = server

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.close()


@contextmanager
def _listener() -> Iterator[int]:
    """A TCP server on the host's loopback; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    _Accepting(server).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
