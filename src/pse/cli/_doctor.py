"""`pse doctor`: one tiny protocol exchange with each role's model, a table, and what to set."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pse._control import strip_control
from pse.cli._common import option_names
from pse.config._load import load_settings_given
from pse.doctor import DoctorReport, ExchangeResult, ModelCheck, diagnose

__all__ = ["doctor_cmd"]

out = Console()
err = Console(stderr=True)
_TABLE_WIDTH = (
    112  # the table's ten columns need it; a narrower terminal wraps its lines rather than the cells
)


def _shown(text: object) -> str:
    return escape(strip_control(str(text)))


def _mark(result: ExchangeResult | None) -> str:
    if result is None or result.valid is None:
        return "[dim]–[/]"
    return "[green]✓[/]" if result.valid else "[red]✗[/]"


def _support(value: str) -> str:
    return {"yes": "[green]yes[/]", "no": "[yellow]no[/]"}.get(value, "[dim]?[/]")


def _pair(results: dict[str, ExchangeResult]) -> str:
    return f"{_mark(results.get('unconstrained'))}/{_mark(results.get('constrained'))}"


def _row(check: ModelCheck) -> list[str]:
    reach = (
        f"[green]{check.latency_ms:.0f} ms[/]"
        if check.reachable and check.latency_ms is not None
        else "[red]no[/]"
    )
    return [
        _shown("\n".join(check.roles)),
        f"{_shown(check.model)}\n[dim]{_shown(check.url)}[/]",
        reach,
        str(check.context_tokens) if check.context_tokens else "[dim]?[/]",
        _support(check.grammar) + ("\n[red]largest: no[/]" if check.largest_grammar == "no" else ""),
        _support(check.native_tools),
        f"{check.tokens_per_s:.1f}" if check.tokens_per_s is not None else "[dim]–[/]",
        _pair(check.tool_call),
        _pair(check.verdict),
        f"[green]yes[/] {check.mode}" if check.usable else "[bold red]no[/]",
    ]


def render(report: DoctorReport) -> None:
    """The report as a table, then every problem and piece of advice with what to set."""
    for problem in report.config_errors:
        err.print(f"[bold red]configuration:[/] {_shown(problem)}", highlight=False)
    box_ = report.sandbox
    if box_.problem is not None:
        err.print(f"[bold red]sandbox:[/] {_shown(box_.problem)}", highlight=False)
    elif box_.mode is not None and report.checks:
        out.print(
            f"sandbox: {_shown(box_.mode)}, commands as uid {box_.uid}, the runs folder "
            f"{_shown(box_.runs_dir)} is in its reach",
            highlight=False,
        )
        if box_.warning:
            out.print(f"[yellow]{_shown(box_.warning)}[/]", highlight=False)
    if report.checks:
        table = Table(
            "roles", "model", "reach", "ctx", "grammar", "tools", "tok/s", "call", "verdict", "usable",
            box=box.SIMPLE_HEAD, caption="call, verdict: unconstrained / constrained (– not run)",
        )  # fmt: skip
        for check in report.checks:
            table.add_row(*_row(check))
        Console(width=max(out.width, _TABLE_WIDTH)).print(table)
    if not report.checks:
        return
    constraint = report.pse_constraint or "none yet (PSE_CONSTRAIN has no effect in this build)"
    native = "yes" if report.pse_native_tools else "no (PSE_PROTOCOL=native offers no tools in this build)"
    out.print(f"[dim]PSE's own constraint field: {_shown(constraint)}; native tools: {_shown(native)}[/]")
    for check in report.checks:
        who = _shown(", ".join(check.roles))
        for problem in check.problems:
            out.print(f"[red]✗[/] {who}: {_shown(problem)}", highlight=False)
        for advice in check.advice:
            out.print(f"[yellow]•[/] {who}: {_shown(advice)}", highlight=False)
    if report.exit_code == 0:
        out.print("[green]every role's model is usable[/]")


def doctor_cmd(
    provider: Annotated[str | None, typer.Option(help="openai or ollama, for every role.")] = None,
    model: Annotated[str | None, typer.Option(help="Model name for every role.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="API base URL.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as one JSON object.")] = False,
) -> None:
    """Check each role's model: reachable, speed, context, grammar and native tools, valid tool call and
    verdict. Exit 0 all usable, 1 something unusable, 2 configuration error."""
    given = {
        k: v for k, v in {"provider": provider, "model": model, "base_url": base_url}.items() if v is not None
    }
    settings = load_settings_given(option_names(given), **given)
    report = asyncio.run(diagnose(settings))
    if as_json:
        print(report.model_dump_json())
    else:
        render(report)
    raise typer.Exit(report.exit_code)
