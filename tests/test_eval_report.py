"""The evaluation report (`pse.evals.render_report`), its folder reader, and the dashboard's evaluations API.

The evaluation is built by hand (`eval_rows`: 3 instances × 2 arms, figures known in advance), with an
instance id, an outcome reason and a hidden check's output that are XSS payloads. The API is attacked
with path traversal and symlinked folders, next to a secret outside the evaluations directory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from eval_rows import EVAL_ID, HOSTILE_INSTANCE, HOSTILE_OUTPUT, HOSTILE_REASON, META, ROWS, write_folder
from pse.config import Settings
from pse.evals import EvalSummary, ResultRow, read_eval, render_report, summarize_rows, write_report
from pse.evals._report_style import DARK_PALETTE, LIGHT_PALETTE, REPORT_CSP
from pse.exceptions import UserError
from pse.web import create_app

NOW = "2026-01-01T10:06:00+00:00"
SECRET = "TOP-SECRET"


def _summary(rows: list[ResultRow] = ROWS, arms: list[str] = META["arms"]) -> EvalSummary:  # type: ignore[assignment]
    return summarize_rows(rows, eval_id=EVAL_ID, suite="tiny-suite", task="code-delivery", arms=arms, now=NOW)


class _Page(HTMLParser):
    """Every start tag with its attributes, and the text of each <style>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


# ---- the figures --------------------------------------------------------------------------------

EXPECTED = {
    "instances": ("3", "3"),
    "claimed_pass_rate": ("0.67 (0.21–0.94)", "1.00 (0.44–1.00)"),
    "true_pass_rate": ("0.67 (0.21–0.94)", "0.33 (0.06–0.79)"),
    "false_pass_rate": ("0.00 (0.00–0.66)", "0.67 (0.21–0.94)"),
    "escaped_defects": ("0", "2"),
    "first_pass_rate": ("0.33 (0.06–0.79)", "0.33 (0.06–0.79)"),
    "mean_rework_cycles": ("1.00", "0.00"),
    "handoff_failure_rate": ("0.05 (0.01–0.24)", "0.40 (0.17–0.69)"),
    "unauthorized_call_rate": ("0.00 (0.00–0.24)", "0.50 (0.19–0.81)"),
    "tokens": ("6,000", "1,500"),
    "tokens_per_true_pass": ("3,000", "1,500"),
    "cost": ("0.0060 USD", "0.0015 USD"),
    "cost_per_true_pass": ("0.0030 USD", "0.0015 USD"),
    "wall_s_per_instance": ("4.0", "2.0"),
    "outcomes": ("ESCALATED 1 · PASSED 2", "PASSED 3"),
    "hidden_check_errors": ("0", "0"),
}
"""Every cell of the arms table, worked out by hand from eval_rows' docstring (Wilson 95 % intervals)."""


def _cell(page: str, arm: str, figure: str) -> str:
    found = re.findall(rf'<td class="num" data-arm="{arm}" data-figure="{figure}">([^<]*)</td>', page)
    assert len(found) == 1, (arm, figure, found)
    return found[0]


def test_every_figure_of_the_arms_table_is_the_computed_one() -> None:
    page = render_report(_summary(), ROWS, META)
    for figure, (pse, single) in EXPECTED.items():
        assert (_cell(page, "pse", figure), _cell(page, "single", figure)) == (pse, single), figure
    assert page.count('data-figure="true_pass_rate"') == 2


def test_the_paired_table_and_the_header() -> None:
    page = render_report(_summary(), ROWS, META)
    # pse vs single on 3 shared instances: both 1, only pse 1, only single 0, neither 1, p = 1
    cells = "".join(f'<td class="num">{v}</td>' for v in (3, 1, 1, 0, 1, "1.000"))
    assert f'<tr data-pair="pse vs single"><td>pse</td><td>single</td>{cells}</tr>' in page
    assert page.count("<tr data-pair=") == 1
    assert '<dd id="meta-suite">tiny-suite</dd>' in page
    assert '<dd id="meta-task">code-delivery</dd>' in page
    assert '<dd id="meta-arms">pse, single</dd>' in page
    assert '<dd id="meta-instances">3 with results, of 3 planned</dd>' in page
    assert f'<dd id="meta-updated">{NOW}</dd>' in page
    assert page.count('<svg class="chart"') == 2


