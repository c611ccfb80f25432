"""The report's look: its light and dark palettes, its one inline stylesheet, the CSP pinning it by hash."""

from __future__ import annotations

import base64
import hashlib

__all__ = ["DARK_PALETTE", "LIGHT_PALETTE", "REPORT_CSP", "STYLESHEET"]


# Text colours (ink … warn) are ≥ 4.5:1 on both backgrounds, bar colours ≥ 3:1 (tests/test_eval_report.py).
LIGHT_PALETTE = {
    "bg": "#ffffff", "panel": "#f6f8fa", "ink": "#1f2328", "muted": "#59636e", "line": "#d1d9e0",
    "link": "#0550ae", "pass": "#116329", "fail": "#a40e26", "warn": "#7d4e00",
    "bar-claimed": "#0969da", "bar-true": "#1a7f37", "bar-false": "#cf222e", "bar-tokens": "#8250df",
}  # fmt: skip
DARK_PALETTE = {
    "bg": "#0d1117", "panel": "#161b22", "ink": "#e6edf3", "muted": "#9198a1", "line": "#3d444d",
    "link": "#58a6ff", "pass": "#3fb950", "fail": "#ff7b72", "warn": "#d29922",
    "bar-claimed": "#4493f8", "bar-true": "#3fb950", "bar-false": "#f85149", "bar-tokens": "#ab7df8",
}  # fmt: skip


def _variables(palette: dict[str, str]) -> str:
    return " ".join(f"--{name}: {colour};" for name, colour in palette.items())


STYLESHEET = f"""
:root {{ color-scheme: light dark; {_variables(LIGHT_PALETTE)} }}
@media (prefers-color-scheme: dark) {{ :root {{ {_variables(DARK_PALETTE)} }} }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: var(--bg); color: var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }}
main {{ max-width: 1200px; margin: 0 auto; padding: 16px; }}
h1 {{ font-size: 1.5rem; margin: 0.2em 0 0.4em; overflow-wrap: anywhere; }}
h2 {{ font-size: 1.15rem; margin: 1.6em 0 0.5em; }}
a {{ color: var(--link); }}
code, pre {{ font: 0.85rem/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }}
.muted, .axis {{ color: var(--muted); fill: var(--muted); }}
.pass {{ color: var(--pass); font-weight: 600; }}
.fail {{ color: var(--fail); font-weight: 600; }}
.warn {{ color: var(--warn); font-weight: 600; }}
dl.meta {{ display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 14px; margin: 0; }}
dl.meta dt {{ color: var(--muted); }}
dl.meta dd {{ margin: 0; overflow-wrap: anywhere; }}
.scroll {{ overflow-x: auto; max-width: 100%; border: 1px solid var(--line); border-radius: 6px; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top;
  white-space: nowrap; }}
thead th {{ background: var(--panel); font-size: 0.8rem; text-transform: uppercase; letter-spacing: .03em; }}
tbody th {{ font-weight: 600; white-space: normal; min-width: 9ch; }}
table.sticky tbody th {{ position: sticky; left: 0; background: var(--bg); }}
td.num, th.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
td.text, th.text {{ white-space: normal; min-width: 12ch; max-width: 44ch; overflow-wrap: anywhere; }}
td small {{ display: block; color: var(--muted); white-space: normal; overflow-wrap: anywhere; }}
tr.first td, tr.first th {{ border-top: 2px solid var(--line); }}
details pre {{ white-space: pre-wrap; overflow-wrap: anywhere; max-height: 20em; overflow: auto;
  margin: 4px 0; padding: 6px; background: var(--panel); border-radius: 4px; }}
.charts {{ display: grid; gap: 16px;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 440px), 1fr)); }}
.charts figure {{ margin: 0; padding: 8px; border: 1px solid var(--line); border-radius: 6px; }}
figcaption {{ font-weight: 600; margin-bottom: 4px; }}
svg.chart {{ display: block; width: 100%; height: auto; }}
svg.chart text {{ fill: var(--ink); font-size: 13px; }}
svg.chart text.value {{ font-size: 11px; }}
svg.chart .grid {{ stroke: var(--line); }}
svg.chart .whisker {{ stroke: var(--ink); stroke-width: 1.5; }}
.c-claimed {{ fill: var(--bar-claimed); }} .c-true {{ fill: var(--bar-true); }}
.c-false {{ fill: var(--bar-false); }} .c-tokens {{ fill: var(--bar-tokens); }}
footer {{ margin-top: 2em; color: var(--muted); font-size: 0.85rem; }}
"""

_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLESHEET.encode()).digest()).decode()
REPORT_CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src data:; base-uri 'none'; "
    "form-action 'none'"
)
"""The report's policy: its one stylesheet (by hash) and nothing else; no script can run in it.

The page carries it in a `<meta>`; served over HTTP, add `frame-ancestors 'none'` (a header only)."""
