"""One function from settings and a role to an AutoGen ChatCompletionClient."""

from __future__ import annotations

from typing import Any

from autogen_core.models import ChatCompletionClient, ModelFamily, ModelInfo
from autogen_ext.models.ollama import OllamaChatCompletionClient
from autogen_ext.models.openai import OpenAIChatCompletionClient

from pse.config import ModelSpec, Settings
from pse.exceptions import CassetteError, ConfigError
from pse.models._recording import CassetteRecorder, RecordingChatCompletionClient
from pse.models._resilient import ResilientChatCompletionClient, RetryPolicy
from pse.models._scripted import CassettePlayer, ScriptedChatCompletionClient

__all__ = ["GENERIC_MODEL_INFO", "create_model_client"]

# What PSE needs from any model: plain text in, plain text out (roles request tools in XML, not natively).
# Declaring no optional capability lets any model name work with AutoGen's clients.
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
) -> ChatCompletionClient:
    """Build the model client of `role` from the settings (per-role overrides first, then the globals).

    Real providers come wrapped in `ResilientChatCompletionClient` (timeout, retries,
    typed errors); with a `recorder`, the client is further wrapped in
    `RecordingChatCompletionClient`. Nothing is printed: the caller announces a defaulted
    scripted provider (see `ModelSpec.provider_was_defaulted`).

    Args:
        settings: PSE settings.
        role: Planner, Specialist or Evaluator.
        player: the run's shared cassette player (scripted provider). Without one, the scripted
            provider loads `settings.cassette` for this client alone.
        recorder: record every exchange of this role into this recorder's cassette.

    Raises:
        ConfigError: unknown role, or the OpenAI provider has neither an API key nor a base URL.
        CassetteError: scripted provider with neither a player nor `settings.cassette`.
    """
    spec = settings.model_spec(role)
    client: ChatCompletionClient
    if spec.provider == "scripted":
        client = ScriptedChatCompletionClient(_player_for(settings, player, role), role, model=spec.model)
    else:
        policy = RetryPolicy(settings.model_timeout_s, settings.model_max_retries, settings.model_backoff_s)
        inner = _openai(settings, spec) if spec.provider == "openai" else _ollama(settings, spec)
        client = ResilientChatCompletionClient(inner, spec, policy)
    if recorder is not None:
        recorder.add_secrets(settings.secrets())  # every configured key, by its variable's name
        client = RecordingChatCompletionClient(client, recorder, role)
    return client


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
        "model_info": GENERIC_MODEL_INFO,
        "max_retries": 0,  # ResilientChatCompletionClient retries, with its own limits and typed errors
        "timeout": settings.model_timeout_s,
    }
    if spec.base_url:
        options["base_url"] = spec.base_url
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
    kwargs: dict[str, Any] = {"model": spec.model, "model_info": GENERIC_MODEL_INFO}
    if spec.base_url:
        kwargs["host"] = spec.base_url
    if options:
        kwargs["options"] = options
    return _OllamaClient(**kwargs)


class _OllamaClient(OllamaChatCompletionClient):
    """AutoGen 0.7.5's Ollama client never closes its HTTP connections (`close` is a no-op); this one does."""

    async def close(self) -> None:
        await self._client.close()  # type: ignore[no-untyped-call]
