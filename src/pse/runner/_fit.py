"""A cassette fits only the run it was recorded on: the same task inputs, the same repository.

A recording notes what it was made on (`Cassette.recorded_on`: the inputs, and the git tree of the
repository at the run's base commit). Replayed on other inputs or another repository, its turns would
talk about work that is not there: a plan for another request, files of another repository, a PASS the
gates then catch, and an error at the end that blames the cassette. So a run is refused before it
starts, with the one fix that makes it real: a model (or a cassette recorded on these inputs). A
cassette without `recorded_on` (written by hand) replays on whatever it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pse.exceptions import CassetteError
from pse.models import RecordedOn, Scrubber

__all__ = ["RunFit", "check_fit", "recorded_on"]

_SHOWN_CHARS = 60
_MODEL_FIX = "configure a model (PSE_PROVIDER, PSE_BASE_URL / PSE_API_KEY; `pse doctor` checks it)"


@dataclass(frozen=True)
class RunFit:
    """What a run is, as a cassette must fit it: its inputs and its repository's tree (None: none)."""

    inputs: Mapping[str, str]
    repository: str | None


def recorded_on(fit: RunFit, scrubber: Scrubber) -> RecordedOn:
    """What a recording of this run notes it was made on (inputs scrubbed as the recording is)."""
    return RecordedOn(inputs={k: scrubber.text(v) for k, v in fit.inputs.items()}, repository=fit.repository)


def _shown(value: str | None) -> str:
    if value is None:
        return "unset"
    flat = " ".join(value.split())
    return repr(flat if len(flat) <= _SHOWN_CHARS else flat[: _SHOWN_CHARS - 1] + "…")


def _differences(recorded: RecordedOn, run: RecordedOn) -> list[str]:
    """How the run differs from the recording: its repository, then each input that differs."""
    found = []
    if recorded.repository != run.repository:
        if recorded.repository is None:
            found.append("it was recorded without a repository")
        elif run.repository is None:
            found.append("it was recorded on a repository")
        else:
            found.append(f"it was recorded on another repository (tree {recorded.repository[:12]})")
    names = sorted(set(recorded.inputs) | set(run.inputs))
    inputs = [
        f"{n}={_shown(recorded.inputs.get(n))}" for n in names if recorded.inputs.get(n) != run.inputs.get(n)
    ]
    if inputs:
        found.append("it was recorded with " + ", ".join(inputs))
    return found


def check_fit(
    recorded: RecordedOn | None,
    fit: RunFit,
    *,
    task: str,
    source: str,
    own: bool,
    scrubber: Scrubber,
) -> None:
    """Refuse a cassette that was recorded on other inputs or another repository than this run's.

    Args:
        recorded: what the cassette was recorded on (None: written by hand, fits anything).
        fit: this run.
        task: the task's name, for the message.
        source: the cassette's file, for the message.
        own: it is the task's own cassette, played because no model is configured (not one passed).
        scrubber: scrubs this run's inputs as the recording's were.

    Raises:
        CassetteError: it does not fit; the message names what differs and the fix.
    """
    if recorded is None:
        return
    found = _differences(recorded, recorded_on(fit, scrubber))
    if not found:
        return
    why = "; ".join(found)
    if own:
        needs = "a model on your repository" if fit.repository is not None else "a model for these inputs"
        raise CassetteError(
            f"task {task!r} needs {needs}: no model is configured, and its cassette {source} replays only "
            f"what it was recorded on ({why}): here it would be fake work; fix: {_MODEL_FIX}"
        )
    raise CassetteError(
        f"cassette {source} replays only what it was recorded on ({why}); fix: run with the inputs and "
        f"repository it was recorded on, record a cassette on these (--record FILE, with a model), or "
        f"{_MODEL_FIX}"
    )
