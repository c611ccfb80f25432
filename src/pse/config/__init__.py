"""All of PSE's settings, in one pydantic-settings model read from the environment and `.env`.

Every field maps to one environment variable, `PSE_<FIELD>` in upper case, unless the
field says otherwise (the API key and base URL also accept `OPENAI_API_KEY` and
`OPENAI_BASE_URL`). The README's configuration table is tested against this model.

Per-role model settings are one typed `RoleSettings` per role (`settings.planner`,
`settings.role(Role.EVALUATOR)`), read from the flat variables `PSE_<ROLE>_<FIELD>`
(`PSE_PLANNER_MODEL`, `PSE_EVALUATOR_PROVIDER`, ...); a field left unset falls back to the global
one (`PSE_MODEL`, `PSE_PROVIDER`, ...), and `Settings.model_spec(role)` resolves them. Adding a
per-role setting is one field of `RoleSettings`: its variables, table rows and flat Python names
(`planner_model=...`) follow.

No setting is silently ignored: an unknown keyword (`load_settings`, `with_overrides`, `Settings(...)`,
`pse.run`) raises `ConfigError` naming the closest valid one, and `load_settings` warns
(`UnknownVariableWarning`) of a `PSE_*` variable of the environment or `.env` that is no setting.
"""

from __future__ import annotations

from pse.config._load import load_settings, with_overrides
from pse.config._models import (
    ConstrainMode,
    ContextMode,
    KnowledgeBackend,
    ModelSpec,
    Price,
    ProtocolMode,
    ProviderName,
    RoleSettings,
    SandboxMode,
    Team,
)
from pse.config._settings import Settings
from pse.config._variables import env_example, env_variables, settings_table
from pse.roles import ROLES

__all__ = [
    "ROLES",
    "ConstrainMode",
    "ContextMode",
    "KnowledgeBackend",
    "ModelSpec",
    "Price",
    "ProtocolMode",
    "ProviderName",
    "RoleSettings",
    "SandboxMode",
    "Settings",
    "Team",
    "env_example",
    "env_variables",
    "load_settings",
    "settings_table",
    "with_overrides",
]