def test_undefined_figures_show_as_a_dash() -> None:
    # pse-history is planned but has no rows; pse-nogates has one run that claimed nothing
    nogates = ROWS[2].model_copy(update={"arm": "pse-nogates", "run_id": "20260101-110000-x-ng"})
    summary = _summary([*ROWS, nogates], ["pse", "single", "pse-nogates", "pse-history"])
    page = render_report(summary, [*ROWS, nogates], {**META, "arms": summary.arm_order})
    for figure in ("true_pass_rate", "claimed_pass_rate", "tokens_per_true_pass", "wall_s_per_instance"):
        assert _cell(page, "pse-history", figure) == "—"
    assert _cell(page, "pse-history", "instances") == "0"
    assert _cell(page, "pse-nogates", "false_pass_rate") == "—"  # no claimed pass: no denominator
    assert _cell(page, "pse-nogates", "tokens_per_true_pass") == "—"
    assert _cell(page, "pse-nogates", "true_pass_rate") == "0.00 (0.00–0.79)"
    assert page.count("not run yet") == 3 + 2  # pse-history on all 3 instances, pse-nogates on 2
    assert page.count("<tr data-pair=") == 6  # every pair of 4 arms
    assert "— (no true pass)" in page  # the tokens chart says so instead of drawing a bar


def test_a_rerun_instance_counts_its_last_row_only() -> None:
    rerun = ROWS[2].model_copy(
        update={"claimed_outcome": "PASSED", "claimed_pass": True, "true_pass": True, "run_id": "rerun-1"}
    )
    rows = [*ROWS, rerun]
    page = render_report(_summary(rows), rows, META)
    assert _cell(page, "pse", "true_pass_rate") == "1.00 (0.44–1.00)"
    assert "rerun-1" in page and ROWS[2].run_id not in page


# ---- hostile text -------------------------------------------------------------------------------


