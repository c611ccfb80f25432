"""Test-wide guards: no real network, no real model, no settings leaking in from the developer's shell."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections import Counter
from collections.abc import Iterator

import pytest

from pse.exceptions import FallbackUnusable

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: object) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return True  # AF_UNIX paths and the like never leave the machine


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_loopback(address):
        raise RuntimeError(f"test tried to reach {address!r}: tests may only talk to loopback stand-ins")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_loopback(address):
        raise RuntimeError(f"test tried to reach {address!r}: tests may only talk to loopback stand-ins")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that needs the fallback sandbox where it cannot work (PSE as root, its interpreter under a
    folder other users cannot enter) is skipped with that reason, not failed: PSE itself refuses to run
    there, with the same message (`pse run` exits 2)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if call.excinfo is not None and call.excinfo.errisinstance(FallbackUnusable):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many tests were skipped, and why: one line per reason, the most frequent first (what `make test`
    ends with; pytest's own line only counts them)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: Counter[str] = Counter()
    for report in skipped:
        longrepr = report.longrepr
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
        reasons[" ".join(reason.removeprefix("Skipped: ").split())] += 1
    terminalreporter.write_sep("-", f"{len(skipped)} skipped, and why")
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        terminalreporter.write_line(f"{count:>5}  {reason}")


@pytest.fixture(autouse=True)
def _clean_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Drop PSE_* and provider variables and leave the repo's .env unread (tests run from a temp dir)."""
    for name in list(os.environ):
        if name.startswith(("PSE_", "OPENAI_", "OLLAMA_", "DEEPSEEK_")):
            monkeypatch.delenv(name, raising=False)
    # The recorded traces and cassettes hold the offline embedder's results, and loading MiniLM costs
    # seconds: tests use the offline knowledge backend unless they choose another (tests/test_knowledge_minilm.py).
    monkeypatch.setenv("PSE_KB_BACKEND", "offline")
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    # What probes learned of servers: each test's own (stand-ins reuse ports), never the person's cache.
    from pse.models import SERVER_PROBES

    servers = tmp_path_factory.mktemp("cache") / "servers.json"
    monkeypatch.setattr(SERVER_PROBES, "cache", lambda: servers)
    SERVER_PROBES.clear()
    yield
    from pse.store import close_stores

    close_stores()  # each test's stores (a SQLite file in its runs dir, a database of its own) close with it
