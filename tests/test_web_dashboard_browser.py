"""The dashboard as a person uses it, in real headless Chromium (Debian's, via Playwright; no download).

Real runs on disk: the demo (PASSED in its second cycle), the demo with no retries (ESCALATED), the demo
against a model server that is down (ERROR), and the steps task. Each page is checked for what it
says (the causal header, the not-found page, the cycle-2 diff, the comparison, the search kept in the
URL), for how it behaves (the live view appends: an open panel stays open and the view stays where the
person left it; keyboard), at 390 px (no sideways scroll) and with axe-core (no serious or critical
violation, light and dark). With PSE_UPDATE_SCREENSHOTS=1 the screenshots of docs/web.md are rewritten
into docs/img/.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Watch,
    axe_violations,
    free_port,
    needs_axe,
    needs_chromium,
    serving,
    sideways_overflow,
)
from eval_rows import EVAL_ID, write_folder
from pse.config import Settings
from pse.runner import prepare_run, run_to_end

pytestmark = needs_chromium
DOCS_IMG = Path(__file__).parents[1] / "docs" / "img"
UPDATE_SHOTS = os.environ.get("PSE_UPDATE_SCREENSHOTS") == "1"  # read at import: the tests clear PSE_*
HOSTILE_REPORT = (
    "# Report\n\n**Artifacts**: `quicksort.py`\n\n| file | state |\n|---|---|\n| quicksort.py | revised |\n\n"
    "[run me](javascript:alert(1)) [the docs](https://example.com/docs) ![a chart](https://example.com/x.png)\n\n"
    "<script>alert('script')</script><img src=x onerror=alert('img')>"
    '<a href="javascript:alert(1)" onclick="alert(2)">click</a> <iframe src="https://example.com"></iframe>\n'
)


@dataclass(frozen=True)
class Runs:
    root: Path
    passed: str
    escalated: str
    error: str
    steps: str
    evals: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("dashboard")
    root = base / "runs"

    def run(task: str, **options: Any) -> str:
        return asyncio.run(run_to_end(prepare_run(task, Settings(runs_dir=root, **options)))).run_id

    passed = run("code-delivery")
    escalated = run("code-delivery", max_partial_retries=0, max_fail_retries=0)
    down = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there: the model is down
    error = run(
        "code-delivery", provider="openai", model="m", base_url=down, api_key="k", model_max_retries=0
    )
    steps = run("package-steps")
    write_folder(base / "evals")
    return Runs(root, passed, escalated, error, steps, base / "evals")


@contextlib.contextmanager
def _dashboard(settings: Settings) -> Iterator[tuple[Any, str]]:
    """The dashboard served on loopback and a Chromium; yields (browser, url)."""
    from playwright.sync_api import sync_playwright

    from pse.web import create_app

    with serving(create_app(settings), "pse-web-dashboard-server") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser, url
        finally:
            browser.close()


@pytest.fixture
def site(runs: Runs) -> Iterator[tuple[Any, str]]:
    with _dashboard(Settings(runs_dir=runs.root, evals_dir=runs.evals)) as found:
        yield found


def _page(browser: Any, *, width: int = 1400, scheme: str = "light", allow: tuple[str, ...] = ()) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page.watch = Watch(page, allow)
    return page


def _shot(page: Any, name: str, target: Any = None) -> None:
    """A screenshot for docs/web.md, rewritten into docs/img only with PSE_UPDATE_SCREENSHOTS=1."""
    if not UPDATE_SHOTS:
        return
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)  # no hover highlight in the picture
    (target or page).screenshot(path=DOCS_IMG / name, **({} if target else {"full_page": False}))


def test_the_run_header_says_why_each_run_ended(site: tuple[Any, str], runs: Runs) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser)
    page.goto(f"{url}/#/run/{runs.passed}")
    cause = page.locator("#run-cause")
    expect(page.locator("#run-outcome")).to_have_text("PASSED")
    expect(cause).to_have_text(
        "Why it ended: cycle 1: Evaluator PARTIAL → gate check:pytest failed → PARTIAL"
        " · cycle 2: Evaluator PASS → PASSED"
    )
    expect(cause.locator("code")).to_have_text(["check:pytest"])
    _shot(page, "run-page.png")
    # each cycle of the story links to the cycle
    cause.locator("a", has_text="cycle 2").click()
    expect(page).to_have_url(f"{url}/#/run/{runs.passed}?cycle=2")
    expect(page.locator("#cycle-2")).to_be_focused()
    expect(page.locator("#cycle-2")).to_be_in_viewport()

    page.goto(f"{url}/#/run/{runs.escalated}")
    expect(page.locator("#run-outcome")).to_have_text("ESCALATED")
    expect(cause).to_have_text(
        "Why it ended: cycle 1: Evaluator PARTIAL → gate check:pytest failed → PARTIAL → ESCALATED"
    )
    expect(page.locator("#run-reason")).to_have_text("PARTIAL (TESTS_FAILING) with every retry used")

    page.goto(f"{url}/#/run/{runs.error}")
    expect(page.locator("#run-outcome")).to_have_text("ERROR")
    # the root cause only: the model was down; not the gate checks that could not pass after it
    expect(cause).to_contain_text("cycle 1: ERROR: ModelUnavailableError: Planner's model 'm'")
    expect(cause).to_contain_text("connection failed")
    expect(cause).not_to_contain_text("gate")
    verdict = page.locator("#cycle-1 .verdict")
    expect(verdict).to_contain_text("No review: the cycle was stopped — ModelUnavailableError")
    expect(verdict).not_to_contain_text("no verdict yet")
    consequences = verdict.locator("details.consequences")
    expect(consequences.locator("summary")).to_have_text(
        "4 gate check(s) could not pass after the stop: consequences of it, not causes"
    )
    expect(consequences).not_to_have_attribute("open", "")
    expect(verdict.locator(".gate-fail li")).to_have_count(0)  # never listed as failures
    assert page.watch.problems == []

    # the dashboard tells the story `pse trace show` tells, where that module is present
    causal = pytest.importorskip("pse._causal")
    for run_id in (runs.passed, runs.escalated, runs.error, runs.steps):
        trace = json.loads((runs.root / run_id / "trace.json").read_text(encoding="utf-8"))
        shown = page.evaluate("(t) => window.pseDebug.causalLine(Object.assign(t, { live: false }))", trace)
        assert shown == causal.causal_line(trace), run_id


def test_a_message_bar_spans_its_models_own_time_when_the_trace_has_it(site: tuple[Any, str]) -> None:
    browser, url = site
    page = _page(browser)
    page.goto(f"{url}/")
    bars = page.evaluate(
        """() => window.pseDebug.timelineOf({
            index: 1, started_at: "2026-01-01T00:00:00.000+00:00", ended_at: null, tool_calls: [],
            messages: [
              { source: "Planner", content: "<plan/>", at: "2026-01-01T00:00:01.000+00:00", model_ms: 300 },
              { source: "Specialist", content: "hi", at: "2026-01-01T00:00:02.000+00:00" },
            ],
          }, Date.parse("2026-01-01T00:00:03.000+00:00")).items.map((i) => [i.start % 10000, i.end % 10000])"""
    )
    # The Planner's bar is its 0.3 s of model time, not the second since the cycle began; without a
    # model time a bar runs from the event before it.
    assert bars == [[700, 1000], [1000, 2000]]


def test_the_live_view_appends_and_keeps_what_the_person_opened(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings = Settings(runs_dir=tmp_path / "runs", scripted_latency_s=0.35)  # each model turn takes a while
    with _dashboard(settings) as (browser, url):
        page = _page(browser, width=1280)
        page.goto(f"{url}/")
        page.click("#start-button")
        first = page.locator('#timeline [data-event="m1.0"]')  # the Planner's plan
        expect(first).to_be_visible(timeout=30_000)
        expect(page.locator("#follow-log")).to_be_checked()
        first.click()
        panel = page.locator("#side-panel")
        expect(panel).to_have_attribute("data-item", "m1.0")
        expect(panel).to_contain_text("The plan")
        page.click("#raw-toggle")
        expect(page.locator("#raw-text")).to_contain_text("<plan>")
        page.evaluate("""() => {
            window.__kept = { panel: document.getElementById("side-panel"), row: document.querySelector('[data-event="m1.0"]'),
                              line: document.querySelector("#live-log div"), title: document.getElementById("run-title") };
        }""")
        # the person scrolls the page to the timeline and the log up: both stay where they are put
        page.locator("#timeline-title").evaluate(
            "h => window.scrollTo(0, h.getBoundingClientRect().top + window.scrollY - 20)"
        )
        page.locator("#live-log").evaluate(
            "log => { log.scrollTop = 0; log.dispatchEvent(new Event('scroll')); }"
        )
        expect(page.locator("#follow-log")).not_to_be_checked()
        at = page.evaluate(
            "() => ({ y: window.scrollY, top: document.getElementById('timeline-title').getBoundingClientRect().top })"
        )
        seen = int(page.locator("#event-count").text_content().split()[0])
        page.wait_for_function(
            f"() => parseInt(document.getElementById('event-count').textContent) >= {seen + 6}"
        )

        kept = page.evaluate("""() => ({
            connected: Object.values(window.__kept).every((node) => node.isConnected),
            same: document.getElementById("side-panel") === window.__kept.panel,
            raw: Boolean(document.getElementById("raw-text")),
            logTop: document.getElementById("live-log").scrollTop,
            y: window.scrollY, top: document.getElementById("timeline-title").getBoundingClientRect().top,
        })""")
        assert kept["connected"] and kept["same"] and kept["raw"], kept  # nothing was drawn again
        expect(page.locator("#raw-toggle")).to_be_focused()  # the focus stayed where the person put it
        assert kept["logTop"] == 0  # the log did not jump to the newest event
        assert abs(kept["top"] - at["top"]) <= 1 and kept["y"] >= at["y"] - 1, (at, kept)
        expect(panel).to_have_attribute("data-item", "m1.0")
        # only the status line is a live region, and it says what happened last
        assert page.locator("[aria-live]").count() == 1
        expect(page.locator("#status-line")).not_to_be_empty()

        page.check("#follow-log")  # back to following: the log shows the newest event again
        page.wait_for_function("""() => { const l = document.getElementById("live-log");
            return l.scrollTop + l.clientHeight >= l.scrollHeight - 8; }""")
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        expect(page.locator("#live-log")).to_contain_text("PASSED: PASS (ALL_MET)")
        expect(page.locator("#status-line")).to_contain_text("PASSED")
        expect(page.locator("#event-count")).to_contain_text("stream ended")
        # the end of the stream folds the trace in (plan, tokens, cost) without redrawing either
        expect(page.locator("#cost-line")).to_have_text(
            "cost unpriced (scripted has no price; set PSE_PRICES)"
        )
        assert page.evaluate("() => Object.values(window.__kept).every((node) => node.isConnected)")
        expect(panel).to_have_attribute("data-item", "m1.0")
        assert page.watch.problems == []


def test_a_live_run_is_cancelled_and_resumed_from_its_page(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with _dashboard(Settings(runs_dir=tmp_path / "runs", scripted_latency_s=0.3)) as (browser, url):
        page = _page(browser, width=1280)
        page.goto(f"{url}/")
        page.click("#start-button")
        expect(page.locator('#timeline [data-event="m1.0"]')).to_be_visible(timeout=30_000)
        page.click("#cancel-button")
        expect(page.locator("#run-outcome")).to_have_text("ERROR", timeout=30_000)
        expect(page.locator("#run-cause")).to_contain_text("ERROR: CANCELLED: cancelled from the dashboard")
        page.click("#resume-button")
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        expect(page.locator("#timeline .cycle-chip")).to_have_count(2)
        assert page.watch.problems == []


def test_the_cycle_two_fix_as_a_diff_and_the_timeline_side_panel(site: tuple[Any, str], runs: Runs) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser)
    page.goto(f"{url}/#/run/{runs.passed}")
    fix = page.locator('#changes .cycle-changes[data-cycle="2"] .file-change[data-path="quicksort.py"]')
    page.check("#diff-mode input[value=unified]")
    expect(fix).to_have_attribute("data-mode", "unified")
    expect(fix.locator(".stat-add")).to_have_text("+2")
    expect(fix.locator(".stat-del")).to_have_text("−1")
    expect(fix.locator("tr.add td.code")).to_have_text(
        [
            "added: equal = [item for item in items if item == pivot]",
            "added: return [*quicksort(smaller), *equal, *quicksort(larger)]",
        ],
        use_inner_text=False,
    )
    expect(fix.locator("tr.del td.code")).to_have_text(
        ["removed: return [*quicksort(smaller), pivot, *quicksort(larger)]"]
    )
    expect(fix.locator("tr.add td.code .hljs-keyword").first).to_have_text("for")  # syntax colours
    page.check("#diff-mode input[value=split]")
    expect(fix).to_have_attribute("data-mode", "split")
    expect(fix.locator("td.code.add")).to_have_count(2)
    expect(fix.locator("td.code.del")).to_have_count(1)
    _shot(page, "diff.png", page.locator('#changes .cycle-changes[data-cycle="2"]'))
    # cycle 1 wrote both files first: shown against an empty file, and said so
    first = page.locator('#changes .cycle-changes[data-cycle="1"] .file-change[data-path="quicksort.py"]')
    expect(first).to_contain_text("first write in this run")

    # the timeline: a bar per message and tool call; the write opens in the side panel with its diff
    cycle2 = page.locator('#timeline .tl-cycle[data-cycle="2"]')
    expect(cycle2.locator(".tl-row")).to_have_count(10)  # 6 messages, 3 tool calls, the review
    expect(cycle2.locator(".tl-row.role-Specialist").first).to_contain_text("Specialist: tool requests")
    expect(cycle2.locator(".tl-row").first).to_contain_text("tok")
    _shot(page, "timeline.png", page.locator("#timeline-panel"))
    write = cycle2.locator('[data-event="t2.0"]')
    expect(write).to_contain_text("Specialist → write_file quicksort.py")
    write.click()
    panel = page.locator("#side-panel")
    expect(panel.locator("#side-panel-title")).to_be_focused()
    expect(panel).to_contain_text("roles.Specialist.write_file")
    expect(panel.locator(".file-change .stat-add")).to_have_text("+2")
    box = panel.bounding_box()
    assert box is not None and box["height"] >= 899  # the full height of the window
    _shot(page, "side-panel.png")
    page.keyboard.press("Escape")
    expect(panel).to_have_count(0)
    expect(write).to_be_focused()  # focus goes back to the event

    # the review of cycle 1: the verdict and every gate as data, the raw record behind a toggle
    page.locator('#timeline [data-event="v1"]').click()
    expect(panel.locator("#gate-results tr")).to_have_count(5)
    expect(panel.locator("#gate-results")).to_contain_text("check:pytest")
    expect(panel.locator("#raw-text")).to_have_count(0)
    page.click("#raw-toggle")
    expect(page.locator("#raw-toggle")).to_have_attribute("aria-expanded", "true")
    expect(panel.locator("#raw-text")).to_contain_text('"reason_code": "TESTS_FAILING"')

    # keyboard: j / k walk the events, and with the panel open it follows them
    page.keyboard.press("Escape")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("j")
    expect(page.locator('[data-event="m1.0"]')).to_be_focused()
    page.keyboard.press("j")
    expect(page.locator('[data-event="m1.1"]')).to_be_focused()
    page.keyboard.press("Enter")
    expect(panel).to_have_attribute("data-item", "m1.1")
    expect(panel.locator("#side-panel-title")).to_be_focused()
    page.keyboard.press("j")
    expect(panel).to_have_attribute("data-item", "t1.0")
    page.keyboard.press("k")
    expect(panel).to_have_attribute("data-item", "m1.1")
    page.keyboard.press("Escape")
    assert page.watch.problems == []


def test_the_report_and_how_the_run_was_made(site: tuple[Any, str], runs: Runs, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser)
    page.goto(f"{url}/#/run/{runs.error}")
    info = page.locator("#run-info")
    expect(info.locator('dd[data-role="Planner"]')).to_contain_text("openai · m")
    expect(info).to_contain_text("at http://127.0.0.1:")
    expect(page.locator("#run-protocol")).to_contain_text("dsml")
    expect(page.locator("#run-sandbox")).to_contain_text("asked: auto")
    expect(page.locator("#report")).to_have_count(0)  # no report.md: no panel (and no 404 asked)

    page.goto(f"{url}/#/run/{runs.passed}")
    report = page.locator("#report .markdown")
    # the report opens with its title (task, outcome, run, why), then the Specialist's report
    expect(report.locator("h1").first).to_contain_text("code-delivery")
    expect(report.locator("li, p", has_text="Artifacts:").first).to_contain_text("quicksort.py")
    expect(page.locator('#run-info dd[data-role="Evaluator"]')).to_have_text("scripted · scripted")
    assert page.watch.problems == []

    # a model-written report is Markdown through a sanitizer: tables and emphasis stay, code does not run
    hostile = tmp_path / "runs"
    shutil.copytree(runs.root / runs.passed, hostile / runs.passed)
    (hostile / runs.passed / "report.md").write_text(HOSTILE_REPORT, encoding="utf-8")
    from pse.web import create_app

    with serving(create_app(Settings(runs_dir=hostile))) as other_url:
        page = _page(browser)
        page.goto(f"{other_url}/#/run/{runs.passed}")
        report = page.locator("#report .markdown")
        expect(report.locator("table td").first).to_have_text("quicksort.py")
        expect(report.locator("strong")).to_have_text("Artifacts")
        for tag in ("script", "img", "iframe"):
            expect(report.locator(tag)).to_have_count(0)
        # raw HTML in the Markdown is shown as the characters it is
        expect(report).to_contain_text("<script>alert('script')</script><img src=x onerror=alert('img')>")
        expect(report).to_contain_text("a chart")  # an image is its alt text, never fetched
        expect(report.locator("a")).to_have_count(2)
        assert report.locator("a", has_text="run me").get_attribute("href") is None
        docs = report.locator("a", has_text="the docs")
        assert docs.get_attribute("href") == "https://example.com/docs"
        assert docs.get_attribute("rel") == "noopener noreferrer nofollow"
        page.wait_for_timeout(300)
        assert page.watch.problems == []  # no alert, no blocked-resource error


def test_search_filters_and_paging_live_in_the_url_and_two_runs_compare(
    site: tuple[Any, str], runs: Runs
) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser)
    page.goto(f"{url}/")
    table = page.locator("#runs-table")
    expect(table.locator("tr.run-row")).to_have_count(4)
    row = table.locator("tr.run-row", has_text=runs.escalated)
    expect(row).to_contain_text("PARTIAL (TESTS_FAILING) with every retry used")
    expect(row).to_contain_text("scripted")
    took = re.compile(r"^took \d+(\.\d)? (ms|s)$")  # its duration
    expect(row.locator("td.started small")).to_have_text(took)
    expect(table.locator("tr.run-row", has_text=runs.error)).to_contain_text("infrastructure: not counted")

    page.keyboard.press("/")
    expect(page.locator("#run-search")).to_be_focused()
    page.keyboard.type("duplicate values are dropped")  # text in the Evaluator's messages
    expect(page).to_have_url(f"{url}/#/?q=duplicate+values+are+dropped")
    expect(table.locator("tr.run-row")).to_have_count(2)
    expect(table.locator(".match mark").first).to_have_text("Duplicate values are dropped")
    expect(page.locator("#search-help")).to_contain_text("2 runs match")
    page.select_option("#filter-outcome", "ESCALATED")
    expect(page).to_have_url(f"{url}/#/?q=duplicate+values+are+dropped&outcome=ESCALATED")
    expect(table.locator("tr.run-row")).to_have_count(1)
    page.reload()  # the URL is the state: the same list again
    expect(page.locator("#run-search")).to_have_value("duplicate values are dropped")
    expect(page.locator("#filter-outcome")).to_have_value("ESCALATED")
    expect(table.locator("tr.run-row")).to_have_count(1)
    page.goto(f"{url}/#/?q=connection+attempts+failed")  # an outcome reason
    expect(table.locator("tr.run-row")).to_have_count(1)
    expect(table.locator("tr.run-row")).to_contain_text(runs.error)
    page.goto(f"{url}/#/?offset=2")  # a page further down is a URL too
    expect(table.locator("tr.run-row")).to_have_count(2)
    expect(page.locator(".pager")).to_contain_text("3–4 of 4")
    page.click("text=‹ Newer")
    expect(page).to_have_url(f"{url}/#/")
    expect(table.locator("tr.run-row")).to_have_count(4)

    page.goto(f"{url}/")
    page.check(f'input[aria-label="Compare {runs.escalated}"]')
    page.check(f'input[aria-label="Compare {runs.passed}"]')
    page.click("#compare-link")
    expect(page).to_have_url(f"{url}/#/compare?a={runs.escalated}&b={runs.passed}")
    summary = page.locator("#compare-summary")
    expect(summary.locator('[data-figure="outcome"] td')).to_have_text(["ESCALATED", "PASSED"])
    expect(summary.locator('[data-figure="cycles"] td')).to_have_text(["1", "2"])
    expect(summary.locator('[data-figure="cost"] td')).to_have_text(["unpriced", "unpriced"])
    expect(summary.locator('[data-figure="provider · model"] td')).to_have_text(["scripted · scripted"] * 2)
    expect(page.locator('#compare-criteria [data-criterion="AC1"] td')).to_have_text(
        [re.compile("^✗ unmet"), re.compile("^✓ met")]
    )
    expect(page.locator('#compare-gates [data-gate="check:pytest"] td')).to_have_text(
        [re.compile("^failed"), re.compile("^passed")]
    )
    files = page.locator("#compare-files")
    page.check("#compare-diff-mode input[value=unified]")
    expect(files.locator('.file-change[data-path="quicksort.py"] tr.add')).to_contain_text(
        ["equal = [item for item in items if item == pivot]", "*equal"]
    )
    expect(files.locator('.file-change[data-path="test_quicksort.py"]')).to_contain_text("No change.")
    assert page.watch.problems == []


def test_unknown_runs_and_pages_get_a_not_found_page(site: tuple[Any, str], runs: Runs) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, allow=("404 (Not Found)",))
    page.goto(f"{url}/#/run/{runs.passed}")
    expect(page.locator("#run-outcome")).to_have_text("PASSED")
    page.goto(f"{url}/#/run/20990101-000000-nope-abcdef")
    nowhere = page.locator("#not-found")
    expect(nowhere.locator("h1")).to_have_text("No such run")
    expect(nowhere).to_contain_text("There is no run 20990101-000000-nope-abcdef on this server.")
    expect(page.locator("#run-summary")).to_have_count(0)  # not above the previous page
    expect(page.locator("#notice")).to_have_count(0)
    assert str(runs.root) not in page.content()
    nowhere.locator("a", has_text="Back to the runs").click()
    expect(page.locator("#runs-table tr.run-row")).to_have_count(4)
    page.goto(f"{url}/#/no/such/page")
    expect(page.locator("#not-found h1")).to_have_text("Page not found")
    page.goto(f"{url}/#/eval/no-such-eval")
    expect(page.locator("#not-found h1")).to_have_text("No such evaluation")
    assert page.watch.problems == []


def test_metrics_count_integers_fit_their_axes_and_link_their_points(
    site: tuple[Any, str], runs: Runs
) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser)
    page.goto(f"{url}/#/metrics")
    expect(page.locator("#card-runs b")).to_have_text("4")
    expect(page.locator("#card-infra b")).to_have_text("1")  # the run whose model was down
    # 2 of 3 judged runs passed (the infrastructure error is not in the denominator)
    expect(page.locator("#card-pass-rate b")).to_have_text("66.7%")
    expect(page.locator("#card-pass-rate small")).to_have_text("2 of 3 judged runs")
    tokens = page.locator("#card-tokens b").text_content() or ""
    assert tokens.replace(",", "").isdigit(), tokens  # an integer, not "25,650.8"
    expect(page.locator("#cost-note")).to_contain_text("unpriced")
    points = page.locator("#chart-tokens a")
    expect(points).to_have_count(4)
    expect(page.locator("#chart-tokens .legend")).to_contain_text("ERROR (infrastructure)")
    labels = [str(page.locator("#chart-tokens svg text").nth(i).text_content()) for i in range(3)]
    assert all(t.replace(",", "").isdigit() for t in labels), labels  # integer ticks
    expect(page.locator("#chart-roles .legend li")).to_have_text(["Planner", "Specialist", "Evaluator"])
    expect(page.locator("#chart-cycles .legend li").first).to_have_text("cycle 1")
    expect(page.locator("#chart-roles svg a")).to_have_count(4)  # a bar per run, each a link
    _shot(page, "metrics.png", page.locator("#charts"))
    points.nth(0).click()
    expect(page.locator("#run-outcome")).to_have_text("PASSED")
    assert page.watch.problems == []


PAGES = (
    "#/",
    "#/run/{passed}",
    "#/run/{escalated}",
    "#/run/{error}",
    "#/run/{steps}",
    "#/metrics",
    "#/compare?a={escalated}&b={passed}",
    "#/evals",
    f"#/eval/{EVAL_ID}",
    "#/run/20990101-000000-nope-abcdef",
)


@needs_axe
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_passes_axe_and_fits_a_phone(site: tuple[Any, str], runs: Runs, scheme: str) -> None:
    from playwright.sync_api import expect

    browser, url = site
    ids = {"passed": runs.passed, "escalated": runs.escalated, "error": runs.error, "steps": runs.steps}
    for width in (1400, 390):
        page = _page(browser, width=width, scheme=scheme, allow=("404 (Not Found)",))
        for path in (p.format(**ids) for p in PAGES):
            page.goto(f"{url}/{path}")
            page.wait_for_load_state("networkidle")
            expect(page.locator("main h1").first).to_be_visible()
            for detail in page.locator("main details").all():  # what a person may open counts too
                detail.evaluate("d => { d.open = true; }")
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert background == ("rgb(246, 247, 249)" if scheme == "light" else "rgb(13, 17, 23)")
            assert sideways_overflow(page) == 0, (path, width)
            if width == 1400:
                assert axe_violations(page) == [], (path, scheme)
        page.goto(f"{url}/#/run/{runs.passed}")
        page.locator('#timeline [data-event="t2.0"]').click()
        expect(page.locator("#side-panel")).to_be_visible()
        assert sideways_overflow(page) == 0
        if width == 1400:
            assert axe_violations(page) == [], "side panel"
        assert page.watch.problems == [], (scheme, width)
        page.close()


def test_theme_skip_link_and_labels(site: tuple[Any, str], runs: Runs) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, scheme="light")
    page.goto(f"{url}/")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    # every control has a name a screen reader reads
    unnamed = page.evaluate("""() => [...document.querySelectorAll("input, select, textarea, button")]
        .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.textContent.trim())
        .map((el) => el.outerHTML.slice(0, 80))""")
    assert unnamed == []
    page.select_option("#theme-select", "dark")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    page.reload()  # the choice stays
    expect(page.locator("#theme-select")).to_have_value("dark")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    page.goto(f"{url}/#/run/{runs.passed}")
    expect(page.locator("#run-outcome")).to_have_text("PASSED")
    _shot(page, "run-page-dark.png")
    page.goto(f"{url}/")
    page.select_option("#theme-select", "system")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"
    # the badge of every outcome is white on its fill (the header's badge was grey on it once)
    page.goto(f"{url}/#/run/{runs.passed}")
    colour = page.locator("#run-outcome .badge").evaluate("b => getComputedStyle(b).color")
    assert colour == "rgb(255, 255, 255)"
    assert page.watch.problems == []


def test_a_cycle_shows_the_evidence_its_checks_ran_over(site: tuple[Any, str], runs: Runs) -> None:
    """Sealed verification, readable: each check's snapshot (files, kinds, authors, hashes), the tests by
    author and the calls the tests made into the delivered module."""
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser)
    page.goto(f"{url}/#/run/{runs.passed}")
    evidence = page.locator("#cycle-2 .evidence")
    expect(evidence.locator("h4")).to_have_text("Evidence of each check")
    pytest_run = evidence.locator(".evidence-run").first
    expect(pytest_run.locator("summary")).to_have_text("run_pytest (last run): 3 file(s) sealed")
    pytest_run.locator("summary").click()
    expect(pytest_run.locator("tbody tr td:first-child")).to_have_text(
        ["quicksort.py", "test_acceptance.py", "test_quicksort.py"]
    )
    expect(pytest_run.locator("tbody tr td:nth-child(3)")).to_have_text(["Specialist", "task", "Specialist"])
    expect(pytest_run.locator(".coverage li")).to_have_text(["✓ quicksort.py: 19 call(s) from the tests"])


@needs_axe
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_verdicts_findings_are_shown_where_the_verdict_is(tmp_path: Path, scheme: str) -> None:
    """The cycle's verdict lists its findings (issue 32): severity, id, where, text; readable (axe), and
    at 390 px without sideways scroll."""
    from playwright.sync_api import expect

    from pse.events import CriterionResult, FindingRecord, VerdictRecord
    from pse.trace import CycleRecord, Trace, write_trace

    at = "2026-01-01T10:00:00.000+00:00"
    findings = [
        FindingRecord(id="F1", severity="high", text="add() overflows on big ints", criterion="AC1",
                      path="calc/core.py", line=2),
        FindingRecord(id="F2", severity="low", text="a name says too little"),
    ]  # fmt: skip
    verdict = VerdictRecord(
        status="PASS",
        reason_code="ALL_MET",
        criteria=[CriterionResult(id="AC1", met=True, finding="3 passed")],
        summary="met, but not mergeable",
        findings=findings,
    )
    trace = Trace(run_id="run-findings", task="fix-repo", started_at=at, ended_at=at, outcome="ESCALATED")
    trace.cycles = [
        CycleRecord(
            index=1, kind="initial", first_speaker="Planner", started_at=at, verdict=verdict, result="PARTIAL"
        )
    ]
    write_trace(trace, tmp_path / "runs" / trace.run_id)
    with _dashboard(Settings(runs_dir=tmp_path / "runs")) as (browser, url):
        for width in (1400, 390):
            page = _page(browser, width=width, scheme=scheme)
            page.goto(f"{url}/#/run/{trace.run_id}")
            table = page.locator("#cycle-1 table.findings")
            expect(table.locator("caption")).to_have_text("Findings (2)")
            assert [row.inner_text().split("\t") for row in table.locator("tbody tr").all()] == [
                ["high", "F1", "AC1, calc/core.py:2", "add() overflows on big ints"],
                ["low", "F2", "", "a name says too little"],
            ]
            assert sideways_overflow(page) == 0
            if width == 1400:
                assert axe_violations(page) == [], scheme
            assert page.watch.problems == []
            page.close()
