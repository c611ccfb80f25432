"""What an evaluation runs: the arms and the settings each changes, and the instances chosen."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pse.config import Settings, with_overrides
from pse.evals._suite_model import Instance, Suite
from pse.exceptions import UserError

__all__ = ["ARMS", "DEFAULT_ARMS", "DIRECT", "arm_settings", "parse_arms", "select_instances"]


ARMS: Mapping[str, tuple[str, Mapping[str, Any]]] = {
    "pse": ("the full PSE loop, as configured", {}),
    "single": (
        "one agent with the Specialist's and Evaluator's tools that reviews its own work: no independent "
        "Evaluator, no hard gates, its own verdict is its claim",
        {"team": "single", "hard_gates": False},
    ),
    "pse-nogates": (
        "the PSE loop with the hard gates off: the independent Evaluator alone",
        {"hard_gates": False},
    ),
    "pse-history": (
        "the PSE loop with PSE_CONTEXT_MODE=history: what step_buffer saves",
        {"context_mode": "history"},
    ),
}
"""Each arm: what it measures, and the settings it changes."""
DEFAULT_ARMS = ("pse", "single")
DIRECT = "direct"
"""`make eval-local`'s bare-model column (`pse.evals._direct`): no arm, named here to refuse it clearly."""


def parse_arms(text: str | None, suite: Suite | None = None) -> list[str]:
    """`--arms a,b` → the arms, in order, each once.

    Args:
        text: the comma-separated arms (None: `DEFAULT_ARMS`).
        suite: the suite they run on, to say why `direct` cannot run on it.

    Raises:
        UserError: an unknown or repeated arm, `direct`, or none.
    """
    arms = [a.strip() for a in (text or ",".join(DEFAULT_ARMS)).split(",") if a.strip()]
    if DIRECT in arms:
        raise UserError(_direct_refused(suite))
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        raise UserError(
            f"unknown arm(s) {', '.join(unknown) or '(none given)'}; the arms are: {', '.join(ARMS)}"
        )
    if len(set(arms)) != len(arms):
        raise UserError(f"--arms names an arm twice: {','.join(arms)}")
    return arms


def _direct_refused(suite: Suite | None) -> str:
    """Why `--arms direct` does not run: on a repository suite it has no meaning; elsewhere it is no arm."""
    fix = f"drop direct from --arms (the arms are: {', '.join(ARMS)})"
    if suite is not None and suite.repo is not None:
        return (
            f"--arms direct: suite {suite.name} is a repository suite (repo = {suite.config.repo}), and the "
            f"direct column judges one solution.py, not a change to a repository; {fix}"
        )
    return f"--arms direct: direct is not an arm of pse eval but make eval-local's bare-model column; {fix}"


def select_instances(suite: Suite, *, limit: int | None = None, ids: Sequence[str] = ()) -> list[Instance]:
    """The instances to run: the named ones (in the suite's order), else the first `limit`, else all.

    Raises:
        UserError: an id the suite does not have, or both a limit and ids.
    """
    if ids and limit is not None:
        raise UserError("pass --limit or --instances, not both")
    if ids:
        known = {i.id for i in suite.instances}
        unknown = [i for i in ids if i not in known]
        if unknown:
            sample = ", ".join(i.id for i in suite.instances[:3])
            raise UserError(
                f"suite {suite.name} has no instance(s) {', '.join(unknown)} (its ids: {sample}, …)"
            )
        wanted = set(ids)
        return [i for i in suite.instances if i.id in wanted]
    if limit is not None and limit < 1:
        raise UserError("--limit must be at least 1")
    return list(suite.instances[:limit] if limit is not None else suite.instances)


def arm_settings(settings: Settings, arm: str, *, hide: Sequence[Path], cassette: Path | None) -> Settings:
    """The settings of one arm's runs: the arm's changes, the secret paths hidden, its cassette."""
    changes: dict[str, Any] = dict(ARMS[arm][1])
    changes["sandbox_hide"] = [*settings.sandbox_hide, *hide]
    if cassette is not None:
        changes["cassette"] = cassette
        changes["provider"] = "scripted"
    return with_overrides(settings, f"arm {arm!r}", **changes)
