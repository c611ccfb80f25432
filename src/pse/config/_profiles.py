"""A role's model resolved from the settings, and what PSE assumes of a model it knows only by name.

A user who sets only `PSE_PROVIDER`, `PSE_BASE_URL` and `PSE_MODEL` gets settings that fit the model. A
model is taken as **small** when its name gives a size of at most `SMALL_MODEL_B` billion parameters
(`qwen2.5-coder-1.5b`, `Qwen/Qwen2.5-7B-Instruct`, `smollm2-135m`); a model whose name gives none is
configured as the user says (`PSE_WRITE_FORMAT=fenced`, `PSE_MODEL_MAX_TOKENS`, ...). A small model:

* writes files in the `fenced` format (`PSE_WRITE_FORMAT=auto`): the path on a line, then the whole
  file in a Markdown code block, which small models produce far more reliably than a file inside an XML
  value (README, "Real models");
* gets `SMALL_MODEL_DEFAULTS` for every one of those settings the user did not set: a temperature
  named in every request (0.8; a request that names none gets whatever its server defaults to). Greedy
  decoding was tried and measured worse: a retry decoded greedily from nearly the same context repeats
  the first attempt, and the held-out runs at 0 left no right module in 10 tries against 9 in 36 sampled
  (issue 44); a turn that ends
  (a token limit, and a grammar sized at one character a token, so a model looping on digits is closed
  by it), a call timeout that fits a model writing ten tokens a second on a CPU, the repairs a small
  model's one-time nudges use, as many failures of one criterion as a plan has cycles (its checks change
  sides between cycles), tool output a short window can hold, and a context window of 16,384
  tokens (the packaged server's `n_ctx`; set `PSE_MODEL_CONTEXT_TOKENS` to your server's), so a phase
  that outgrows it is compacted instead of refused by the server. Without them the 1.5B model's first
  call of a run never returned, twice in a row (no token limit; issue 44).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pse.config._models import ModelSpec, ProtocolMode, ProviderName, RoleSettings, WriteFormat

__all__ = [
    "SMALL_MODEL_B",
    "SMALL_MODEL_DEFAULTS",
    "is_small_model",
    "resolve_model_spec",
    "small_model_defaults",
    "write_format_for",
]

SMALL_MODEL_B = 14.0
"""Most parameters, in billions, of a model PSE treats as small."""
SMALL_MODEL_DEFAULTS: dict[str, object] = {
    "model_temperature": 0.8,
    "model_max_tokens": 4096,
    "constrain_chars_per_token": 1,
    "model_timeout_s": 600.0,
    "format_retries": 2,
    "max_criterion_failures": 3,
    "tool_output_limit": 4000,
    "model_context_tokens": 16384,
}
"""The settings a small model gets where the user set none (see the module docstring)."""
_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z0-9])", re.IGNORECASE)
_DEFAULT_MODELS: dict[str, str] = {"openai": "gpt-4o-mini", "ollama": "qwen2.5:7b", "scripted": "scripted"}


def parameter_billions(model: str) -> float | None:
    """The size a model's name gives, in billions of parameters (`qwen2.5-coder-1.5b` → 1.5), or None."""
    sizes = [float(n) / (1000 if unit.lower() == "m" else 1) for n, unit in _SIZE.findall(model)]
    return max(sizes) if sizes else None


def is_small_model(model: str) -> bool:
    """Whether PSE treats the model as small: its name says it has at most `SMALL_MODEL_B` billion
    parameters."""
    size = parameter_billions(model)
    return size is not None and size <= SMALL_MODEL_B


def write_format_for(
    wanted: WriteFormat, provider: ProviderName, model: str, protocol: ProtocolMode
) -> Literal["call", "fenced"]:
    """How a role writes files: `wanted` unless auto; auto is fenced for a small model of a real provider
    on the XML protocol, call otherwise (the native protocol calls write_file as a function)."""
    if protocol == "native":
        return "call"
    if wanted != "auto":
        return wanted
    return "fenced" if provider != "scripted" and is_small_model(model) else "call"


def resolve_model_spec(role: str, own: RoleSettings, base: RoleSettings, protocol: ProtocolMode) -> ModelSpec:
    """One role's model: its own settings (`PSE_<ROLE>_*`) first, then the global ones (`base`)."""
    provider = own.provider or base.provider
    api_key = own.api_key or base.api_key
    defaulted = False
    if provider is None:
        provider, defaulted = ("openai", False) if api_key is not None else ("scripted", True)
    model = own.model or base.model or _DEFAULT_MODELS[provider]
    wanted = own.write_format or base.write_format or "auto"
    return ModelSpec(
        role=role,
        provider=provider,
        model=model,
        base_url=own.base_url or base.base_url,
        api_key=api_key,
        provider_was_defaulted=defaulted,
        constrain=own.constrain or base.constrain or "auto",
        context_tokens=own.model_context_tokens or base.model_context_tokens,
        write_format=write_format_for(wanted, provider, model, protocol),
    )


def small_model_defaults(spec: ModelSpec) -> Mapping[str, object]:
    """`SMALL_MODEL_DEFAULTS` when the model of `spec` (the run's, `PSE_MODEL`, of a real provider) is
    small; nothing otherwise. The settings apply each where the user set none."""
    if spec.provider == "scripted" or not is_small_model(spec.model):
        return {}
    return SMALL_MODEL_DEFAULTS
