"""The dashboard in real headless Chromium (Debian's, driven by Playwright; no browser download).

Starts the server on a free loopback port in a thread, opens the dashboard, starts the demo task,
watches its events arrive, reaches PASSED, opens the run page and the metrics page. Screenshots go to
the test's tmp_path (printed at the end with `-s`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import CHROMIUM, CHROMIUM_ARGS, needs_chromium, serving
from pse.config import Settings

pytestmark = needs_chromium


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    from pse.web import create_app

    with serving(create_app(Settings(runs_dir=tmp_path / "runs"))) as url:
        yield url


def test_dashboard_runs_the_demo_live_and_shows_run_and_metrics(server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

            page.goto(server + "/")
            expect(page.locator("#start-task")).to_have_value("code-delivery")
            expect(page.locator("#runs-table")).to_contain_text("no runs yet")
            page.screenshot(path=shots / "1-runs-empty.png", full_page=True)

            page.click("#start-button")
            expect(page.locator("#live-log")).to_be_visible()
            # events arrive while the run goes on: the count grows before the outcome is known
            expect(page.locator("#live-log div").first).to_contain_text(
                "cycle 1 (initial) starts with Planner"
            )
            expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=30_000)
            # one line per event (the ToolAgent's results: per call)
            assert page.locator("#live-log div").count() >= 25
            expect(page.locator("#live-log")).to_contain_text("PASSED: PASS (ALL_MET)")
            expect(page.locator("#timeline .cycle-chip")).to_have_count(2)
            expect(page.locator("#timeline .cycle-chip").nth(0)).to_contain_text("PARTIAL")
            expect(page.locator("#timeline .cycle-chip").nth(1)).to_contain_text("PASS")
            expect(page.locator("#cycle-1")).to_contain_text("✗ unmet")
            # who wrote the tests each pytest run held: the Specialist's, 2 of 7 failing on the first cycle,
            # and the task's own acceptance tests, 2 of 4
            # (tool calls and messages are under their own section, folded until asked for)
            page.locator("#messages-panel > summary").click()
            expect(page.locator("#messages-1 .test-authors")).to_have_text(
                "tests by author: task 2 passed, 2 failed · Specialist 5 passed, 2 failed"
            )
            expect(page.locator("#tokens-panel tbody tr")).to_have_count(3)
            page.screenshot(path=shots / "2-run-live-passed.png", full_page=True)

            # the run page of a finished run, opened from the history list
            page.goto(server + "/#/")
            row = page.locator("#runs-table tbody tr").first
            expect(row).to_contain_text("PASSED")
            row.locator("a").click()
            expect(page.locator("#run-outcome")).to_have_text("PASSED")
            expect(page.locator("#files li")).to_have_count(
                3
            )  # the two outputs and the task's test_acceptance.py
            page.locator("#messages-panel > summary").click()
            page.uncheck("#role-filter input[data-role=ToolAgent]")
            expect(page.locator("#messages-1 .msg.ToolAgent")).to_have_count(0)
            expect(page.locator("#messages-1 .msg.Planner")).not_to_have_count(0)
            page.locator("#files button", has_text="quicksort.py").first.click()
            expect(page.locator(".file-view pre")).to_contain_text("def quicksort")
            page.screenshot(path=shots / "3-run-page.png", full_page=True)

            page.click("#nav-metrics")
            expect(page.locator("#metric-cards")).to_contain_text("finished runs")
            expect(page.locator("#card-runs b")).to_have_text("1")
            # five charts drawn (tokens over time, per role, per cycle, outcomes, cycles to pass); the
            # scripted model is unpriced, so the cost chart is a note, not a flat line
            expect(page.locator("#charts svg.chart")).to_have_count(5)
            expect(page.locator("#cost-note")).to_contain_text("unpriced")
            point = page.locator("#chart-tokens a")
            expect(point).to_have_count(1)  # one run: one point, a link to it
            expect(page.locator("#chart-tokens circle")).to_have_count(1)
            page.screenshot(path=shots / "4-metrics.png", full_page=True)
            point.click()
            expect(page.locator("#run-outcome")).to_have_text("PASSED")
            assert errors == [], errors
        finally:
            browser.close()
    print(f"screenshots: {shots}")


def test_dashboard_shows_knowledge_retrievals_of_an_incident_review(server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(server + "/")
            page.select_option("#start-task", "incident-review")
            page.click("#start-button")
            expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
            expect(page.locator("#live-log")).to_contain_text('knowledge "database connection pool')
            expect(page.locator("#cycle-1 .retrievals")).to_contain_text("Knowledge retrievals (1)")
            expect(page.locator("#cycle-1 .retrievals li")).to_contain_text(".md:")
            page.screenshot(path=tmp_path / "incident-review.png", full_page=True)
            assert errors == [], errors
        finally:
            browser.close()


def test_a_run_page_shows_format_repairs_thoughts_and_why_a_cycle_had_no_review(
    server: str, tmp_path: Path
) -> None:
    import asyncio
    import json
    import re

    from playwright.sync_api import expect, sync_playwright

    from pse.config import load_settings
    from pse.runner import prepare_run, run_to_end
    from pse.tasks import TaskRegistry

    data = json.loads(TaskRegistry.discover(None).get("code-delivery").cassette_path.read_text())  # type: ignore[union-attr]
    turns = [(t["role"], t["content"]) for t in data["turns"]]
    plan, s_bad, _, _, _, s_fix, s_report2, _, e_pass = turns
    prose = ("Evaluator", "<think>No need to run the tests.</think>All criteria PASS. Everything is great.")
    cassette = tmp_path / "repair.json"
    cassette.write_text(
        json.dumps(
            {"turns": [{"role": r, "content": c} for r, c in [plan, s_bad, s_fix, s_report2, prose, e_pass]]}
        )
    )
    settings = load_settings(cassette=cassette, runs_dir=tmp_path / "runs", max_partial_retries=0)
    summary = asyncio.run(run_to_end(prepare_run("code-delivery", settings)))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{server}/#/run/{summary.run_id}")
            repairs = page.locator("#cycle-1 .repairs")
            expect(repairs).to_contain_text("Format repairs (1)")
            expect(repairs).to_contain_text("found no <verdict> element(s)")  # as text, never as markup
            page.locator("#cycle-1 .traffic-link button").click()  # opens the messages, at this cycle's
            expect(page).to_have_url(re.compile(r"open=messages"))
            expect(page.locator("#messages-1 details.thought summary")).to_contain_text("never parsed")
            page.locator("#messages-1 details.thought summary").click()
            expect(page.locator("#messages-1 details.thought pre")).to_have_text("No need to run the tests.")
            page.screenshot(path=tmp_path / "repairs.png", full_page=True)
            assert errors == [], errors
        finally:
            browser.close()
