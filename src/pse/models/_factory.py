"""One function from settings and a role to an AutoGen ChatCompletionClient."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

from autogen_core.models import ChatCompletionClient, CreateResult, ModelFamily, ModelInfo
from autogen_ext.models.ollama import OllamaChatCompletionClient
from autogen_ext.models.openai import OpenAIChatCompletionClient

from pse.config import ModelSpec, Settings
from pse.exceptions import CassetteError, ConfigError
from pse.models._cached import http_client_reading_cache
from pse.models._constrained import ConstraintLog, with_constraint
from pse.models._context import ContextWindowClient
from pse.models._fenced import FencedWritesClient
from pse.models._format import turn_key
from pse.models._native import NativeProtocolClient
from pse.models._probe import SERVER_PROBES, ConstraintProbes
from pse.models._ratelimit import limiter_for
from pse.models._recording import CassetteRecorder, RecordingChatCompletionClient
from pse.models._resilient import ResilientChatCompletionClient
from pse.models._retrying import RetryPolicy
from pse.models._scripted import CassettePlayer, ScriptedChatCompletionClient
from pse.models._turn_shape import UNKNOWN_GROUND, TaskGround
from pse.models._usage import UsageSink
from pse.protocol import FunctionSpec, ToolSignature

__all__ = ["GENERIC_MODEL_INFO", "create_model_client"]

# What PSE needs from any model: plain text in, plain text out (roles request tools in XML, not natively).
# Declaring no optional capability lets any model name work with AutoGen's clients; the native protocol
# (PSE_PROTOCOL=native) declares function calling on top (`_model_info`).
GENERIC_MODEL_INFO: ModelInfo = {
    "vision": False,
    "function_calling": False,
    "json_output": False,
    "family": ModelFamily.UNKNOWN,
    "structured_output": False,
}
_NO_KEY_NEEDED = "no-key-needed"  # local OpenAI-compatible servers ignore the key, but the SDK demands one


def create_model_client(
    settings: Settings,
    role: str,
    *,
    player: CassettePlayer | None = None,
    recorder: CassetteRecorder | None = None,
    meter: UsageSink | None = None,
    tools: Sequence[ToolSignature] | None = None,
    functions: Sequence[FunctionSpec] = (),
    constraint_log: ConstraintLog | None = None,
    probes: ConstraintProbes = SERVER_PROBES,
    step: str | None = None,
    ground: TaskGround | None = None,
) -> ChatCompletionClient:
    """Build the model client of `role` from the settings (per-role overrides first, then the globals).

    Real providers come wrapped in `ResilientChatCompletionClient` (timeout, retries, typed errors,
    and the process's shared rate limit when one is set), then, given the role's `tools` and unless
    `spec.constrain` is off, in `ConstrainedChatCompletionClient` (the grammar or JSON schema of each
    turn); a role whose write format is `fenced` in `FencedWritesClient` (file blocks with the model,
    DSML above it); with a `recorder`, the client is further wrapped in `RecordingChatCompletionClient`, which
    so records protocol text even from a JSON-constrained model. Nothing is printed: the caller
    announces a defaulted scripted provider (see `ModelSpec.provider_was_defaulted`).

    Args:
        settings: PSE settings.
        role: Planner, Specialist or Evaluator.
        player: the run's shared cassette player (scripted provider). Without one, the scripted
            provider loads `settings.cassette` for this client alone.
        recorder: record every exchange of this role into this recorder's cassette.
        meter: told the usage of every call as it happens (answered, retried, cancelled), for the budget.
        tools: the tools the role's policy grants, with their parameters: what its grammar allows.
            None: not known, so no constraint is added (auto or not).
        functions: the same tools as functions; with `settings.protocol` native, the client is wrapped
            in `NativeProtocolClient`, which offers them (and the role's output functions) natively.
        constraint_log: notes what each call carried (the runner keeps it in the trace).
        step: the step of a steps plan this client serves: scripted turns come from (and recordings go
            to) the cassette stream `ROLE@STEP`.
        probes: where a server's support is found out and remembered (the process's by default).
        ground: what the task put in the workspace and expects out of it, for constrained decoding
            (`TaskGround`; default: any file may be there, no outputs known).

    Raises:
        ConfigError: unknown role, the OpenAI provider has neither an API key nor a base URL, or a
            constraint the provider can never take (a grammar for Ollama, any with PSE_PROTOCOL=native).
        CassetteError: scripted provider with neither a player nor `settings.cassette`.
    """
    spec = settings.model_spec(role)
    client: ChatCompletionClient
    if spec.provider == "scripted":
        player = _player_for(settings, player, role)
        key = turn_key(role, step)
        client = ScriptedChatCompletionClient(player, role, model=spec.model, meter=meter, key=key)
    else:
        policy = RetryPolicy(settings.model_timeout_s, settings.model_max_retries, settings.model_backoff_s)
        inner = _openai(settings, spec) if spec.provider == "openai" else _ollama(settings, spec)
        client = ResilientChatCompletionClient(inner, spec, policy, meter, limiter_for(settings))
        if tools is not None and spec.constrain != "off":
            client = with_constraint(
                client,
                settings,
                spec,
                tools,
                log=constraint_log,
                probes=probes,
                ground=ground or UNKNOWN_GROUND,
                meter=meter,
            )
    if spec.write_format == "fenced":  # above the grammar, which then allows the model file blocks
        client = FencedWritesClient(client, role)
    if spec.context_tokens is not None:
        window = spec.context_tokens
        client = ContextWindowClient(
            client, role=role, model=spec.model, window=window, completion=settings.model_max_tokens
        )
    if recorder is not None:
        recorder.add_secrets(settings.secrets())  # every configured key, by its variable's name
        client = RecordingChatCompletionClient(client, recorder, role, step)
    if settings.protocol == "native":  # above the recorder: a cassette keeps the native calls as such
        client = NativeProtocolClient(client, role, functions)
    return client


def _model_info(settings: Settings) -> ModelInfo:
    """What PSE declares of a model: nothing optional, but function calling in the native protocol."""
    return {**GENERIC_MODEL_INFO, "function_calling": settings.protocol == "native"}


def _player_for(settings: Settings, player: CassettePlayer | None, role: str) -> CassettePlayer:
    if player is not None:
        return player
    if settings.cassette is None:
        raise CassetteError(
            f"the scripted provider of {role} needs a cassette: pass --cassette FILE or set PSE_CASSETTE "
            "(or configure a real model with PSE_PROVIDER / PSE_API_KEY)"
        )
    return CassettePlayer.from_file(settings.cassette, strict=settings.replay_strict)


def _openai(settings: Settings, spec: ModelSpec) -> ChatCompletionClient:
    key = spec.api_key.get_secret_value() if spec.api_key is not None else None
    if key is None and spec.base_url is None:
        raise ConfigError(
            f"{spec.role} uses provider openai with no API key and no base URL: set PSE_API_KEY (or "
            f"PSE_{spec.role.upper()}_API_KEY / OPENAI_API_KEY), or PSE_BASE_URL for a local server"
        )
    options: dict[str, Any] = {
        "model": spec.model,
        "api_key": key or _NO_KEY_NEEDED,
        "model_info": _model_info(settings),
        "max_retries": 0,  # ResilientChatCompletionClient retries, with its own limits and typed errors
        "timeout": settings.model_timeout_s,
    }
    if spec.base_url:
        options["base_url"] = spec.base_url
    # Reads each answer's cached prompt tokens, which AutoGen's usage leaves out (`_cached`).
    options["http_client"] = http_client_reading_cache(settings.model_timeout_s)
    if settings.model_max_tokens is not None:
        options["max_tokens"] = settings.model_max_tokens
    if settings.model_temperature is not None:
        options["temperature"] = settings.model_temperature
    return OpenAIChatCompletionClient(**options)


def _ollama(settings: Settings, spec: ModelSpec) -> ChatCompletionClient:
    options: dict[str, Any] = {}
    if settings.model_max_tokens is not None:
        options["num_predict"] = settings.model_max_tokens
    if settings.model_temperature is not None:
        options["temperature"] = settings.model_temperature
    if spec.context_tokens is not None:
        options["num_ctx"] = spec.context_tokens  # Ollama's small default silently cuts the system prompt
    kwargs: dict[str, Any] = {"model": spec.model, "model_info": _model_info(settings)}
    if spec.base_url:
        kwargs["host"] = spec.base_url
    if options:
        kwargs["options"] = options
    return _OllamaClient(**kwargs)


_DONE_REASON: contextvars.ContextVar[list[str | None] | None] = contextvars.ContextVar(
    "pse_ollama_done", default=None
)
"""Where `_OllamaClient.create` finds the `done_reason` Ollama sent (the HTTP call runs in a task)."""


class _OllamaClient(OllamaChatCompletionClient):
    """AutoGen 0.7.5's Ollama client never closes its HTTP connections (`close` is a no-op), and it turns
    every `done_reason` but stop and tool_calls into "unknown": a reply cut at the token limit must still
    say `length` (the trace records it, and an empty cut reply is then named as such). This one does both."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        chat = self._client.chat

        async def chat_noting_done_reason(*args: Any, **options: Any) -> Any:
            response = await chat(*args, **options)
            holder = _DONE_REASON.get()
            if holder is not None and not options.get("stream"):
                holder.append(getattr(response, "done_reason", None))
            return response

        self._client.chat = chat_noting_done_reason  # type: ignore[method-assign]

    async def create(self, *args: Any, **kwargs: Any) -> CreateResult:
        holder: list[str | None] = []
        token = _DONE_REASON.set(holder)
        try:
            result = await super().create(*args, **kwargs)
        finally:
            _DONE_REASON.reset(token)
        if result.finish_reason == "unknown" and holder and holder[-1] == "length":
            result = result.model_copy(update={"finish_reason": "length"})
        return result

    async def close(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]
