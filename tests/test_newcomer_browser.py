"""A newcomer's third pass at the dashboard (issue 47, items 3, 4 and 8), in real headless Chromium at 1400
and 390 px:

- a repository run's page showed no repository, base, branch, commit or change.patch: now a Repository
  section holds them, the patch as text;
- an ERROR's header opened with cycle 1's PARTIAL: now with the error, then what set it off;
- the Start form kept a stale error after another task was picked, and code-change's warning had no subject;
- cost read "0.0000 USD" on a run that spent nothing and "unpriced" on the others;
- at 390 px the token and tool-call tables scrolled sideways ("total" off-screen) and the access-token
  placeholder was cut; at 1400 px the REASON column cut at about 25 characters while the page had room.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from browser_support import Watch, dashboard, needs_chromium, scaffold_cases
from pse.config import Settings
from pse.runner import prepare_run, run_to_end
from repo_support import load_demo

pytestmark = needs_chromium
WIDTHS = [1400, 390]


@dataclass(frozen=True)
class Site:
    root: Path
    tasks: Path
    repo: Path
    passed: str
    repository: str
    error: str
    down: str


@pytest.fixture(scope="module")
def site_runs(tmp_path_factory: pytest.TempPathFactory) -> Site:
    base = tmp_path_factory.mktemp("newcomer")
    root, tasks = base / "runs", base / "tasks"
    scaffold_cases(tasks, "notes", "bare")
    demo = load_demo()
    repo = demo.make_demo_repo(base)

    def run(task: str, **options: Any) -> str:
        repository, inputs = options.pop("repo", None), options.pop("inputs", None)
        settings = Settings(runs_dir=root, tasks_dir=tasks, sandbox="fallback", **options)
        prepared = prepare_run(task, settings, repo=repository, inputs=inputs)
        return asyncio.run(run_to_end(prepared)).run_id

    return Site(
        root=root,
        tasks=tasks,
        repo=repo,
        passed=run("code-delivery"),
        repository=run("code-change", repo=repo, inputs={"REQUEST": demo.REQUEST}),
        error=run("notes"),
        down=run(
            "code-delivery",
            provider="openai",
            model="m",
            base_url="http://127.0.0.1:9/v1",
            model_max_retries=0,
        ),
    )


@pytest.fixture(scope="module")
def site(site_runs: Site) -> Iterator[tuple[Any, str]]:
    with dashboard(Settings(runs_dir=site_runs.root, tasks_dir=site_runs.tasks), "pse-web-newcomer") as found:  # type: ignore[call-arg]
        yield found


def _page(browser: Any, width: int, allow: tuple[str, ...] = ()) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.watch = Watch(page, allow)
    return page


_SIDEWAYS = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_repository_runs_page_shows_its_repository_branch_commit_and_patch(
    site: tuple[Any, str], site_runs: Site, width: int
) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, width)
    page.goto(f"{url}/#/run/{site_runs.repository}")
    panel = page.locator("#repository-panel")
    expect(panel).to_be_visible()
    trace = page.evaluate(f"() => fetch('/api/runs/{site_runs.repository}').then((r) => r.json())")
    record = trace["repository"]
    expect(page.locator("#repository-path")).to_have_text(str(site_runs.repo))
    expect(page.locator("#repository-base")).to_have_text(f"HEAD at {record['base_commit'][:12]}")
    expect(page.locator("#repository-branch")).to_have_text(f"{record['branch']} holds the run's commit")
    expect(page.locator("#repository-commit")).to_have_text(record["commit"])
    expect(page.locator("#repository-note")).to_have_text(record["note"])
    patch = page.locator("#repository-patch")
    expect(patch).to_contain_text("+    return len(text.split())")
    assert patch.text_content() == Path(record["patch"]).read_text()  # whole, as git wrote it
    added = patch.locator("span.add")
    assert added.count() >= 1 and all(t.startswith("+") for t in added.all_inner_texts())
    assert page.evaluate(_SIDEWAYS) == 0  # the patch scrolls in its own box, the page never sideways
    assert page.watch.problems == []


def test_a_run_without_a_repository_has_no_repository_section(site: tuple[Any, str], site_runs: Site) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, 1400)
    page.goto(f"{url}/#/run/{site_runs.passed}")
    expect(page.locator("#run-outcome")).to_have_text("PASSED")
    expect(page.locator("#repository-panel")).to_have_count(0)


@pytest.mark.parametrize("width", WIDTHS)
def test_an_errors_header_opens_with_the_error(site: tuple[Any, str], site_runs: Site, width: int) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, width)
    page.goto(f"{url}/#/run/{site_runs.error}")
    cause = page.locator("#run-cause")
    expect(cause).to_contain_text("cycle 2: ERROR: CassetteExhaustedError")
    said = " ".join(cause.inner_text().split())
    assert said.startswith("Why it ended: cycle 2: ERROR: CassetteExhaustedError: cassette has no turn 3")
    assert said.endswith(
        "· set off by cycle 1: Evaluator PASS → gate outputs_exist failed (missing: summary/) → PARTIAL"
    )
    assert [link.get_attribute("href").rsplit("=", 1)[1] for link in cause.locator("a").all()] == ["2", "1"]
    assert page.watch.problems == []


@pytest.mark.parametrize("width", WIDTHS)
def test_the_start_form_drops_a_stale_error_and_names_its_warnings_subject(
    site: tuple[Any, str], width: int
) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, width, allow=("400",))
    page.goto(f"{url}/")
    page.locator("#start-task").select_option("bare")
    page.locator("#start-button").click()
    error = page.locator("#start-error")
    expect(error).to_contain_text("Could not start bare: task 'bare' has no cassette to replay")
    page.locator("#start-task").select_option("code-change")
    expect(error).to_have_count(0)  # another task: the error was the other one's
    expect(page.locator("#start-warning")).to_have_text(
        "code-change works on a git repository, and this server allows none: restart it with pse serve "
        "--repo PATH to pick one here, or run pse run code-change --repo PATH"
    )
    assert page.watch.problems == []


@pytest.mark.parametrize("width", WIDTHS)
def test_cost_reads_unpriced_or_a_dash_in_the_list(
    site: tuple[Any, str], site_runs: Site, width: int
) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, width)
    page.goto(f"{url}/")
    rows = page.locator("#runs-table tr.run-row")
    expect(rows).to_have_count(4)
    cost = {run_id: rows.filter(has_text=run_id).locator("td.cost").inner_text().strip() for run_id in (
        site_runs.passed, site_runs.repository, site_runs.error, site_runs.down)}  # fmt: skip
    assert cost == {
        site_runs.passed: "unpriced",
        site_runs.repository: "unpriced",
        site_runs.error: "unpriced",
        site_runs.down: "—",  # it never reached its model: nothing spent, priced or not
    }
    assert "0.0000" not in page.locator("#runs-table").inner_text()


def test_at_1400_px_the_reason_column_shows_a_long_reason_to_the_page_s_width(
    site: tuple[Any, str], site_runs: Site
) -> None:
    browser, url = site
    page = _page(browser, 1400)
    page.goto(f"{url}/")
    reason = page.locator("#runs-table tr.run-row", has_text=site_runs.error).locator("td.reason .one-line")
    reason.wait_for()
    shown = reason.evaluate(
        """(el) => { const c = document.createElement("canvas").getContext("2d"); c.font = getComputedStyle(el).font;
                     return Math.floor(el.clientWidth / c.measureText("x").width); }"""
    )
    assert shown >= 43, f"the reason column shows about {shown} characters"  # it showed about 25
    box = page.locator(".run-list").evaluate("b => b.scrollWidth - b.clientWidth")
    assert box <= 0 and page.evaluate(_SIDEWAYS) == 0


def test_at_390_px_the_token_and_tool_call_tables_fit_and_the_token_placeholder_shows_whole(
    site: tuple[Any, str], site_runs: Site
) -> None:
    from playwright.sync_api import expect

    browser, url = site
    page = _page(browser, 390)
    page.goto(f"{url}/#/run/{site_runs.passed}")
    expect(page.locator("#run-outcome")).to_have_text("PASSED")
    tokens = page.locator("#tokens-panel .scroll")
    assert tokens.evaluate("b => b.scrollWidth - b.clientWidth") <= 0  # no sideways scroll in its box
    total = page.locator("#tokens-panel thead th").last
    expect(total).to_have_text("total")
    right = total.evaluate("th => th.getBoundingClientRect().right")
    assert right <= 390, right  # "total" on screen
    page.locator("#cycle-1 summary, #cycle-1 .tool-calls").first.scroll_into_view_if_needed()
    calls = page.locator("table.tool-calls").first
    expect(calls).to_be_attached()
    wide = page.evaluate(
        """() => [...document.querySelectorAll("table.tool-calls")].map((t) => t.closest(".scroll"))
              .filter((box) => box && box.getClientRects().length && box.scrollWidth > box.clientWidth + 1).length"""
    )
    assert wide == 0  # each tool call is a card: nothing to scroll sideways
    assert page.evaluate(_SIDEWAYS) == 0
    field = page.locator("#token")
    fits = field.evaluate(
        """(el) => { const c = document.createElement("canvas").getContext("2d"); const s = getComputedStyle(el);
                     c.font = s.font; const room = el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
                     return [c.measureText(el.placeholder).width, room]; }"""
    )
    assert fits[0] <= fits[1], fits  # "PSE_WEB_TOKEN, if needed" whole
    assert page.watch.problems == []
