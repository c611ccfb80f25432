"""The evaluation report and the dashboard's Evaluations pages in real headless Chromium.

Debian's chromium driven by Playwright, as the other browser tests do (`browser_support`: its path,
arguments and skip condition): no browser download. The report is opened from a file:// URL and as the dashboard serves
it; the dashboard's `#/evals` and `#/eval/<id>` pages from a server on a tmp evaluations directory.
Each page is checked at 1400 and 390 px wide: the key figures are visible, the hostile instance id is
shown as text (an alert dialog fails the test), nothing logs a console error or throws (a blocked
stylesheet under the report's CSP would log one), and at 390 px the document never scrolls sideways.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import CHROMIUM, CHROMIUM_ARGS, needs_chromium, serving
from eval_rows import EVAL_ID, HOSTILE_INSTANCE, HOSTILE_REASON, ROWS, write_folder
from pse.config import Settings
from pse.evals import write_report

pytestmark = needs_chromium

WIDTHS = (1400, 390)


class _Watch:
    """What a page did that it must not: console errors, uncaught exceptions, dialogs (an alert fired)."""

    def __init__(self, page: Any) -> None:
        self.problems: list[str] = []
        page.on(
            "console",
            lambda msg: self.problems.append(f"console: {msg.text}") if msg.type == "error" else None,
        )
        page.on("pageerror", lambda exc: self.problems.append(f"pageerror: {exc}"))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()


def _no_sideways_scroll(page: Any, width: int) -> None:
    if width <= 390:
        assert page.evaluate("document.documentElement.scrollWidth") <= width


def _check_report(page: Any, width: int) -> None:
    from playwright.sync_api import expect

    expect(page.locator('[data-arm="pse"][data-figure="true_pass_rate"]')).to_have_text("0.67 (0.21–0.94)")
    expect(page.locator('[data-arm="single"][data-figure="false_pass_rate"]')).to_have_text(
        "0.67 (0.21–0.94)"
    )
    expect(page.locator('[data-arm="pse"][data-figure="tokens_per_true_pass"]')).to_have_text("3,000")
    expect(page.locator("tr[data-pair='pse vs single'] td").last).to_have_text("1.000")
    expect(page.locator("svg.chart")).to_have_count(2)
    expect(page.locator("#instances th", has_text=HOSTILE_INSTANCE)).to_have_text(HOSTILE_INSTANCE)
    expect(page.get_by_text(HOSTILE_REASON, exact=True)).to_be_visible()
    # the stylesheet applied (a CSP that blocked it would leave the tables unstyled)
    assert page.evaluate("getComputedStyle(document.querySelector('table')).borderCollapse") == "collapse"
    _no_sideways_scroll(page, width)


def test_the_report_from_a_file_url(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    report = write_report(write_folder(tmp_path / "evals"))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for width in WIDTHS:
                for scheme in ("light", "dark"):
                    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
                    watch = _Watch(page)
                    page.goto(report.as_uri())
                    _check_report(page, width)
                    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
                    assert background == ("rgb(255, 255, 255)" if scheme == "light" else "rgb(13, 17, 23)")
                    page.screenshot(path=tmp_path / f"report-{width}-{scheme}.png", full_page=True)
                    assert watch.problems == [], watch.problems
                    page.close()
        finally:
            browser.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The dashboard on a free loopback port, its evaluations directory holding the hostile evaluation."""
    from pse.web import create_app

    write_folder(tmp_path / "evals")
    app = create_app(Settings(runs_dir=tmp_path / "runs", evals_dir=tmp_path / "evals"))
    with serving(app, "pse-eval-test-server") as url:
        yield url


def test_the_dashboard_evaluations_pages_and_the_served_report(server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for width in WIDTHS:
                page = browser.new_page(viewport={"width": width, "height": 900})
                watch = _Watch(page)

                page.goto(f"{server}/#/evals")
                expect(page.locator("#nav-evals")).to_have_class("active")
                table = page.locator("#evals-table")
                expect(table.locator("tbody tr")).to_have_count(1)
                expect(table).to_contain_text("tiny-suite")
                expect(table).to_contain_text("3 / 3")
                expect(table.locator(".arm-rates").nth(1)).to_have_text(
                    "single true 0.33 (0.06–0.79) · false 0.67 (0.21–0.94)"
                )
                _no_sideways_scroll(page, width)
                page.screenshot(path=tmp_path / f"evals-{width}.png", full_page=True)

                table.locator("a", has_text=EVAL_ID).click()
                expect(page).to_have_url(f"{server}/#/eval/{EVAL_ID}")
                arms = page.locator("#eval-arms")
                expect(arms.locator('[data-arm="pse"][data-figure="true_pass_rate"]')).to_have_text(
                    "0.67 (0.21–0.94)"
                )
                expect(arms.locator('[data-arm="single"][data-figure="false_pass_rate"]')).to_have_text(
                    "0.67 (0.21–0.94)"
                )
                expect(arms.locator('[data-arm="pse"][data-figure="mean_rework_cycles"]')).to_have_text(
                    "1.00"
                )
                expect(arms.locator('[data-arm="single"][data-figure="tokens_per_true_pass"]')).to_have_text(
                    "1,500"
                )
                expect(arms.locator("tbody tr")).to_have_count(16)
                expect(page.locator("#eval-paired tbody td")).to_have_text(
                    ["pse", "single", "3", "1", "1", "0", "1", "1.000"]
                )
                instances = page.locator("#eval-instances")
                expect(instances.locator("th.instance")).to_have_text(["inst-a", HOSTILE_INSTANCE, "inst-c"])
                expect(instances.get_by_text(HOSTILE_REASON, exact=True)).to_be_visible()
                links = instances.locator("a")
                expect(links).to_have_count(6)
                assert links.first.get_attribute("href") == f"#/run/{ROWS[0].run_id}"
                report = page.locator("#eval-report")
                assert report.get_attribute("href") == f"/api/evals/{EVAL_ID}/report"
                _no_sideways_scroll(page, width)
                page.screenshot(path=tmp_path / f"eval-{width}.png", full_page=True)

                # the report as the dashboard serves it, under its own CSP (header and meta)
                page.goto(f"{server}/api/evals/{EVAL_ID}/report")
                _check_report(page, width)
                assert page.locator("#instances a").first.get_attribute("href") == f"/#/run/{ROWS[0].run_id}"
                assert watch.problems == [], watch.problems
                page.close()
        finally:
            browser.close()
    print(f"screenshots: {tmp_path}")
