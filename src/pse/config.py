"""All of PSE's settings, in one pydantic-settings model read from the environment and `.env`.

Every field maps to one environment variable, `PSE_<FIELD>` in upper case, unless the
field says otherwise (the API key and base URL also accept `OPENAI_API_KEY` and
`OPENAI_BASE_URL`). The README's configuration table is tested against this model.

Per-role model settings (`PSE_PLANNER_MODEL`, `PSE_EVALUATOR_PROVIDER`, ...) fall back to
the global ones (`PSE_MODEL`, `PSE_PROVIDER`, ...); `Settings.model_spec(role)` resolves them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from pse.exceptions import ConfigError
from pse.roles import ROLES

__all__ = [
    "ROLES",
    "ModelSpec",
    "Price",
    "ProviderName",
    "Settings",
    "env_example",
    "load_settings",
    "settings_table",
    "with_overrides",
]

ProviderName = Literal["openai", "ollama", "scripted"]
SandboxMode = Literal["auto", "bwrap", "fallback"]
ContextMode = Literal["step_buffer", "history"]
KnowledgeBackend = Literal["offline", "ollama", "openai"]


class Price(BaseModel):
    """What one model costs, per million tokens."""

    input: float = Field(ge=0, description="price per million prompt tokens")
    output: float = Field(ge=0, description="price per million completion tokens")
    currency: str = "USD"


class ModelSpec(BaseModel):
    """The resolved model settings for one role."""

    role: str
    provider: ProviderName
    model: str
    base_url: str | None = None
    api_key: SecretStr | None = None
    provider_was_defaulted: bool = False


class Settings(BaseSettings):
    """PSE settings. Each field is the environment variable `PSE_<NAME>` unless noted."""

    model_config = SettingsConfigDict(
        env_prefix="PSE_", env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    # --- models -------------------------------------------------------------------------
    provider: ProviderName | None = Field(
        None,
        description="Model provider for every role: openai, ollama or scripted. Default: scripted "
        "when no API key or provider is configured.",
    )
    model: str | None = Field(None, description="Model name for every role.")
    base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("PSE_BASE_URL", "OPENAI_BASE_URL"),
        description="API base URL (also read from OPENAI_BASE_URL).",
    )
    api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("PSE_API_KEY", "OPENAI_API_KEY"),
        description="API key (also read from OPENAI_API_KEY). Never written to traces or cassettes.",
    )
    planner_provider: ProviderName | None = Field(
        None, description="Planner's provider (falls back to PSE_PROVIDER)."
    )
    planner_model: str | None = Field(None, description="Planner's model (falls back to PSE_MODEL).")
    planner_base_url: str | None = Field(None, description="Planner's base URL (falls back to PSE_BASE_URL).")
    planner_api_key: SecretStr | None = Field(
        None, description="Planner's API key (falls back to PSE_API_KEY)."
    )
    specialist_provider: ProviderName | None = Field(None, description="Specialist's provider.")
    specialist_model: str | None = Field(None, description="Specialist's model.")
    specialist_base_url: str | None = Field(None, description="Specialist's base URL.")
    specialist_api_key: SecretStr | None = Field(None, description="Specialist's API key.")
    evaluator_provider: ProviderName | None = Field(None, description="Evaluator's provider.")
    evaluator_model: str | None = Field(None, description="Evaluator's model (e.g. another model family).")
    evaluator_base_url: str | None = Field(None, description="Evaluator's base URL.")
    evaluator_api_key: SecretStr | None = Field(None, description="Evaluator's API key.")
    cassette: Path | None = Field(
        None, description="Cassette the scripted provider replays (default: the task's)."
    )
    record: Path | None = Field(
        None, description="Record the real model exchange of a run into this cassette file."
    )
    replay_strict: bool = Field(
        True, description="In replay, fail on the first request whose digest differs from the recorded one."
    )
    model_timeout_s: float = Field(120.0, gt=0, description="Timeout of one model call, in seconds.")
    model_max_retries: int = Field(
        3, ge=0, le=10, description="Retries on rate limit, 5xx and connection errors."
    )
    model_backoff_s: float = Field(
        1.0, ge=0, description="First retry delay; doubles each retry, with jitter."
    )
    model_max_tokens: int | None = Field(
        None, gt=0, description="Max completion tokens per call (None: provider's)."
    )
    model_temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature (None: provider's)."
    )
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description='Prices per model as JSON: {"gpt-4o": {"input": 2.5, "output": 10, "currency": "USD"}}.',
    )

    # --- tools and sandbox --------------------------------------------------------------
    tool_timeout_s: float = Field(60.0, gt=0, description="Timeout of one tool command, in seconds.")
    sandbox: SandboxMode = Field("auto", description="auto (bwrap when installed), bwrap, or fallback.")
    sandbox_uid: int = Field(
        65534, ge=1, le=2**31 - 2, description="The uid and gid tool commands run as when PSE runs as root."
    )
    tool_output_limit: int = Field(20_000, ge=256, description="Characters of tool output a role sees.")
    tool_memory_mb: int = Field(2048, ge=64, description="Address-space limit of a tool command, MiB.")
    tool_cpu_s: int = Field(120, ge=1, description="CPU-time limit of a tool command, seconds.")
    tool_file_size_mb: int = Field(64, ge=1, description="Largest file a tool command may write, MiB.")
    tool_max_processes: int = Field(256, ge=8, description="Process-count limit of a tool command.")
    tool_calls_per_cycle: int = Field(30, ge=1, description="Default calls per tool, per role, per cycle.")
    max_invokes_per_message: int = Field(16, ge=1, description="Most tool invokes one message may hold.")
    max_parameter_bytes: int = Field(1_000_000, ge=1024, description="Largest single tool parameter value.")

    # --- loop engine ---------------------------------------------------------------------
    max_partial_retries: int = Field(3, ge=0, description="PARTIAL verdicts revised before a re-plan.")
    max_fail_retries: int = Field(2, ge=0, description="Re-plans before the run is ESCALATED.")
    turns_per_cycle: int = Field(20, ge=3, description="Most agent turns in one cycle (tool turns included).")
    run_timeout_s: float = Field(1800.0, gt=0, description="Wall-clock limit of a run, seconds.")
    token_budget: int = Field(500_000, gt=0, description="Most tokens (prompt + completion) a run may use.")
    cost_budget: float | None = Field(None, gt=0, description="Most money a run may cost (None: no limit).")
    step_buffer_tokens: int = Field(
        2000, ge=100, description="Cap of what crosses from one cycle to the next."
    )
    context_mode: ContextMode = Field(
        "step_buffer", description="step_buffer (reset each cycle) or history (one team, whole history)."
    )
    trace_retention_days: int = Field(7, ge=0, description="Runs older than this are pruned (0: keep all).")
    runs_dir: Path = Field(Path("runs"), description="Where run folders go.")
    tasks_dir: Path | None = Field(None, description="A second tasks directory, for your own tasks.")

    # --- knowledge base ----------------------------------------------------------------
    kb_backend: KnowledgeBackend = Field(
        "offline",
        description="Embeddings of the knowledge base: offline (no download, no server), ollama or openai.",
    )
    kb_model: str | None = Field(
        None,
        description="Embedding model (default: nomic-embed-text for ollama, text-embedding-3-small "
        "for openai).",
    )
    kb_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("PSE_KB_BASE_URL", "PSE_KB_HOST"),
        description="Ollama host or OpenAI-compatible base URL of the embeddings (also PSE_KB_HOST).",
    )
    kb_api_key: SecretStr | None = Field(
        None, description="API key of the openai embeddings backend (falls back to PSE_API_KEY)."
    )
    kb_hybrid_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Weight of vector similarity against BM25 (0: BM25 only, 1: vectors only).",
    )
    kb_inject_top_k: int = Field(
        0, ge=0, le=20, description="Top knowledge results appended to the Planner's first prompt (0: off)."
    )
    kb_chunk_chars: int = Field(900, ge=200, description="Target size of a knowledge chunk, in characters.")
    kb_chunk_overlap: int = Field(
        200, ge=0, description="Characters of whole lines a chunk repeats from the previous one."
    )
    kb_timeout_s: float = Field(30.0, gt=0, description="Timeout of one embeddings request, in seconds.")

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING", description="Log level; DEBUG also shows AutoGen's own tracebacks of recorded failures."
    )

    # --- web -----------------------------------------------------------------------------
    web_token: SecretStr | None = Field(None, description="Bearer token the dashboard requires when set.")

    def model_spec(self, role: str) -> ModelSpec:
        """Resolve the provider, model, base URL and key of one role, falling back to the globals."""
        key = role.lower()
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
        provider = getattr(self, f"{key}_provider") or self.provider
        api_key = getattr(self, f"{key}_api_key") or self.api_key
        defaulted = False
        if provider is None:
            provider, defaulted = ("openai", False) if api_key is not None else ("scripted", True)
        model = getattr(self, f"{key}_model") or self.model or _DEFAULT_MODELS[provider]
        return ModelSpec(
            role=role,
            provider=provider,
            model=model,
            base_url=getattr(self, f"{key}_base_url") or self.base_url,
            api_key=api_key,
            provider_was_defaulted=defaulted,
        )

    def public_dump(self) -> dict[str, object]:
        """The settings as JSON-able data with every secret removed (for traces)."""
        data = self.model_dump(mode="json")
        for name, value in list(data.items()):
            if name.endswith("api_key") or name == "web_token":
                data[name] = "***" if value else None
        return data


_DEFAULT_MODELS: dict[str, str] = {"openai": "gpt-4o-mini", "ollama": "qwen2.5:7b", "scripted": "scripted"}


def _problems(exc: ValidationError) -> str:
    """One line per invalid field, named by its environment variable."""
    lines = []
    for err in exc.errors():
        name = "PSE_" + "_".join(str(p) for p in err["loc"]).upper() if err["loc"] else "settings"
        lines.append(f"{name}: {err['msg']} (got {err.get('input')!r})")
    return "\n  ".join(lines)


def with_overrides(settings: Settings, where: str = "override", **overrides: object) -> Settings:
    """A validated copy of `settings` with some fields replaced (the environment is not read again).

    Raises:
        ConfigError: an override is not a valid value for its field; `where` says whose override it was.
    """
    if not overrides:
        return settings
    try:
        return Settings.model_validate({**settings.model_dump(), **overrides})
    except ValidationError as exc:
        raise ConfigError(f"invalid {where}:\n  {_problems(exc)}") from exc


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning a validation failure into a ConfigError that names the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(
            f"invalid configuration:\n  {_problems(exc)}\nFix the variable in your environment or .env."
        ) from exc


def _env_names(name: str, field: FieldInfo) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [f"PSE_{name.upper()}"]


def _default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "{}"
    default = field.default
    if default is None:
        return ""
    return str(default)


def settings_table() -> str:
    """The README's configuration table (Markdown), generated from `Settings` so it cannot drift."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        names = " / ".join(f"`{n}`" for n in _env_names(name, field))
        default = _default_text(field)
        lines.append(f"| {names} | {f'`{default}`' if default else '–'} | {field.description or ''} |")
    return "\n".join(lines)


def env_example() -> str:
    """The text of `.env.example`: every variable, commented out, with its meaning and default."""
    out = [
        "# PSE settings. Copy to .env and uncomment what you need; the environment wins over this file.",
        "# Generated by `python -m pse.config env` from the settings model.",
        "",
    ]
    for name, field in Settings.model_fields.items():
        env = _env_names(name, field)[0]
        out.append(f"# {field.description or ''}")
        out.append(f"# {env}={_default_text(field)}")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    print(settings_table() if sys.argv[1:] == ["table"] else env_example())
