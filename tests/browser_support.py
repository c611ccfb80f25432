"""What the browser tests share: Debian's Chromium and its flags, and the dashboard served on loopback."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.is_file(),
    reason="Debian's chromium is not installed at /usr/bin/chromium (apt-get install chromium)",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serving(app: Any, name: str = "pse-web-test-server") -> Iterator[str]:
    """Serve `app` with uvicorn on a free loopback port in a thread; yield its base URL, stop it after."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="on")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, name=name)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


@contextlib.contextmanager
def dashboard(settings: Any, name: str) -> Iterator[tuple[Any, str]]:
    """The dashboard of `settings` served on loopback, and a headless Chromium: yields (browser, url)."""
    from playwright.sync_api import sync_playwright

    from pse.web import create_app

    with serving(create_app(settings), name) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser, url
        finally:
            browser.close()


def scaffold_cases(tasks: Path, *names: str) -> None:
    """Tasks a dashboard test needs besides the built-in ones, scaffolded into `tasks`: `notes`, whose
    expected folder its cassette never makes (ERROR after a PARTIAL; a missing file would be asked for
    before the review, a folder is the gates' alone); `broken`, an invalid task.toml the
    Start form lists but cannot start; `bare`, with no cassette and no model (cannot run offline)."""
    from pse.tasks import scaffold_task

    edits = {
        "notes": ('["result.md"]', '["result.md", "summary/"]'),
        "broken": ("expected_outputs =", "expected_output ="),
        "bare": ('cassette = "cassette.json"\n', ""),
    }
    for name in names:
        scaffold_task(name, tasks)
        toml = tasks / name / "task.toml"
        old, new = edits[name]
        toml.write_text(toml.read_text().replace(old, new))
        if name == "bare":
            (tasks / name / "cassette.json").unlink()


AXE = Path(__file__).parents[1] / "web" / "node_modules" / "axe-core" / "axe.min.js"
"""axe-core from the front-end's npm dev dependencies (`make setup` installs it; nothing is downloaded here)."""
needs_axe = pytest.mark.skipif(
    not AXE.is_file(), reason="axe-core is not installed: run `make setup` (npm ci in web/)"
)
SERIOUS = ("serious", "critical")


def axe_violations(page: Any) -> list[str]:
    """The serious and critical accessibility violations axe-core finds on the page as it is now.

    axe is evaluated through the DevTools protocol, so the dashboard's CSP (scripts from 'self' only)
    stays as it is for the page itself."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text(encoding="utf-8") + "\n;0")
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
            .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5) }))"""
    )
    return [f"{v['id']} ({v['impact']}): {v['nodes']}" for v in found if v["impact"] in SERIOUS]


def sideways_overflow(page: Any) -> int:
    """How many pixels the document is wider than the viewport (0: no horizontal scroll)."""
    return int(page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"))


class Watch:
    """What a page did that it must not: console errors, uncaught exceptions, dialogs (an alert fired).

    `allow` lists console messages a test expects (a 404 the not-found page asks for)."""

    def __init__(self, page: Any, allow: tuple[str, ...] = ()) -> None:
        self.problems: list[str] = []
        self.allow = allow
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"pageerror: {exc}"))
        page.on("dialog", self._dialog)

    def _console(self, msg: Any) -> None:
        if msg.type == "error" and not any(a in msg.text for a in self.allow):
            self.problems.append(f"console: {msg.text}")

    def _dialog(self, dialog: Any) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()
