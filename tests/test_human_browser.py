"""A person answers an escalated run from its dashboard page, in real Chromium (Debian's, via Playwright).

The server has a token (answers are refused without one); the page gets it the way a person gives
it, in the session. The run escalated after its PARTIAL cycle; the answer's note and one more cycle
take it to PASSED on the same page.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pse.config import load_settings
from pse.runner import prepare_run, run_to_end
from pse.tasks import TaskRegistry
from test_web_browser import CHROMIUM, CHROMIUM_ARGS, _free_port

pytestmark = pytest.mark.skipif(
    not CHROMIUM.is_file(), reason="Debian's chromium is not at /usr/bin/chromium"
)
TOKEN = "browser-answer-token-0123456789abcdef"


@pytest.fixture
def escalated(tmp_path: Path) -> tuple[Path, str]:
    import asyncio

    turns = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]
    cassette = tmp_path / "cassette.json"
    cassette.write_text(json.dumps({"version": 1, "turns": turns}))
    settings = load_settings(
        runs_dir=tmp_path / "runs", cassette=cassette, max_partial_retries=0, max_fail_retries=0
    )
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    assert summary.outcome == "ESCALATED"
    return tmp_path / "runs", summary.run_id


@pytest.fixture
def server(escalated: tuple[Path, str]) -> Iterator[str]:
    import uvicorn

    from pse.web import create_app

    port = _free_port()
    app = create_app(load_settings(runs_dir=escalated[0], web_token=TOKEN))
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=srv.run, name="pse-web-answer-server")
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


def test_a_person_takes_an_escalated_run_on_from_its_page(server: str, escalated: tuple[Path, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    runs, run_id = escalated
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.add_init_script(f"sessionStorage.setItem('pse-token', {json.dumps(TOKEN)})")
            page.goto(f"{server}/#/run/{run_id}")
            expect(page.locator("#run-outcome")).to_have_text("ESCALATED")
            expect(page.locator("#answer-panel")).to_be_visible()
            page.fill("#answer-note", "Values equal to the pivot are dropped: keep them.")
            page.click("#answer-resume")
            expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
            expect(page.locator("#answer-panel")).to_have_count(0)
            expect(page.locator("#timeline .cycle-chip")).to_have_count(2)
            assert errors == []
        finally:
            browser.close()
    trace = json.loads((runs / run_id / "trace.json").read_text())
    assert trace["outcome"] == "PASSED" and trace["answers"][0]["via"] == "api"
    assert "keep them" in trace["cycles"][1]["step_buffer"]


def test_a_person_answers_the_planners_questions_from_the_run_page(tmp_path: Path) -> None:
    import asyncio

    import uvicorn
    from playwright.sync_api import expect, sync_playwright

    from pse.web import create_app

    turns = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]
    ask = '<clarification>\n<question id="Q1">Keep values equal to the pivot?</question>\n</clarification>'
    cassette = tmp_path / "cassette.json"
    cassette.write_text(json.dumps({"version": 1, "turns": [{"role": "Planner", "content": ask}, *turns]}))
    settings = load_settings(
        runs_dir=tmp_path / "runs", cassette=cassette, planner_questions=True, web_token=TOKEN
    )
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    assert (summary.outcome, summary.state) == (None, "AWAITING_ANSWER")
    port = _free_port()
    srv = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=srv.run, name="pse-web-questions-server")
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
                page.add_init_script(f"sessionStorage.setItem('pse-token', {json.dumps(TOKEN)})")
                page.goto(f"http://127.0.0.1:{port}/#/run/{summary.run_id}")
                expect(page.locator("#run-outcome")).to_have_text("AWAITING_ANSWER")
                expect(page.locator("#questions-panel")).to_contain_text("Q1 Keep values equal to the pivot?")
                page.fill("#questions-text", "Yes: keep every value.")
                page.click("#questions-send")
                expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
                assert errors == []
            finally:
                browser.close()
    finally:
        srv.should_exit = True
        thread.join(timeout=30)
    trace = json.loads(Path(summary.trace).read_text())
    assert trace["answers"][0]["text"] == "Yes: keep every value." and trace["outcome"] == "PASSED"
