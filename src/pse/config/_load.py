"""Loading the settings for a run: the environment and `.env`, keyword arguments winning, unknown variables
warned of, invalid values named by where a person set them; and validated copies with some replaced."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from pse.config._settings import Settings
from pse.config._sources import validation_problems
from pse.config._variables import check_unknown_variables
from pse.exceptions import ConfigError

__all__ = ["load_settings", "load_settings_given", "with_overrides"]


def load_settings(**overrides: object) -> Settings:
    """Read the settings from the environment and `.env`, keyword arguments winning.

    Warns (`UnknownVariableWarning`, once per process) of every `PSE_*` variable that is no setting,
    naming the closest one: a typo there would otherwise go unnoticed. One that meant a limit
    (`PSE_MAX_CYCLE=3`) stops: a run would go on without the limit its person set.

    Raises:
        ConfigError: a keyword is no setting (the message names the closest one), a value is invalid
            (the message names its variable), or a `PSE_*` variable that is no setting meant a limit.
    """
    return load_settings_given({}, **overrides)


def load_settings_given(given_as: Mapping[str, str], /, **overrides: object) -> Settings:
    """`load_settings`, with the names a person gave the overrides under, for the error message.

    Args:
        given_as: flat setting name → what a person called it where they set it (the CLI passes
            `{"provider": "--provider"}`); an override it does not name keeps its variable's name.
        **overrides: settings by their field names (per-role ones flat: `planner_model`).

    Raises:
        ConfigError: as `load_settings`; an invalid value is named by where it came from (its
            variable, or the option that set it) and the message says what to fix there.
    """
    check_unknown_variables()
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        labels = {name: label for name, label in given_as.items() if name in overrides}
        places = ["_".join(str(p) for p in err["loc"]) for err in exc.errors()]
        flagged = [labels[p] for p in dict.fromkeys(places) if p in labels]
        passed = [f"{p}=" for p in dict.fromkeys(places) if p in overrides and p not in labels]
        fixes = [f"Fix the value of {', '.join(flagged)}."] if flagged else []
        fixes += [f"Fix the argument {', '.join(passed)}."] if passed else []
        if any(p not in overrides for p in places):
            fixes.append("Fix the variable in your environment or .env.")
        raise ConfigError(
            f"invalid configuration:\n  {validation_problems(exc, labels)}\n{' '.join(fixes)}"
        ) from exc


def with_overrides(settings: Settings, where: str = "override", **overrides: object) -> Settings:
    """A validated copy of `settings` with some fields replaced (the environment is not read again).

    Overrides are named like the fields, per-role ones flat (`planner_model="..."`).

    Raises:
        ConfigError: an override is no setting (the message names the closest one) or not a valid
            value for its field; `where` says whose override it was.
    """
    if not overrides:
        return settings
    try:
        return Settings.model_validate({**settings.model_dump(), **overrides})
    except ValidationError as exc:
        raise ConfigError(f"invalid {where}:\n  {validation_problems(exc)}") from exc
