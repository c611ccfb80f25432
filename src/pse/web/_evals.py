"""The dashboard's evaluations API: the folders of `settings.evals_dir`, read-only, behind `require_token`.

An evaluation id is a folder name, checked against `EVAL_ID_PATTERN` before the disk is touched (400
otherwise), of a real directory directly inside the evaluations directory. Everything is read through
`read_eval`, which opens the folder and each file with `O_NOFOLLOW` from the evaluations directory: a
symlinked folder or file reads as absent (404), and nothing outside the evaluations directory is ever
read. The evaluations directory itself is trusted as configured, like the runs directory.

The report is rendered from the folder's data on each request (not the report.html on disk, which may
be stale) and served under the report's own Content-Security-Policy: its one stylesheet, by hash, and
nothing else — no script can run in it, in the dashboard's origin or anywhere.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response

from pse.evals import EvalSummary, ResultRow, read_eval, render_report
from pse.evals._eval_folder import read_eval_summary
from pse.evals._report_style import REPORT_CSP
from pse.evals._results import latest_rows
from pse.exceptions import UserError
from pse.web._schemas import EvalArmRates, EvalListItem, EvalPage
from pse.web._security import require_token

__all__ = ["EVAL_ID_PATTERN", "MAX_LISTED_EVALS", "REPORT_HEADERS", "router"]

EVAL_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
"""A whole evaluation id (`fullmatch`): a plain folder name; no `/`, no leading dot, so never `..`."""
MAX_LISTED_EVALS = 500
"""Most evaluations `GET /api/evals` returns (the newest)."""
REPORT_HEADERS = {
    "Content-Security-Policy": f"{REPORT_CSP}; frame-ancestors 'none'",
    "Cache-Control": "no-store",
}
"""The served report's headers; `GuardMiddleware` adds the others (nosniff, no-referrer, DENY)."""

router = APIRouter(prefix="/api", dependencies=[Depends(require_token)])


def evals_root(request: Request) -> Path:
    """The evaluations directory's real path (it may not exist yet: then there are no evaluations)."""
    root: Path = request.app.state.evals_root
    return root


def _folder(request: Request, eval_id: str) -> Path:
    if not EVAL_ID_PATTERN.fullmatch(eval_id):
        raise HTTPException(
            400, f"{eval_id[:80]!r} is not an evaluation id (a folder name: letters, digits, . _ -)"
        )
    return evals_root(request) / eval_id


def _read(request: Request, eval_id: str) -> tuple[dict[str, Any], list[ResultRow], EvalSummary]:
    try:
        return read_eval(_folder(request, eval_id))
    except UserError:
        raise HTTPException(404, f"no readable evaluation {eval_id!r} in the evaluations directory") from None


def _list_item(eval_id: str, meta: dict[str, Any], summary: EvalSummary) -> EvalListItem:
    rates = {
        name: EvalArmRates(
            instances=arm.instances,
            true_pass_rate=arm.true_pass_rate,
            true_pass_rate_ci95=arm.true_pass_rate_ci95,
            false_pass_rate=arm.false_pass_rate,
            false_pass_rate_ci95=arm.false_pass_rate_ci95,
        )
        for name, arm in summary.arms.items()
    }
    return EvalListItem(
        eval_id=eval_id,
        suite=summary.suite,
        task=summary.task,
        description=meta["description"],
        arms=summary.arm_order,
        instances=len(meta["instances"]),
        finished_instances=summary.instances,
        updated_at=summary.updated_at,
        rates=rates,
    )


@router.get("/evals")
def list_evals(request: Request) -> list[EvalListItem]:
    """Every folder of the evaluations directory holding a readable eval.json, newest update first.

    Symlinked folders, folders without eval.json and broken ones are left out, not errors.
    """
    root = evals_root(request)
    try:
        with os.scandir(root) as scan:
            names = [
                e.name for e in scan if EVAL_ID_PATTERN.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
            ]
    except OSError:  # no evaluations directory yet
        return []
    items = []
    for name in names:
        try:
            meta, summary = read_eval_summary(root / name)
        except (UserError, ValueError):
            continue
        items.append(_list_item(name, meta, summary))
    items.sort(key=lambda item: (item.updated_at, item.eval_id), reverse=True)
    return items[:MAX_LISTED_EVALS]


@router.get("/evals/{eval_id}")
def get_eval(eval_id: str, request: Request) -> EvalPage:
    """eval.json, the summary, and the rows it counts (the last per instance and arm)."""
    meta, rows, summary = _read(request, eval_id)
    return EvalPage(meta=meta, summary=summary, rows=latest_rows(rows))


@router.get("/evals/{eval_id}/report")
def get_report(eval_id: str, request: Request) -> Response:
    """The evaluation's HTML report, rendered now; its run links point at this dashboard's run pages."""
    meta, rows, summary = _read(request, eval_id)
    page = render_report(summary, rows, meta, dashboard_url=str(request.scope.get("root_path", "")))
    return Response(page, media_type="text/html; charset=utf-8", headers=REPORT_HEADERS)
