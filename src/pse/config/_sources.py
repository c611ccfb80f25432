"""How input reaches the settings model: its sources, the keys it accepts, and what it says of a wrong one."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource

from pse._suggest import closest as _closest
from pse.config._models import _FLAT_ROLE_NAMES, _ROLE_FIELDS, RoleSettings
from pse.exceptions import ConfigError

__all__ = ["SettingsOnly", "env_names", "input_keys", "nest_role_names", "source_keys", "validation_problems"]


class SettingsOnly(PydanticBaseSettingsSource):
    """The environment or `.env`, as `source` reads it, plus `PSE_<ROLE>_<FIELD>` into the role models.

    It passes on settings only: a stray `PSE_*` variable is `load_settings`' warning, never a validation
    error, and `PSE_PLANNER` itself is no variable (the role models are read from the flat names).
    """

    def __init__(self, settings_cls: type[BaseSettings], source: EnvSettingsSource) -> None:
        super().__init__(settings_cls)
        self._source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads through the wrapped source

    def __call__(self) -> dict[str, Any]:
        keys = source_keys(self.settings_cls)
        data = {key: value for key, value in self._source().items() if key in keys}
        variables = {name.lower(): value for name, value in self._source.env_vars.items()}
        for field in _ROLE_FIELDS:
            prefix = f"pse_{field}_"
            own = {
                key: variables[prefix + key] for key in RoleSettings.model_fields if prefix + key in variables
            }
            if own:
                data[field] = own
        return data


def nest_role_names(settings_cls: type[BaseModel], data: Any) -> Any:
    """Every key is a setting (else ConfigError); `planner_model=...` goes into `planner.model`."""
    if not isinstance(data, Mapping):
        return data
    accepted = input_keys(settings_cls)
    unknown = [str(key) for key in data if key not in accepted]
    if unknown:
        raise ConfigError(_unknown_settings_message(unknown, settings_cls))
    nested = {key: value for key, value in data.items() if key not in _FLAT_ROLE_NAMES}
    for name, (field, key) in _FLAT_ROLE_NAMES.items():
        if name in data:  # a flat name wins over the same field of a nested value
            own = nested.get(field)
            if isinstance(own, RoleSettings):
                own = own.model_dump(exclude_unset=True)
            if own is None or isinstance(own, Mapping):
                nested[field] = {**(own or {}), key: data[name]}
    return nested


def validation_problems(exc: ValidationError, given: Mapping[str, str] | None = None) -> str:
    """One line per invalid field, named by where its value came from: its environment variable, or
    (`given`: flat setting name → label) the option or argument that set it."""
    lines = []
    for err in exc.errors():
        name = _source_of(err["loc"], given)
        lines.append(f"{name}: {err['msg']} (got {err.get('input')!r})")
    return "\n  ".join(lines)


def _source_of(loc: tuple[int | str, ...], given: Mapping[str, str] | None) -> str:
    flat = "_".join(str(p) for p in loc)
    if given and flat in given:
        return given[flat]
    return "PSE_" + flat.upper() if loc else "settings"


def _unknown_settings_message(unknown: list[str], settings_cls: type[BaseModel]) -> str:
    valid = [name for name in settings_cls.model_fields if name not in _ROLE_FIELDS] + list(_FLAT_ROLE_NAMES)
    parts = []
    for name in unknown:
        closest = _closest(name.lower(), valid)
        parts.append(f"{name!r}" + (f" (did you mean {closest!r}?)" if closest else ""))
    return (
        f"unknown setting{'s' if len(parts) > 1 else ''} {', '.join(parts)}; a setting is a variable of "
        "the configuration table in lower case without PSE_ (README, .env.example)"
    )


def _aliases(field: FieldInfo) -> list[str]:
    alias = field.validation_alias
    return [str(choice) for choice in alias.choices] if isinstance(alias, AliasChoices) else []


def env_names(name: str, field: FieldInfo) -> list[str]:
    """The environment variables that set the field `name`: its alias choices, else `PSE_<NAME>`."""
    return _aliases(field) or [f"PSE_{name.upper()}"]


@functools.cache
def source_keys(settings_cls: type[BaseModel]) -> frozenset[str]:
    """The keys the environment and `.env` sources produce for settings: field names and alias choices."""
    return frozenset(
        key
        for name, field in settings_cls.model_fields.items()
        if name not in _ROLE_FIELDS
        for key in (name, *_aliases(field))
    )


@functools.cache
def input_keys(settings_cls: type[BaseModel]) -> frozenset[str]:
    """Every key the settings accept: the settings, the role models and the flat per-role names."""
    return source_keys(settings_cls) | set(_ROLE_FIELDS) | set(_FLAT_ROLE_NAMES)
