"""The typed pieces of the settings: prices, per-role model settings, a role's resolved model."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr

from pse.roles import CREWS, Role

__all__ = [
    "ConstrainMode",
    "ContextMode",
    "KnowledgeBackend",
    "ModelSpec",
    "Price",
    "ProtocolMode",
    "ProviderName",
    "RoleSettings",
    "SandboxMode",
    "Team",
    "WriteFormat",
]

ProviderName = Literal["openai", "ollama", "scripted"]
SandboxMode = Literal["auto", "bwrap", "fallback"]
ContextMode = Literal["step_buffer", "history"]


def _a_crew(name: str) -> str:
    if name not in CREWS:
        raise ValueError(f"no crew {name!r}; the crews are {', '.join(CREWS)}")
    return name


Team = Annotated[str, AfterValidator(_a_crew)]
"""A crew's name (`roles.CREWS`): a crew is data, so the setting takes whichever crews there are."""
KnowledgeBackend = Literal["auto", "minilm", "offline", "ollama", "openai"]
ConstrainMode = Literal["auto", "grammar", "json", "off"]
ProtocolMode = Literal["dsml", "native"]
WriteFormat = Literal["auto", "call", "fenced"]


class Price(BaseModel):
    """What one model costs, per million tokens."""

    input: float = Field(ge=0, description="price per million prompt tokens")
    output: float = Field(ge=0, description="price per million completion tokens")
    cached_input: float | None = Field(
        None,
        ge=0,
        description="price per million prompt tokens served from the provider's cache (None: input)",
    )
    currency: str = "USD"


class RoleSettings(BaseModel):
    """One role's own model settings, the variables `PSE_<ROLE>_<FIELD>`; unset fields fall back to the
    global setting of the same name (`Settings.model_spec`). A new per-role setting is one field here."""

    model_config = ConfigDict(extra="forbid")

    provider: ProviderName | None = Field(None, description="provider (falls back to PSE_PROVIDER).")
    model: str | None = Field(None, description="model (falls back to PSE_MODEL).")
    base_url: str | None = Field(None, description="base URL (falls back to PSE_BASE_URL).")
    api_key: SecretStr | None = Field(None, description="API key (falls back to PSE_API_KEY).")
    constrain: ConstrainMode | None = Field(
        None, description="constrained decoding (falls back to PSE_CONSTRAIN)."
    )
    model_context_tokens: int | None = Field(
        None, gt=0, description="context window, tokens (falls back to PSE_MODEL_CONTEXT_TOKENS)."
    )
    write_format: WriteFormat | None = Field(
        None, description="how the role writes files (falls back to PSE_WRITE_FORMAT)."
    )


_ROLE_FIELDS: dict[str, Role] = {role.lower(): role for role in Role}
"""The `Settings` field of each role's `RoleSettings`: the role's name in lower case (`PSE_<ROLE>_*`)."""
_FLAT_ROLE_NAMES: dict[str, tuple[str, str]] = {
    f"{field}_{key}": (field, key) for field in _ROLE_FIELDS for key in RoleSettings.model_fields
}
"""`planner_model` → (`planner`, `model`): the flat Python names of the per-role settings."""


class ModelSpec(BaseModel):
    """The resolved model settings for one role."""

    role: str
    provider: ProviderName
    model: str
    base_url: str | None = None
    api_key: SecretStr | None = None
    provider_was_defaulted: bool = False
    constrain: ConstrainMode = "auto"
    context_tokens: int | None = None
    write_format: Literal["call", "fenced"] = "call"
    """How the role writes files, `auto` resolved (`pse.config.write_format_for`)."""