def test_hostile_text_from_the_rows_appears_only_escaped() -> None:
    page = render_report(_summary(), ROWS, META, dashboard_url="http://127.0.0.1:8080")
    for raw in (HOSTILE_INSTANCE, HOSTILE_REASON, HOSTILE_OUTPUT, "<img", "<b ", "onerror=alert(1)>"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the instance id, as text
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page  # the outcome reason
    assert "&lt;/pre&gt;&lt;/details&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in page  # the check's output
    parsed = _parse(page)
    tags = {tag for tag, _ in parsed.tags}
    assert "script" not in tags and "img" not in tags and "iframe" not in tags
    handlers = [(tag, name) for tag, attrs in parsed.tags for name in attrs if name.startswith("on")]
    assert handlers == []
    # the instance id is the text of a row header, whole
    assert (
        f'rowspan="2" class="text">{HOSTILE_INSTANCE.replace("<", "&lt;").replace(">", "&gt;")}</th>' in page
    )


def test_hostile_arm_names_and_run_ids_are_escaped_in_attributes() -> None:
    arm = '"><script>alert(4)</script>'
    row = ROWS[0].model_copy(update={"arm": arm, "run_id": 'x"/><script>alert(5)</script>'})
    summary = _summary([row], [arm])
    page = render_report(summary, [row], {**META, "arms": [arm]}, dashboard_url="")
    assert "<script" not in page
    parsed = _parse(page)
    assert {a["data-arm"] for t, a in parsed.tags if "data-arm" in a} == {arm}  # quoted, whole, inert
    (href,) = [a["href"] for t, a in parsed.tags if t == "a"]
    assert href == "/#/run/x%22%2F%3E%3Cscript%3Ealert%285%29%3C%2Fscript%3E"


# ---- self-contained -----------------------------------------------------------------------------


def test_without_a_dashboard_url_the_page_holds_no_url_at_all() -> None:
    page = render_report(_summary(), ROWS, META)
    assert "http://" not in page and "https://" not in page and "//" not in page.replace("://", "")
    parsed = _parse(page)
    assert "<script" not in page
    links = [attrs for tag, attrs in parsed.tags if tag == "link"]
    assert links == [{"rel": "icon", "href": "data:,"}]  # no stylesheet, no font, nothing fetched
    assert [a for t, a in parsed.tags if t == "a"] == []
    assert not [a for _, attrs in parsed.tags for a in ("src", "srcset", "xmlns") if a in attrs]


def test_with_a_dashboard_url_the_only_urls_are_the_run_links() -> None:
    page = render_report(_summary(), ROWS, META, dashboard_url="http://127.0.0.1:8080/")
    hrefs = [attrs["href"] for tag, attrs in _parse(page).tags if tag == "a"]
    assert hrefs == [
        f"http://127.0.0.1:8080/#/run/{r.run_id}"
        for r in sorted(ROWS, key=lambda r: (META["instances"].index(r.instance), r.arm))
    ]
    assert len(re.findall(r"https?://", page)) == len(ROWS) == 6


def test_a_dashboard_url_must_be_http_or_a_path() -> None:
    for bad in ("javascript:alert(1)", "data:text/html,x", "ftp://host"):
        with pytest.raises(UserError, match="dashboard URL"):
            render_report(_summary(), ROWS, META, dashboard_url=bad)


def test_the_page_policy_allows_exactly_its_one_stylesheet() -> None:
    page = render_report(_summary(), ROWS, META)
    parsed = _parse(page)
    (style,) = parsed.styles
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in REPORT_CSP
    assert "default-src 'none'" in REPORT_CSP and "script-src" not in REPORT_CSP
    metas = [a for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert metas == [{"http-equiv": "Content-Security-Policy", "content": REPORT_CSP}]
    assert not [t for t, a in parsed.tags if "style" in a]  # a style attribute would be blocked


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("palette", [LIGHT_PALETTE, DARK_PALETTE], ids=["light", "dark"])
def test_colours_meet_the_contrast_ratios(palette: dict[str, str]) -> None:
    for background in ("bg", "panel"):
        for text in ("ink", "muted", "link", "pass", "fail", "warn"):
            assert _contrast(palette[text], palette[background]) >= 4.5, (text, background)
        for bar in ("bar-claimed", "bar-true", "bar-false", "bar-tokens"):  # graphics: 3:1
            assert _contrast(palette[bar], palette[background]) >= 3.0, (bar, background)


# ---- the folder ---------------------------------------------------------------------------------


def test_read_eval_skips_the_torn_last_line_and_computes_the_missing_summary(tmp_path: Path) -> None:
    folder = write_folder(tmp_path)
    meta, rows, summary = read_eval(folder)
    assert rows == ROWS
    assert meta == META
    assert summary == _summary()  # updated_at: the last row's finished_at
    assert summary.updated_at == NOW


def test_read_eval_uses_summary_json_when_there_is_one(tmp_path: Path) -> None:
    folder = write_folder(tmp_path, summary=True)
    data = json.loads((folder / "summary.json").read_text())
    data["updated_at"] = "2030-01-01T00:00:00+00:00"
    (folder / "summary.json").write_text(json.dumps(data))
    assert read_eval(folder)[2].updated_at == "2030-01-01T00:00:00+00:00"
    (folder / "summary.json").write_text("{not json")  # broken: computed from the rows again
    assert read_eval(folder)[2] == _summary()


def test_read_eval_refuses_what_is_not_an_evaluation_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"holds no eval\.json"):
        read_eval(tmp_path)
    (tmp_path / "eval.json").write_text(json.dumps({"eval_id": "x"}))
    with pytest.raises(UserError, match="not an evaluation's description"):
        read_eval(tmp_path)


def test_read_eval_follows_no_symlink(tmp_path: Path) -> None:
    real = write_folder(tmp_path / "real")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "eval.json").symlink_to(real / "eval.json")
    with pytest.raises(UserError, match=r"holds no eval\.json"):
        read_eval(linked)
    (linked / "eval.json").unlink()
    (linked / "eval.json").write_text(json.dumps(META))
    (linked / "results.jsonl").symlink_to(real / "results.jsonl")
    assert read_eval(linked)[1] == []  # a symlinked results file reads as absent
    with pytest.raises(UserError):
        read_eval(tmp_path / "folder-link")  # absent
    (tmp_path / "folder-link").symlink_to(real, target_is_directory=True)
    with pytest.raises(UserError, match=r"holds no eval\.json"):
        read_eval(tmp_path / "folder-link")


def test_write_report_writes_the_rendered_page_whole(tmp_path: Path) -> None:
    folder = write_folder(tmp_path)
    path = write_report(folder, dashboard_url="http://127.0.0.1:8080")
    assert path == folder / "report.html"
    meta, rows, summary = read_eval(folder)
    assert path.read_text(encoding="utf-8") == render_report(summary, rows, meta, "http://127.0.0.1:8080")
    assert sorted(p.name for p in folder.iterdir()) == ["eval.json", "report.html", "results.jsonl"]


# ---- the dashboard API --------------------------------------------------------------------------

LOCAL = "http://127.0.0.1"
TOKEN = "s3cret-token-for-the-tests-0123456789"


