"""The dashboard shows the cycle result the engine decided, in real headless Chromium (Debian's, via
Playwright; no download): the events of a run whose PASS failed a gate, applied as the live page applies
them (`applyEvent`), make the cycle PARTIAL because the verdict event says so, never because the page
re-judges the gate.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from browser_support import CHROMIUM, CHROMIUM_ARGS, Watch, needs_chromium, serving
from pse.config import Settings
from pse.events import VerdictEvent
from test_judge_once import gated_run

pytestmark = needs_chromium

_APPLY = """([trace, events]) => {
    const run = window.pseDebug.emptyRun(trace);
    for (const ev of events) window.pseDebug.applyEvent(run, ev);
    const verdict = events.find((ev) => ev.kind === "verdict");
    return { result: run.cycles[0].result, reason: run.cycles[0].result_reason,
             line: window.pseDebug.causalLine(Object.assign(run, { live: false })),
             log: window.pseDebug.eventLine(verdict) };
}"""


def test_the_dashboard_shows_the_engines_decided_result(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from pse.web import create_app

    trace, events = asyncio.run(gated_run(tmp_path))
    cycle = trace.cycles[0]
    assert cycle.result == "PARTIAL"
    head = json.loads(trace.model_dump_json(by_alias=True))
    sent: list[Any] = [json.loads(e.model_dump_json()) for e in events]  # as the SSE stream sends them
    app = create_app(Settings(runs_dir=tmp_path / "runs"))
    with serving(app, "pse-web-judge-server") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            watch = Watch(page)
            page.goto(f"{url}/")
            page.wait_for_function("() => Boolean(window.pseDebug)")
            shown = page.evaluate(_APPLY, [head, sent])
            assert shown["result"] == "PARTIAL" and shown["reason"] == cycle.result_reason
            assert "cycle 1: Evaluator PASS → gate `check:pytest` failed → PARTIAL" in shown["line"]
            assert shown["log"].endswith("→ PARTIAL")

            # the page decides nothing: a verdict event saying PASS over the same failed gate shows PASS
            said_pass = [
                dict(ev, result="PASS", result_reason="ALL_MET") if ev["kind"] == "verdict" else ev
                for ev in sent
            ]
            shown = page.evaluate(_APPLY, [head, said_pass])
            assert (shown["result"], shown["reason"]) == ("PASS", "ALL_MET")
            assert watch.problems == []
        finally:
            browser.close()
    assert [e.result for e in events if isinstance(e, VerdictEvent)] == ["PARTIAL"]
