"""A person decides a held tool call from the dashboard, in real Chromium (Debian's, via Playwright).

The server has a token (decisions are refused without one); the page gets it the way a person gives
it, in the session. A run waiting on disk is approved from its page and resumes there; the runs page
lists what waits; a hostile preview stays text and a denial is audited; a run executing in the server
is approved while the page follows it live.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from approval_support import HELD_CASSETTE, HELD_TASK, guarded_settings, held_run, trace_of
from browser_support import CHROMIUM, CHROMIUM_ARGS, needs_chromium, serving
from pse.config import Settings

pytestmark = needs_chromium
TOKEN = "browser-approval-token-0123456789abcdef"
HOSTILE = "<img src=x onerror=alert(1)>"


@contextlib.contextmanager
def _page(settings: Settings, hash_path: str) -> Iterator[tuple[Any, list[str]]]:
    """`hash_path` of the dashboard in Chromium, served with the token in the session; yields (page, errors).

    A dialog (an `alert` a preview smuggled in) counts as an error."""
    from playwright.sync_api import sync_playwright
    from pydantic import SecretStr

    from pse.web import create_app

    app = create_app(settings.model_copy(update={"web_token": SecretStr(TOKEN)}))
    with serving(app, "pse-web-approval-server") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("dialog", lambda dialog: (errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
            page.add_init_script(f"sessionStorage.setItem('pse-token', {json.dumps(TOKEN)})")
            page.goto(f"{url}/{hash_path}")
            yield page, errors
        finally:
            browser.close()


def test_a_person_approves_a_held_write_from_the_run_page(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings, run_id = held_run(tmp_path)
    with _page(settings, f"#/run/{run_id}") as (page, errors):
        expect(page.locator("#run-outcome")).to_have_text("AWAITING_APPROVAL")
        panel = page.locator("#approval-panel")
        expect(panel).to_contain_text("Specialist → write_file")
        expect(panel).to_contain_text("approval.Specialist.write_file")
        expect(page.locator("#approval-preview")).to_contain_text("+notes")
        expect(page.locator("#approval-preview .diff-add")).to_have_text("+notes\n")
        page.fill("#approval-reason", "notes are fine")
        page.click("#approval-approve")
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        expect(page.locator("#approval-panel")).to_have_count(0)
        audit = page.locator("#approvals-audit")
        expect(audit).to_contain_text("A1.1 Specialist → write_file approved")
        expect(audit).to_contain_text("by dashboard (PSE_WEB_TOKEN holder) via api")
        expect(audit).to_contain_text("reason: notes are fine")
        assert errors == []
    trace = trace_of(settings, run_id)
    assert trace["outcome"] == "PASSED" and trace["approvals"][0]["via"] == "api"
    assert (settings.runs_dir / run_id / "workspace" / "NOTES.md").is_file()


def test_the_runs_page_lists_what_waits_and_a_hostile_preview_stays_text(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings, run_id = held_run(tmp_path, notes=f"{HOSTILE}\n")
    with _page(settings, "#/") as (page, errors):
        pending = page.locator("#approvals-pending")
        expect(pending).to_contain_text("Pending approvals (1)")
        expect(pending.locator(".approval-row")).to_contain_text("A1.1 Specialist → write_file")
        expect(page.locator("#runs-table .run-row").first).to_contain_text("waiting for approval")
        pending.locator(f'a[href="#/run/{run_id}"]').click()
        expect(page.locator("#run-outcome")).to_have_text("AWAITING_APPROVAL")
        preview = page.locator("#approval-preview")
        expect(preview).to_contain_text(f"+{HOSTILE}")
        expect(preview.locator("img")).to_have_count(0)
        assert page.locator("img").count() == 0
        page.fill("#approval-reason", "no notes in this delivery")
        page.click("#approval-deny")
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        expect(page.locator("#approvals-audit")).to_contain_text("A1.1 Specialist → write_file denied")
        expect(page.locator("#approvals-audit")).to_contain_text("reason: no notes in this delivery")
        page.goto(page.url.split("#")[0] + "#/")
        expect(page.locator("#runs-table .run-row").first).to_contain_text("PASSED")
        expect(page.locator("#approvals-pending")).to_have_count(0)
        assert errors == []
    trace = trace_of(settings, run_id)
    assert trace["approvals"][0]["decision"] == "denied"
    assert not (settings.runs_dir / run_id / "workspace" / "NOTES.md").exists()


def test_a_run_executing_in_the_server_is_approved_while_its_page_follows_it(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    settings = guarded_settings(tmp_path).model_copy(update={"cassette": None})
    with _page(settings, "#/") as (page, errors):
        page.select_option("#start-task", HELD_TASK)
        page.select_option("#start-cassette", HELD_CASSETTE)
        page.click("#start-button")
        expect(page.locator("#run-outcome")).to_have_text("AWAITING_APPROVAL", timeout=60_000)
        expect(page.locator("#live-log")).to_contain_text("approval A1.1 needed: Specialist → write_file")
        page.click("#approval-approve-all")
        expect(page.locator("#run-outcome")).to_have_text("PASSED", timeout=60_000)
        expect(page.locator("#approvals-audit")).to_contain_text("(all such calls for this run)")
        run_id = page.url.rsplit("/", 1)[1]
        assert errors == []
    trace = trace_of(settings, run_id)
    assert trace["outcome"] == "PASSED" and trace["resumed"] == 0
    assert (trace["approvals"][0]["via"], trace["approvals"][0]["scope"]) == ("api", "run")
