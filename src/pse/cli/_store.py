"""`pse store`: the run store's state, and re-indexing a runs folder from its traces."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from pse.cli._common import RunsDir, command_settings, out, shown
from pse.store import SCHEMA_VERSION, open_store, public_store_url, store_exists, store_url_of

__all__ = ["store_app"]

store_app = typer.Typer(
    no_args_is_help=True,
    help="The run store (SQLite in the runs folder, or PSE_STORE_URL).",
    add_completion=False,
)


@store_app.command("rebuild")
def store_rebuild(runs_dir: RunsDir = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Re-index every run of the runs folder from its trace, and drop rows whose run folder is gone."""
    settings = command_settings(runs_dir=runs_dir)
    store = open_store(settings)
    report = store.rebuild(settings.runs_dir)
    if as_json:
        print(
            json.dumps(
                {
                    "store": store.url,
                    "indexed": report.indexed,
                    "skipped": report.skipped,
                    "dropped": report.dropped,
                }
            )
        )
        return
    out.print(f"{shown(store.url)}: indexed {report.indexed} run(s), dropped {report.dropped} row(s)")
    if report.skipped:
        out.print(
            f"[yellow]skipped {len(report.skipped)} folder(s) without a readable trace:[/] "
            + ", ".join(shown(name) for name in report.skipped[:20])
            + (" …" if len(report.skipped) > 20 else "")
        )


@store_app.command("info")
def store_info(runs_dir: RunsDir = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Which store this configuration uses, its schema version and how many runs it indexes."""
    settings = command_settings(runs_dir=runs_dir)
    if not store_exists(settings):  # a reading command creates no store: say where it will be
        url = public_store_url(store_url_of(settings))
        info: dict[str, object] = {
            "store": url,
            "kind": "sqlite",
            "schema_version": SCHEMA_VERSION,
            "runs": 0,
        }
        if not as_json:
            out.print(f"[dim]not created yet: the first run in {shown(settings.runs_dir)} creates it[/]")
    else:
        store = open_store(settings)
        store.sync(settings.runs_dir)
        info = {
            "store": store.url,
            "kind": store.kind,
            "schema_version": SCHEMA_VERSION,
            "runs": store.count(),
        }
    if as_json:
        print(json.dumps(info))
        return
    for key, value in info.items():
        out.print(f"{key}: {shown(value)}")
