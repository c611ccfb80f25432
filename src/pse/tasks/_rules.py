"""The zero-LLM rules engine: declarative checks over a task's CSV/JSON data, summarised as JSON + Markdown.

Nothing here imports or calls a model; `tests/test_rules.py` runs it in a fresh interpreter and asserts
that no AutoGen or provider module was even imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from pse.exceptions import ConfigError
from pse.tasks._explain import explain
from pse.tasks._rule_kinds import evaluate_rule
from pse.tasks._rules_config import RulesFile, load_rows
from pse.tasks._rules_summary import Finding, RulesSummary, SourceInfo, Window
from pse.tasks._toml import read_toml

__all__ = [
    "Finding",
    "RulesSummary",
    "RulesTask",
    "SourceInfo",
    "Window",
    "evaluate_rules",
    "load_rules",
    "run_rules",
]


class RulesTask(Protocol):
    """What the rules engine reads of a task (a `Task` is one): its name, folder and `rules.toml`."""

    @property
    def name(self) -> str: ...

    @property
    def dir(self) -> Path: ...

    @property
    def rules_path(self) -> Path | None: ...


def load_rules(path: Path) -> RulesFile:
    """Parse and validate a `rules.toml`.

    Raises:
        ConfigError: the file is not valid TOML or not of the rules format (every problem listed).
    """
    raw = read_toml(path)
    try:
        return RulesFile.model_validate(raw)
    except ValidationError as exc:
        problems = "\n  ".join(
            f"{message}\n    fix: {fix}"
            for message, fix in (explain(RulesFile, e, raw) for e in exc.errors())
        )
        raise ConfigError(
            f"{path}: invalid rules file:\n  {problems}\nSee docs/tasks.md for the format."
        ) from exc


def evaluate_rules(rules: RulesFile, data_dir: Path, task_name: str) -> RulesSummary:
    """Run every rule over the sources found under `data_dir` and return the summary (no files written)."""
    rows = {name: load_rows(data_dir, source) for name, source in rules.sources.items()}
    findings = [evaluate_rule(rule, rules.sources, rows) for rule in rules.rules]
    infos = [SourceInfo(name=n, path=s.path, rows=len(rows[n])) for n, s in rules.sources.items()]
    return RulesSummary(task=task_name, sources=infos, findings=findings)


def run_rules(task: RulesTask, out_dir: Path, data_dir: Path | None = None) -> RulesSummary:
    """Run a task's rules and write `rules_summary.json` and `rules_summary.md` into `out_dir`.

    Args:
        task: a task with a `rules.toml`.
        out_dir: where the two summary files go (created if needed).
        data_dir: where the sources' paths are resolved (default: the task folder).

    Raises:
        ConfigError: the task has no rules, or its rules or data are invalid.
    """
    if task.rules_path is None:
        raise ConfigError(
            f"task {task.name!r} has no rules.toml; add one (see docs/tasks.md) or skip summarize"
        )
    summary = evaluate_rules(load_rules(task.rules_path), data_dir or task.dir, task.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "rules_summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out_dir / "rules_summary.md").write_text(summary.to_markdown(), encoding="utf-8")
    return summary
