"""`pse kb build TASK` and `pse kb search TASK QUERY`: the task's knowledge base from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from pse.cli._common import option_names
from pse.config._load import load_settings_given
from pse.exceptions import UserError
from pse.knowledge import MAX_K, KnowledgeBase, citations_of
from pse.runner import registry_for

__all__ = ["kb_app"]

kb_app = typer.Typer(
    help="Build and search a task's knowledge base (tasks/<task>/knowledge/).",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()

TasksDir = Annotated[Path | None, typer.Option("--tasks-dir", help="Extra tasks directory (PSE_TASKS_DIR).")]


def _knowledge_base(task: str, tasks_dir: Path | None) -> KnowledgeBase:
    given = {"tasks_dir": tasks_dir} if tasks_dir is not None else {}
    settings = load_settings_given(option_names(given), **given)
    found = registry_for(settings).get(task)
    if found.knowledge_dir is None:
        raise UserError(
            f"task {task!r} has no knowledge folder; create {found.dir / 'knowledge'} and put .md or .txt "
            "files in it"
        )
    return KnowledgeBase(found.knowledge_dir, settings, task=task)


@kb_app.command("build")
def build_cmd(
    task: str,
    force: Annotated[bool, typer.Option("--force", help="Re-embed every file.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the build report as JSON.")] = False,
    tasks_dir: TasksDir = None,
) -> None:
    """Index the task's knowledge folder; only new and changed files are embedded again.

    An index built with another embedder (e.g. `auto` now finds the embeddings extra) is re-embedded whole.
    """
    report = _knowledge_base(task, tasks_dir).build(force=force)
    if as_json:
        print(report.model_dump_json())
        return
    state = "rebuilt" if report.full_rebuild else ("updated" if report.changed else "up to date")
    out.print(
        f"{task}: index {state} — {report.files} file(s), {report.chunks} chunk(s); "
        f"embedded {len(report.embedded)} file(s) ({report.chunks_embedded} chunks), reused "
        f"{len(report.reused)}, removed {len(report.removed)} in {report.seconds:.2f}s",
        highlight=False,
    )
    out.print(
        f"  backend {escape(report.backend)}: {escape(report.embedder)} ({escape(report.backend_reason)})",
        highlight=False,
    )
    if report.previous_embedder is not None:
        out.print(
            f"  [yellow]replaced[/] an index built with {escape(report.previous_embedder)}: every file "
            "was embedded again",
            highlight=False,
        )
    for name in report.embedded:
        out.print(f"  embedded {escape(name)}", highlight=False)
    for name in report.removed:
        out.print(f"  removed  {escape(name)}", highlight=False)
    for name in report.skipped:
        out.print(f"  [yellow]skipped[/]  {escape(name)}", highlight=False)
    out.print(f"[dim]index: {escape(report.index_dir)}[/]", highlight=False)


@kb_app.command("search")
def search_cmd(
    task: str,
    query: str,
    k: Annotated[int, typer.Option("--k", min=1, max=MAX_K, help="How many results.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    tasks_dir: TasksDir = None,
) -> None:
    """Search the task's knowledge base; each result cites its file, lines and score."""
    kb = _knowledge_base(task, tasks_dir)
    hits = kb.search(query, k)
    built = kb.last_build
    if built is not None and built.embedded:  # a rebuild, said: e.g. the first search with another backend
        Console(stderr=True).print(
            f"[dim]built the {escape(built.backend)} index of {escape(task)} first: embedded "
            f"{len(built.embedded)} file(s) into {escape(built.index_dir)} "
            "(each backend keeps its own index)[/]",
            highlight=False,
        )
    if as_json:
        print(json.dumps({"query": query, "results": [h.model_dump() for h in hits]}))
        return
    if not hits:
        out.print(f"no knowledge matches {query!r}", highlight=False)
        return
    for hit, cite in zip(hits, citations_of(hits), strict=True):
        out.print(
            f"[bold]{hit.rank}.[/] {hit.citation.label}  score {hit.score:.3f} "
            f"(bm25 {hit.lexical:.2f}, vector {hit.vector:.2f})  [dim]{escape(cite['heading'])}[/]",
            highlight=False,
        )
        excerpt = " ".join(hit.text.split())
        out.print("   " + escape(excerpt[:240] + " …" if len(excerpt) > 240 else excerpt), highlight=False)