@pytest.fixture
def evals(tmp_path: Path) -> Path:
    """The evaluation, broken folders beside it, and a symlink to an evaluation outside holding a secret."""
    root = tmp_path / "evals"
    write_folder(root)
    (root / "broken").mkdir()
    (root / "broken" / "eval.json").write_text("{")
    (root / "empty").mkdir()
    (root / "stray.txt").write_text("not a folder")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "eval.json").write_text(json.dumps({**META, "suite": SECRET}))
    outside = tmp_path / "outside"
    write_folder(outside)
    secret = json.loads((outside / EVAL_ID / "eval.json").read_text())
    (outside / EVAL_ID / "eval.json").write_text(json.dumps({**secret, "suite": SECRET}))
    (root / "linked").symlink_to(outside / EVAL_ID, target_is_directory=True)
    return root


@pytest.fixture
def client(tmp_path: Path, evals: Path) -> Iterator[TestClient]:
    app = create_app(Settings(runs_dir=tmp_path / "runs", evals_dir=evals))
    with TestClient(app, base_url=LOCAL) as c:
        yield c


def test_the_list_holds_the_readable_evaluations_only(client: TestClient) -> None:
    response = client.get("/api/evals")
    assert response.status_code == 200
    assert SECRET not in response.text
    (item,) = response.json()
    assert item == {
        "eval_id": EVAL_ID,
        "suite": "tiny-suite",
        "task": "code-delivery",
        "description": "three instances, two arms",
        "arms": ["pse", "single"],
        "instances": 3,
        "finished_instances": 3,
        "updated_at": NOW,
        "rates": {
            arm: {
                "instances": 3,
                "true_pass_rate": s.true_pass_rate,
                "true_pass_rate_ci95": list(s.true_pass_rate_ci95 or ()),
                "false_pass_rate": s.false_pass_rate,
                "false_pass_rate_ci95": list(s.false_pass_rate_ci95 or ()),
            }
            for arm, s in _summary().arms.items()
        },
    }
    assert item["rates"]["single"]["false_pass_rate"] == pytest.approx(2 / 3)


def test_the_list_of_an_absent_evaluations_directory_is_empty(tmp_path: Path) -> None:
    app = create_app(Settings(runs_dir=tmp_path / "runs", evals_dir=tmp_path / "nowhere"))
    with TestClient(app, base_url=LOCAL) as c:
        assert c.get("/api/evals").json() == []
    assert not (tmp_path / "nowhere").exists()  # a GET creates nothing


def test_one_evaluation_has_its_meta_summary_and_rows(client: TestClient) -> None:
    response = client.get(f"/api/evals/{EVAL_ID}")
    assert response.status_code == 200
    data = response.json()
    assert data["meta"] == META
    assert EvalSummary.model_validate(data["summary"]) == _summary()
    assert [ResultRow.model_validate(r) for r in data["rows"]] == ROWS


def test_the_report_is_served_as_html_under_its_own_policy(client: TestClient) -> None:
    response = client.get(f"/api/evals/{EVAL_ID}/report")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-security-policy"] == f"{REPORT_CSP}; frame-ancestors 'none'"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    page = response.text
    assert _cell(page, "single", "false_pass_rate") == "0.67 (0.21–0.94)"
    assert f'href="/#/run/{ROWS[0].run_id}"' in page  # this dashboard's own run page
    assert HOSTILE_INSTANCE not in page


def test_an_unknown_evaluation_is_404(client: TestClient) -> None:
    for suffix in ("", "/report"):
        assert client.get(f"/api/evals/no-such-eval{suffix}").status_code == 404


@pytest.mark.parametrize(
    "eval_id",
    [
        "..",
        "%2e%2e",
        ".hidden",
        "linked",
        "broken",
        "empty",
        "stray.txt",
        "a%2Fb",
        "..%2f..%2foutside%2feval-1",
        "..%2F",
        f"{EVAL_ID}%2F..%2F..%2Foutside",
        "%2Fetc%2Fpasswd",
        "a" * 300,
        "eval-1;rm",
        "eval-1%00",
    ],
)
def test_evaluation_ids_never_leave_the_evaluations_directory(client: TestClient, eval_id: str) -> None:
    for suffix in ("", "/report"):
        response = client.get(f"/api/evals/{eval_id}{suffix}")
        assert response.status_code in {400, 404}, (eval_id, suffix, response.status_code)
        assert SECRET not in response.text


def test_the_evaluations_api_needs_the_token_when_one_is_set(tmp_path: Path, evals: Path) -> None:
    app = create_app(Settings(runs_dir=tmp_path / "runs", evals_dir=evals, web_token=TOKEN))
    with TestClient(app, base_url=LOCAL) as c:
        for path in ("/api/evals", f"/api/evals/{EVAL_ID}", f"/api/evals/{EVAL_ID}/report"):
            assert c.get(path).status_code == 401
            assert c.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
