"""The rules engine's output: findings per rule, summarised as JSON and a compact Markdown table."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Category", "Finding", "RulesSummary", "SourceInfo", "Window"]

Category = Literal["completeness", "consistency", "threshold", "distribution"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Window(_Model):
    """A run of consecutive rows where a rule fired."""

    start: str
    end: str
    rows: int
    peak: float | None = None


class Finding(_Model):
    """What one rule found."""

    rule: str
    kind: str
    category: Category
    title: str
    source: str
    fired: bool
    message: str
    windows: list[Window] = Field(default_factory=list)
    items: list[dict[str, Any]] = Field(default_factory=list, description="rule-specific details, capped")
    items_total: int = 0


class SourceInfo(_Model):
    """A data source as the rules saw it."""

    name: str
    path: str
    rows: int


class RulesSummary(_Model):
    """The rules engine's output (`rules_summary.json`); `to_markdown()` gives `rules_summary.md`."""

    schema_version: int = 1
    task: str
    sources: list[SourceInfo]
    findings: list[Finding]

    @property
    def fired(self) -> list[Finding]:
        """The findings whose rule fired."""
        return [f for f in self.findings if f.fired]

    def to_markdown(self) -> str:
        """A compact Markdown summary: one table row per rule, then the windows of the rules that fired."""
        lines = [
            f"# Rules summary: {self.task}",
            "",
            f"{len(self.findings)} rules over {len(self.sources)} sources "
            f"({', '.join(f'{s.path}: {s.rows} rows' for s in self.sources)}); {len(self.fired)} fired.",
            "",
            "| rule | category | fired | finding |",
            "|---|---|---|---|",
        ]
        for f in self.findings:
            message = f.message.replace("|", "\\|")  # a bare pipe would split the table cell
            lines.append(f"| {f.rule} | {f.category} | {'yes' if f.fired else 'no'} | {message} |")
        return "\n".join(lines) + "\n"
