"""A person acts on a run from its dashboard page, in real Chromium (Debian's, via Playwright).

The server has a token (answers are refused without one); the page gets it the way a person gives
it, in the session. An escalated run is taken on with a note; a Planner's questions are answered;
both end PASSED on the same page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from browser_support import CHROMIUM, CHROMIUM_ARGS, needs_chromium, serving
from pse.config import Settings, load_settings
from pse.runner import RunSummary, prepare_run, run_to_end
from pse.tasks import TaskRegistry

pytestmark = needs_chromium
TOKEN = "browser-answer-token-0123456789abcdef"
DEMO = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())["turns"]  # type: ignore[union-attr]


def _run(tmp_path: Path, turns: list[dict[str, str]], **options: Any) -> tuple[Settings, RunSummary]:
    cassette = tmp_path / "cassette.json"
    cassette.write_text(json.dumps({"version": 1, "turns": turns}))
    settings = load_settings(runs_dir=tmp_path / "runs", cassette=cassette, web_token=TOKEN, **options)
    return settings, asyncio.run(run_to_end(prepare_run("code-delivery", settings)))


@contextlib.contextmanager
def _run_page(settings: Settings, run_id: str, frame_delay_ms: int = 0) -> Iterator[tuple[Any, list[str]]]:
    """The run's page in Chromium, served with the token in the session; yields (page, errors).

    `frame_delay_ms` makes every animation frame late, as on a loaded machine: a redraw queued by the
    event stream then fires after the page's final render, which it must not overwrite."""
    from playwright.sync_api import sync_playwright

    from pse.web import create_app

    with serving(create_app(settings), "pse-web-answer-server") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.add_init_script(f"sessionStorage.setItem('pse-token', {json.dumps(TOKEN)})")
            if frame_delay_ms:
                page.add_init_script(
                    f"window.requestAnimationFrame = (cb) => setTimeout(() => cb(performance.now()), {frame_delay_ms})"
                )
            page.goto(f"{url}/#/run/{run_id}")
            yield page, errors
        finally:
            browser.close()


def test_a_person_takes_an_escalated_run_on_from_its_page(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings, summary = _run(tmp_path, DEMO, max_partial_retries=0, max_fail_retries=0)
    assert summary.outcome == "ESCALATED"
    with _run_page(settings, summary.run_id) as (page, errors):
        expect(page.locator("#run-outcome")).to_have_text("ESCALATED")
        expect(page.locator("#answer-panel")).to_be_visible()
        page.fill("#answer-note", "Values equal to the pivot are dropped: keep them.")
        page.click("#answer-resume")
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        expect(page.locator("#answer-panel")).to_have_count(0)
        expect(page.locator("#timeline .cycle-chip")).to_have_count(2)
        assert errors == []
    trace = json.loads(Path(summary.trace).read_text())
    assert trace["outcome"] == "PASSED" and trace["answers"][0]["via"] == "api"
    assert "keep them" in trace["cycles"][1]["step_buffer"]


def test_a_person_answers_the_planners_questions_from_the_run_page(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    ask = '<clarification>\n<question id="Q1">Keep values equal to the pivot?</question>\n</clarification>'
    settings, summary = _run(tmp_path, [{"role": "Planner", "content": ask}, *DEMO], planner_questions=True)
    assert (summary.outcome, summary.state) == (None, "AWAITING_ANSWER")
    with _run_page(settings, summary.run_id, frame_delay_ms=400) as (page, errors):
        expect(page.locator("#run-outcome")).to_have_text("AWAITING_ANSWER")
        page.wait_for_timeout(800)  # every queued frame has fired by now
        expect(page.locator("#run-outcome")).to_have_text("AWAITING_ANSWER")
        expect(page.locator("#questions-panel")).to_contain_text("Q1 Keep values equal to the pivot?")
        page.fill("#questions-text", "Yes: keep every value.")
        page.click("#questions-send")
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        assert errors == []
    trace = json.loads(Path(summary.trace).read_text())
    assert trace["answers"][0]["text"] == "Yes: keep every value." and trace["outcome"] == "PASSED"
