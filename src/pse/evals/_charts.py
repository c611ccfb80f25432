"""The report's charts, as inline SVG strings drawn here: no script, no library, nothing fetched.

Each chart is one `<svg>` with a `viewBox` (it scales to its box), a `<title>` per bar, and colours
taken from CSS classes (`c-claimed`, `c-true`, `c-false`, `c-tokens`, `grid`, `whisker`), so the
report's stylesheet decides light and dark. No `xmlns` attribute: inline SVG in HTML needs none, and
the page then holds no URL at all. Every arm name is escaped here; callers pass plain text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from pse.evals._results import ArmSummary

__all__ = ["pass_rate_chart", "tokens_chart"]

_WIDTH = 420
"""The charts' width in SVG units: near a phone's, so their text stays readable at 390 px."""
_LABEL_CHARS = 14
"""Arm names longer than this are cut (with …) under the bars; the tables show them whole."""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _short(name: str) -> str:
    return name if len(name) <= _LABEL_CHARS else name[: _LABEL_CHARS - 1] + "…"


def _fraction(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _with_ci(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if ci is None else f"{value:.2f} ({ci[0]:.2f}–{ci[1]:.2f})"


def _frame(chart_id: str, title: str, height: int, body: Sequence[str]) -> str:
    return (
        f'<svg class="chart" id="{_e(chart_id)}" viewBox="0 0 {_WIDTH} {height}" role="img" '
        f'aria-labelledby="{_e(chart_id)}-title"><title id="{_e(chart_id)}-title">{_e(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


_SERIES = (
    ("claimed", "claimed", "claimed_pass_rate"),
    ("true", "true", "true_pass_rate"),
    ("false", "false (of claimed)", "false_pass_rate"),
)


def pass_rate_chart(arms: Sequence[ArmSummary]) -> str:
    """Grouped bars per arm: claimed, true and false pass rate on 0–1, each with its 95 % CI whisker."""
    height, left, right, top, bottom = 300, 40, 8, 44, 34
    plot_w, plot_h = _WIDTH - left - right, height - top - bottom

    def y(value: float) -> float:
        return top + plot_h * (1 - value)

    body: list[str] = []
    x = left
    for key, label, _ in _SERIES:  # the legend, one line across the top
        body.append(f'<rect class="c-{key}" x="{x}" y="10" width="12" height="12" rx="2"/>')
        body.append(f'<text x="{x + 16}" y="21">{_e(label)}</text>')
        x += 16 + 8 * len(label) + 18
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        body.append(
            f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
        )
        body.append(
            f'<text class="axis" x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>'
        )
    slot = plot_w / max(1, len(arms))
    bar = min(40.0, slot * 0.8 / 3)
    for i, arm in enumerate(arms):
        start = left + slot * i + (slot - 3 * bar) / 2
        for j, (key, label, field) in enumerate(_SERIES):
            value: float | None = getattr(arm, field)
            ci: tuple[float, float] | None = getattr(arm, f"{field}_ci95")
            centre = start + bar * j + bar / 2
            tip = f"{arm.arm}: {label} pass rate {_with_ci(value, ci)}"
            if value is None:
                body.append(
                    f'<text class="axis" x="{centre:.1f}" y="{y(0) - 4:.1f}" text-anchor="middle">—'
                    f"<title>{_e(tip)}</title></text>"
                )
                continue
            bar_h = max(plot_h * value, 0.5)
            body.append(
                f'<rect class="c-{key}" x="{start + bar * j + 1:.1f}" y="{y(value):.1f}" '
                f'width="{bar - 2:.1f}" height="{bar_h:.1f}"><title>{_e(tip)}</title></rect>'
            )
            label_y = y(value) - 4
            if ci is not None:
                low, high = y(ci[0]), y(ci[1])
                body.append(
                    f'<line class="whisker" x1="{centre:.1f}" x2="{centre:.1f}" '
                    f'y1="{low:.1f}" y2="{high:.1f}"/>'
                )
                for cap in (low, high):
                    body.append(
                        f'<line class="whisker" x1="{centre - 4:.1f}" x2="{centre + 4:.1f}" '
                        f'y1="{cap:.1f}" y2="{cap:.1f}"/>'
                    )
                label_y = high - 4
            body.append(
                f'<text class="value" x="{centre:.1f}" y="{label_y:.1f}" text-anchor="middle">'
                f"{_fraction(value)}</text>"
            )
        body.append(
            f'<text x="{left + slot * i + slot / 2:.1f}" y="{height - 12}" text-anchor="middle">'
            f"{_e(_short(arm.arm))}<title>{_e(arm.arm)}</title></text>"
        )
    return _frame("chart-pass-rates", "Claimed, true and false pass rate per arm (95 % CI)", height, body)


def tokens_chart(arms: Sequence[ArmSummary]) -> str:
    """Horizontal bars per arm: tokens per true pass (an arm without a true pass says so, no bar)."""
    row, left, right, top = 34, 112, 72, 4
    height = top + row * max(1, len(arms)) + 8
    plot_w = _WIDTH - left - right
    known = [a.tokens_per_true_pass for a in arms if a.tokens_per_true_pass is not None]
    most = max(known, default=0.0) or 1.0
    body: list[str] = []
    for i, arm in enumerate(arms):
        y = top + row * i
        body.append(
            f'<text x="{left - 8}" y="{y + 19}" text-anchor="end">{_e(_short(arm.arm))}'
            f"<title>{_e(arm.arm)}</title></text>"
        )
        value = arm.tokens_per_true_pass
        if value is None:
            body.append(f'<text class="axis" x="{left}" y="{y + 19}">— (no true pass)</text>')
            continue
        width = max(plot_w * value / most, 1.0)
        text = f"{round(value):,}"
        body.append(
            f'<rect class="c-tokens" x="{left}" y="{y + 5}" width="{width:.1f}" height="20" rx="2">'
            f"<title>{_e(arm.arm)}: {text} tokens per true pass</title></rect>"
        )
        body.append(f'<text class="value" x="{left + width + 6:.1f}" y="{y + 19}">{text}</text>')
    return _frame("chart-tokens", "Tokens per true pass per arm", height, body)
