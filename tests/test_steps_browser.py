"""The run page's Steps panel, in real Chromium (Debian's, via Playwright).

The built-in `package-steps` task runs offline to PASSED (S1, then S2 and S3 at once, S3 PARTIAL once
then PASS, then the final review). Its page draws the plan as a graph in columns by dependency depth;
a step opens its attempts, reviews, messages and tool calls; the live page follows `step` events; the
panel fits a 390 px phone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from browser_support import CHROMIUM, CHROMIUM_ARGS, needs_chromium, serving
from pse.config import Settings, load_settings
from pse.runner import RunSummary, prepare_run, run_to_end

pytestmark = needs_chromium


def _run(tmp_path: Path) -> tuple[Settings, RunSummary]:
    settings = load_settings(runs_dir=tmp_path / "runs")
    summary = asyncio.run(run_to_end(prepare_run("package-steps", settings)))
    assert summary.outcome == "PASSED"
    return settings, summary


@contextlib.contextmanager
def _browser(settings: Settings, width: int = 1280) -> Iterator[tuple[Any, str, list[str]]]:
    """A page in Chromium and the dashboard's URL; yields (page, url, errors)."""
    from playwright.sync_api import sync_playwright

    from pse.web import create_app

    with serving(create_app(settings), "pse-web-steps-server") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            yield page, url, errors
        finally:
            browser.close()


def test_the_steps_panel_draws_the_graph_and_opens_a_step(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings, summary = _run(tmp_path)
    with _browser(settings) as (page, url, errors):
        page.goto(f"{url}/#/run/{summary.run_id}")
        expect(page.locator("#run-outcome")).to_have_text("PASSED")
        nodes = page.locator("#steps-panel .step-node")
        expect(nodes).to_have_count(3)
        s1, s2, s3 = (page.locator(f'.step-node[data-step="{s}"]') for s in ("S1", "S2", "S3"))
        x = {name: node.bounding_box()["x"] for name, node in (("S1", s1), ("S2", s2), ("S3", s3))}
        assert x["S1"] < x["S2"] and x["S1"] < x["S3"] and x["S2"] == x["S3"], x  # columns by depth
        expect(s1).to_contain_text("PASS")
        expect(s1).to_contain_text("1 attempt")
        expect(s2).to_contain_text("after S1")
        expect(s3).to_contain_text("2 attempts")
        expect(s3.locator(".step-status")).to_have_text("PASS")
        expect(s3).to_have_attribute("aria-expanded", "false")
        expect(page.locator("#step-details")).to_have_count(0)

        s3.click()
        details = page.locator("#step-details")
        expect(details).to_be_visible()
        expect(s3).to_have_attribute("aria-expanded", "true")
        expect(page.locator('.step-node[data-step="S3"]')).to_be_focused()  # focus stays on the node
        expect(details.locator(".step-attempt")).to_have_count(2)
        first, second = details.locator(".step-attempt").nth(0), details.locator(".step-attempt").nth(1)
        expect(first).to_contain_text("PARTIAL")
        expect(first).to_contain_text("OUTPUT_FORMAT")
        expect(first).to_contain_text("✗ unmet")
        expect(second).to_contain_text("PASS")
        expect(second).to_contain_text("the step buffer it got")
        expect(details).to_contain_text("words: 8")  # the second attempt's tool call output
        expect(second.locator("table.tool-calls")).to_contain_text("words: 8")
        expect(first.locator("table.tool-calls")).not_to_contain_text("words: 8")
        expect(details.locator(".msg")).not_to_have_count(0)
        assert "S2" not in " ".join(details.locator(".msg header").all_text_contents())  # S3's messages only

        page.keyboard.press("Enter")  # the focused node closes its details again, from the keyboard
        expect(page.locator("#step-details")).to_have_count(0)
        page.locator('.step-node[data-step="S1"]').focus()
        page.keyboard.press("Enter")
        expect(page.locator("#step-details")).to_contain_text("AC1")
        assert errors == []


def test_the_steps_panel_fits_a_phone(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings, summary = _run(tmp_path)
    with _browser(settings, width=390) as (page, url, errors):
        page.goto(f"{url}/#/run/{summary.run_id}")
        expect(page.locator("#steps-panel .step-node")).to_have_count(3)
        page.locator('.step-node[data-step="S3"]').click()
        expect(page.locator("#step-details")).to_contain_text("words: 8")
        for detail in page.locator("#step-details details").all():
            detail.evaluate("d => { d.open = true; }")
        panel = page.locator("#steps-panel")
        fits = panel.evaluate("p => p.scrollWidth <= p.clientWidth + 1")
        assert fits, panel.evaluate("p => [p.scrollWidth, p.clientWidth]")
        box = panel.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 391, box
        assert errors == []


def test_the_live_page_follows_step_events(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings = load_settings(runs_dir=tmp_path / "runs")
    with _browser(settings) as (page, url, errors):
        page.goto(f"{url}/")
        page.select_option("#start-task", "package-steps")
        page.click("#start-button")
        expect(page.locator("#live-log")).to_be_visible()
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        log = page.locator("#live-log")
        expect(log).to_contain_text("step S1 attempt 1 started")
        expect(log).to_contain_text("step S2 attempt 1 started")
        expect(log).to_contain_text("step S3 attempt 1: PARTIAL (OUTPUT_FORMAT)")
        expect(log).to_contain_text("step S3 attempt 2: PASS (ALL_MET)")
        expect(page.locator('.step-node[data-step="S3"]')).to_contain_text("2 attempts")

        # applyEvent keeps a cycle's attempts: a begun attempt, then its end replaces it
        seen = page.evaluate("""async () => {
            const { emptyRun, applyEvent, stepsPanel, eventLine } = window.pseDebug;
            const run = emptyRun({ run_id: "r", task: "t" });
            applyEvent(run, { kind: "cycle_start", cycle: 1, cycle_kind: "initial", first_speaker: "Planner" });
            const begun = { step: "S2", attempt: 1, started_at: "2026-01-01T00:00:00+00:00", result: "" };
            applyEvent(run, { kind: "step", cycle: 1, attempt: begun });
            applyEvent(run, { kind: "step", cycle: 1, attempt: Object.assign({}, begun, { step: "S3" }) });
            const after = run.cycles[0].steps.length;
            const ended = Object.assign({}, begun, { result: "PASS", result_reason: "ALL_MET" });
            applyEvent(run, { kind: "step", cycle: 1, attempt: ended });
            const panel = await stepsPanel(run);
            return { after, steps: run.cycles[0].steps.map((a) => `${a.step}/${a.attempt}/${a.result}`),
                     nodes: panel.querySelectorAll(".step-node").length,
                     running: panel.querySelector('.step-node[data-step="S3"] .step-status').textContent,
                     line: eventLine({ kind: "step", cycle: 1, attempt: begun }) };
        }""")
        assert seen == {
            "after": 2,
            "steps": ["S2/1/PASS", "S3/1/"],
            "nodes": 2,
            "running": "running",
            "line": "step S2 attempt 1 started",
        }
        assert errors == []
