"""The settings model: every field, where the environment sets it, and how a role's model is resolved."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from pse.config._models import (
    _ROLE_FIELDS,
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
    WriteFormat,
)
from pse.config._profiles import resolve_model_spec, small_model_defaults
from pse.config._sources import SettingsOnly, nest_role_names
from pse.exceptions import ConfigError
from pse.roles import CREWS, ROLES, SINGLE_AGENT, CrewSpec, Role

__all__ = ["Settings"]


class Settings(BaseSettings):
    """PSE settings. Each field is the environment variable `PSE_<NAME>` unless noted; the role fields
    (`planner`, `specialist`, `evaluator`) are read from `PSE_<ROLE>_<FIELD>`."""

    model_config = SettingsConfigDict(
        env_prefix="PSE_", env_file=".env", env_file_encoding="utf-8", extra="forbid", populate_by_name=True
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
    # NoDecode: `PSE_PLANNER=gpt-4o` (a typo) is no JSON to decode but a stray variable to warn about.
    planner: Annotated[RoleSettings, NoDecode] = Field(default_factory=RoleSettings)
    specialist: Annotated[RoleSettings, NoDecode] = Field(default_factory=RoleSettings)
    evaluator: Annotated[RoleSettings, NoDecode] = Field(default_factory=RoleSettings)
    cassette: Path | None = Field(
        None, description="Cassette the scripted provider replays (default: the task's)."
    )
    scripted_latency_s: float = Field(
        0.0,
        ge=0,
        le=60,
        description="Seconds each scripted (cassette) reply waits: a simulated model latency, for "
        "benchmarks and tests of concurrency.",
    )
    record: Path | None = Field(
        None, description="Record the real model exchange of a run into this cassette file."
    )
    replay_strict: bool | Literal["tools"] = Field(
        True,
        description="In replay, fail on the first request whose PSE-authored part (prompts, task, "
        "step_buffer, plan, role order) differs from the recording; tool results that differ are recorded as "
        "drift. tools: tool results must match too. false: no comparison.",
    )
    replay_tools: bool = Field(
        False,
        description="In replay, answer tool calls from the recording instead of running them (hermetic).",
    )
    protocol: ProtocolMode = Field(
        "dsml",
        description="How roles request tools: dsml (the XML protocol) or native (the provider's function "
        "calls).",
    )
    constrain: ConstrainMode = Field(
        "auto",
        description="Constrained decoding of each role's turn: auto (a grammar where the server takes one), "
        "grammar, json (a JSON schema), or off.",
    )
    write_format: WriteFormat = Field(
        "auto",
        description="How roles write files: call (write_file in <tool_calls>), fenced (the path on a line, "
        "then the whole file in a Markdown code block), or auto (fenced for a model whose name gives at most "
        "14B parameters).",
    )
    constrain_chars_per_token: int = Field(
        3,
        ge=1,
        le=8,
        description="Characters a grammar allows per token of PSE_MODEL_MAX_TOKENS (1: never cut on ASCII "
        "text; 3: room for English and code, which average 3.5-4).",
    )
    format_retries: int = Field(
        1,
        ge=0,
        le=5,
        description="Times a role is asked again, per cycle, when its turn lacks the element it owes "
        "(or, for the Evaluator, when its PASS comes before a required check: not run, or stale since a "
        "write; or when its FAIL gives a reason about the work, such as TESTS_FAILING, not the plan). A "
        "<blocked> its own records refute is asked about once a phase even past this count.",
    )
    model_context_tokens: int | None = Field(
        None, gt=0, description="Context window of the models, tokens (None: not checked before a call)."
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
    model_rpm: int = Field(
        0,
        ge=0,
        description="Requests per minute to one model endpoint (provider and base URL), shared by every run "
        "of the process; evenly spaced (0: no limit).",
    )
    model_tpm: int = Field(
        0,
        ge=0,
        description="Tokens per minute to one model endpoint, shared: each call reserves its prompt plus "
        "PSE_MODEL_MAX_TOKENS, settled with the reported usage (0: no limit).",
    )
    model_max_concurrency: int = Field(
        0, ge=0, description="Calls in flight to one model endpoint at a time, shared (0: no limit)."
    )
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description='Prices per model as JSON: {"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25, '
        '"currency": "USD"}} (cached_input: prompt tokens served from the cache; default input).',
    )

    # --- tools and sandbox --------------------------------------------------------------
    tool_timeout_s: float = Field(60.0, gt=0, description="Timeout of one tool command, in seconds.")
    sandbox: SandboxMode = Field("auto", description="auto (bwrap when installed), bwrap, or fallback.")
    sandbox_hide: list[Path] = Field(
        default_factory=list,
        description="Paths no tool command may read, as a JSON list (bwrap masks them; fallback refuses "
        "to start while the sandbox uid could read one). `pse eval` adds its hidden checks.",
    )
    sandbox_uid: int = Field(
        65534, ge=1, le=2**31 - 2, description="The uid and gid tool commands run as when PSE runs as root."
    )
    sandbox_uids: int = Field(
        64,
        ge=1,
        le=4096,
        description="Fallback as root: each command runs as its own uid, leased from this many uids after "
        "PSE_SANDBOX_UID, and every process of that uid is killed when the command ends; none of them may "
        "belong to a real user.",
    )
    tool_output_limit: int = Field(20_000, ge=256, description="Characters of tool output a role sees.")
    tool_memory_mb: int = Field(2048, ge=64, description="Address-space limit of a tool command, MiB.")
    tool_cpu_s: int = Field(120, ge=1, description="CPU-time limit of a tool command, seconds.")
    tool_file_size_mb: int = Field(64, ge=1, description="Largest file a tool command may write, MiB.")
    tool_max_processes: int = Field(256, ge=8, description="Process-count limit of a tool command.")
    tool_calls_per_cycle: int = Field(30, ge=1, description="Default calls per tool, per role, per cycle.")
    tool_parallel_calls: int = Field(
        4,
        ge=1,
        description="Read-only calls of one <tool_calls> block that run at the same time (1: one after "
        "another); writes, and every call after one, keep their order.",
    )
    max_invokes_per_message: int = Field(16, ge=1, description="Most tool invokes one message may hold.")
    max_parameter_bytes: int = Field(1_000_000, ge=1024, description="Largest single tool parameter value.")

    # --- loop engine ---------------------------------------------------------------------
    max_partial_retries: int = Field(3, ge=0, description="PARTIAL verdicts revised before a re-plan.")
    max_fail_retries: int = Field(2, ge=0, description="Re-plans before the run is ESCALATED.")
    planner_questions: bool = Field(
        False,
        description="The Planner may ask a person questions (<clarification>) instead of assuming; the run "
        "then waits in AWAITING_ANSWER for `pse answer RUN_ID --text` (XML protocol only).",
    )
    approval_timeout_s: float = Field(
        600.0,
        gt=0,
        description="Seconds a tool call held for a person's approval waits before it is denied (the "
        "process that holds it keeps the clock; `pse approve RUN_ID` answers).",
    )
    max_step_retries: int = Field(
        2, ge=0, description='Retries of one step of a plan (execution = "steps") before it re-plans.'
    )
    max_steps: int = Field(12, ge=1, description='Most steps one plan may hold (execution = "steps").')
    max_parallel_steps: int = Field(
        3, ge=1, description='Independent steps executed at the same time (execution = "steps").'
    )
    max_criterion_failures: int = Field(
        2, ge=1, description="Times one criterion may fail before the run is ESCALATED, retries left or not."
    )
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
    team: Team = Field(
        "pse",
        description="The crew: pse (Planner, Specialist, Evaluator), single (one Agent that reviews itself: "
        "the evaluation baseline), or another of `pse.roles.CREWS`.",
    )
    hard_gates: bool = Field(
        True, description="Enforce the hard gates on a PASS (false: the Evaluator's word alone; an ablation)."
    )
    trace_retention_days: int = Field(
        7,
        ge=0,
        description="Runs older than this many days are pruned: as a run starts (at most once an hour "
        "per process) and by `pse clean` (0: keep all).",
    )
    runs_dir: Path = Field(Path("runs"), description="Where run folders go.")
    evals_dir: Path = Field(Path("evals"), description="Where `pse eval` writes evaluations by default.")
    tasks_dir: Path | None = Field(None, description="A second tasks directory, for your own tasks.")
    store_url: SecretStr | None = Field(
        None,
        description="The run store: postgresql://USER:PASSWORD@HOST:PORT/DB for a shared one "
        "(the `postgres` extra); unset: SQLite in the runs directory (runs.sqlite3).",
    )

    # --- knowledge base ----------------------------------------------------------------
    kb_backend: KnowledgeBackend = Field(
        "auto",
        description="Embeddings of the knowledge base: auto (minilm with the embeddings extra, else "
        "offline), minilm (packaged all-MiniLM-L6-v2), offline (hashing, numpy only), ollama or openai.",
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
    kb_hybrid_weight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Weight of vector similarity against BM25 (0: BM25 only, 1: vectors only; unset: the "
        "backend's tuned weight, minilm 0.7, others 0.3).",
    )
    kb_inject_top_k: int = Field(
        0, ge=0, le=20, description="Top knowledge results appended to the Planner's first prompt (0: off)."
    )
    kb_chunk_chars: int = Field(900, ge=200, description="Target size of a knowledge chunk, in characters.")
    kb_chunk_overlap: int = Field(
        200, ge=0, description="Characters of whole lines a chunk repeats from the previous one."
    )
    kb_timeout_s: float = Field(30.0, gt=0, description="Timeout of one embeddings request, in seconds.")

    # --- observability -------------------------------------------------------------------
    otel: Literal["off", "otlp", "console"] = Field(
        "off",
        description="OpenTelemetry export of each run's spans at its end (the `otel` extra): otlp (to "
        "OTEL_EXPORTER_OTLP_ENDPOINT, as OTEL_SERVICE_NAME), console (to stderr), or off.",
    )
    otel_content: bool = Field(
        False, description="Export prompts, outputs and tool arguments and results with the spans."
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING", description="Log level; DEBUG also shows AutoGen's own tracebacks of recorded failures."
    )

    # --- web -----------------------------------------------------------------------------
    web_token: SecretStr | None = Field(None, description="Bearer token the dashboard requires when set.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments, then the environment, then `.env`, each with the per-role variables."""
        assert isinstance(env_settings, EnvSettingsSource) and isinstance(dotenv_settings, EnvSettingsSource)
        return (
            init_settings,
            SettingsOnly(settings_cls, env_settings),
            SettingsOnly(settings_cls, dotenv_settings),
            file_secret_settings,
        )

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_and_nest_roles(cls, data: Any) -> Any:
        """Every key is a setting (else ConfigError); `planner_model=...` goes into `planner.model`."""
        return nest_role_names(cls, data)

    @model_validator(mode="after")
    def _fit_a_small_model(self) -> Settings:
        """What a small model needs (`config._profiles`), for each setting the user left unset."""
        for name, value in small_model_defaults(self.model_spec(Role.SPECIALIST)).items():
            if name not in self.model_fields_set:
                object.__setattr__(self, name, value)
        return self

    @field_validator("model_rpm", "model_tpm", "model_max_concurrency", mode="before")
    @classmethod
    def _whole_limit(cls, value: Any) -> Any:
        """A rate limit from the environment is a whole number of at least 0; empty is no limit."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            return 0
        if not value.strip().isdigit():
            raise ValueError("a limit is a whole number of at least 0; set 0 or leave it empty for no limit")
        return int(value)

    @property
    def crew(self) -> CrewSpec:
        """The crew `team` selects (`PSE_TEAM`): the one place the setting becomes who speaks."""
        return CREWS[self.team]

    def role(self, role: str) -> RoleSettings:
        """One role's own settings, before the fallback to the globals (see `model_spec`).

        Raises:
            ConfigError: `role` is not one of `ROLES`.
        """
        if role == SINGLE_AGENT:  # the baseline's agent does the Specialist's work, on its model
            return self.specialist
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
        own = {Role.PLANNER: self.planner, Role.SPECIALIST: self.specialist, Role.EVALUATOR: self.evaluator}
        return own[Role(role)]

    def model_spec(self, role: str) -> ModelSpec:
        """Resolve the provider, model, base URL and key of one role, falling back to the globals, and
        what its model is assumed to need (`pse.config._profiles`)."""
        base = RoleSettings.model_construct(
            **{name: getattr(self, name) for name in RoleSettings.model_fields}
        )  # the globals, as the per-role settings they fall back to
        return resolve_model_spec(role, self.role(role), base, self.protocol)

    def flat_dump(self, mode: Literal["python", "json"] = "python") -> dict[str, Any]:
        """The settings by their flat names (`planner_model`, not `planner.model`), one per variable."""
        data: dict[str, Any] = {}
        for name, value in self.model_dump(mode=mode).items():
            if name in _ROLE_FIELDS:
                data.update({f"{name}_{key}": own for key, own in value.items()})
            else:
                data[name] = value
        return data

    def public_dump(self) -> dict[str, object]:
        """The settings as JSON-able data by their flat names, every secret removed (for traces)."""
        data = self.flat_dump(mode="json")
        for name, value in data.items():
            if name.endswith("api_key") or name == "web_token":
                data[name] = "***" if value else None
        return data

    def secrets(self) -> list[tuple[str, str]]:
        """Every secret value configured (API keys, the dashboard token), by its variable name."""
        return [
            (f"PSE_{name.upper()}", value.get_secret_value())
            for name, value in self.flat_dump().items()
            if isinstance(value, SecretStr)
        ]
