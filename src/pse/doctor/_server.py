"""What a model server says about itself and what it takes: reachability, models, context window,
grammars, native tool calls. Raw HTTP, one tiny request each, bounded by a timeout.

`grammar_support` and `native_tool_support` are the seams for the constrained-decoding and
native-protocol work: when `pse.models` detects these itself, these functions should call it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from pse.config import ModelSpec
from pse.models import public_url
from pse.tools import Tool

__all__ = [
    "GRAMMAR_PROBE",
    "Probe",
    "ServerFacts",
    "grammar_support",
    "largest_grammar_support",
    "native_tool_support",
    "server_facts",
]

Support = Literal["yes", "no", "unknown"]
GRAMMAR_PROBE = "pse-grammar-ok"
"""The only text the probe grammar allows: a server that returns anything else ignored the grammar."""
_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "n_ctx", "n_ctx_train")


@dataclass(frozen=True)
class Probe:
    """A capability: yes, no or unknown, and what the server did."""

    support: Support
    detail: str


@dataclass(frozen=True)
class ServerFacts:
    """Reachability and what the server lists.

    Attributes:
        latency_ms: the round trip of the model list (None when unreachable).
        served: the configured model is listed (None when the server lists none).
        context_tokens: the context window the server reports for it, if it reports one.
    """

    url: str
    reachable: bool
    latency_ms: float | None = None
    models: tuple[str, ...] = ()
    served: bool | None = None
    context_tokens: int | None = None
    error: str = ""


def _root(spec: ModelSpec) -> str:
    if spec.provider == "ollama":
        return (spec.base_url or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434").rstrip("/")
    return (spec.base_url or "https://api.openai.com/v1").rstrip("/")


def _headers(spec: ModelSpec) -> dict[str, str]:
    if spec.api_key is None or spec.provider != "openai":
        return {}
    return {"Authorization": f"Bearer {spec.api_key.get_secret_value()}"}


def _context_of(entry: dict[str, Any]) -> int | None:
    for holder in (entry, entry.get("meta") or {}):
        for key in _CONTEXT_KEYS:
            value = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(value, int) and value > 0:
                return value
    return None


async def server_facts(spec: ModelSpec, timeout_s: float) -> ServerFacts:
    """Reach the server, list its models, read the context window it reports for `spec.model`."""
    root, url = _root(spec), public_url(spec.base_url, spec.provider)
    async with httpx.AsyncClient(timeout=timeout_s, headers=_headers(spec)) as client:
        started = time.perf_counter()
        try:
            listing = await client.get(f"{root}/api/tags" if spec.provider == "ollama" else f"{root}/models")
        except httpx.HTTPError as exc:
            return ServerFacts(url, False, error=f"{type(exc).__name__}: {exc}".rstrip(": "))
        latency = (time.perf_counter() - started) * 1000
        if listing.status_code in (401, 403):
            error = f"HTTP {listing.status_code}: the server refused the API key"
            return ServerFacts(url, True, latency, error=error)
        if listing.status_code >= 400:
            return ServerFacts(url, True, latency)  # lists no models: whether it serves ours is unknown
        entries = [e for e in _entries(listing) if isinstance(e, dict)]
        names = tuple(str(e.get("id") or e.get("name") or e.get("model")) for e in entries)
        mine = next((e for e, n in zip(entries, names, strict=True) if n == spec.model), None)
        context = _context_of(mine) if mine is not None else None
        if context is None:
            context = await _reported_context(client, spec, root)
    return ServerFacts(url, True, latency, names, (spec.model in names) if names else None, context)


def _entries(listing: httpx.Response) -> list[Any]:
    try:
        body = listing.json()
    except ValueError:
        return []
    found = body.get("data", body.get("models", [])) if isinstance(body, dict) else []
    return found if isinstance(found, list) else []


async def _reported_context(client: httpx.AsyncClient, spec: ModelSpec, root: str) -> int | None:
    """llama.cpp's `/props` (its slot's n_ctx) or Ollama's `/api/show` (the model's context_length)."""
    try:
        if spec.provider == "ollama":
            shown = await client.post(f"{root}/api/show", json={"model": spec.model})
            info = shown.json().get("model_info", {}) if shown.status_code == 200 else {}
            lengths = [v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)]
            return lengths[0] if lengths else None
        props = await client.get(f"{root.removesuffix('/v1')}/props")
        if props.status_code != 200:
            return None
        settings = props.json().get("default_generation_settings", {})
        return _context_of(settings) if isinstance(settings, dict) else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


async def _chat(spec: ModelSpec, timeout_s: float, **fields: Any) -> tuple[int, dict[str, Any], str]:
    """One raw chat request: (status, the reply's message, error text)."""
    root = _root(spec)
    messages = fields.pop("messages")
    if spec.provider == "ollama":
        url, body = f"{root}/api/chat", {"model": spec.model, "messages": messages, "stream": False, **fields}
    else:
        url = f"{root}/chat/completions"
        body = {"model": spec.model, "messages": messages, "temperature": 0, "max_tokens": 64, **fields}
    try:
        async with httpx.AsyncClient(timeout=timeout_s, headers=_headers(spec)) as client:
            reply = await client.post(url, json=body)
    except httpx.HTTPError as exc:
        return 0, {}, f"{type(exc).__name__}: {exc}"
    if reply.status_code >= 400:
        return reply.status_code, {}, f"HTTP {reply.status_code}: {reply.text[:200]}"
    try:
        data = reply.json()
        message = data["message"] if spec.provider == "ollama" else data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return reply.status_code, {}, f"unreadable reply: {reply.text[:200]}"
    return reply.status_code, message if isinstance(message, dict) else {}, ""


async def grammar_support(spec: ModelSpec, timeout_s: float) -> Probe:
    """Does the server honour a GBNF `grammar` field (llama.cpp does)? One 16-token request."""
    if spec.provider == "ollama":
        return Probe("no", "Ollama takes a JSON schema (format), not a GBNF grammar")
    status, message, error = await _chat(
        spec,
        timeout_s,
        messages=[{"role": "user", "content": "Say anything."}],
        max_tokens=16,
        grammar=f'root ::= "{GRAMMAR_PROBE}"',
    )
    if error:
        return Probe("no" if 400 <= status < 500 else "unknown", f"grammar request refused: {error}")
    text = str(message.get("content") or "").strip()
    if text == GRAMMAR_PROBE:
        return Probe("yes", "the reply followed the grammar")
    return Probe("no", f"the server ignored the grammar field (replied {text[:40]!r})")


async def largest_grammar_support(spec: ModelSpec, timeout_s: float, grammar: str, what: str) -> Probe:
    """Does the server take `grammar`, the largest a run will send (`what` names it)? One 1-token request.

    llama.cpp refuses a grammar over its repetition limit, and llama-cpp-python's server then dies: a
    request that gets no HTTP answer, after which the server no longer answers either, is reported as
    the server crashing on it.
    """
    status, _, error = await _chat(
        spec,
        timeout_s,
        messages=[{"role": "user", "content": "Say anything."}],
        max_tokens=1,
        grammar=grammar,
    )
    if not error:
        return Probe("yes", f"it took {what}")
    if status == 0:
        after = await server_facts(spec, min(timeout_s, 5.0))
        if not after.reachable:
            return Probe("no", f"the server crashed on {what} (grammar rejected?): {error}")
        return Probe("unknown", f"no answer to {what}: {error}")
    return Probe("no", f"the server rejected {what}: {error}")


async def native_tool_support(spec: ModelSpec, timeout_s: float) -> Probe:
    """Does the server return native `tool_calls` for an obvious request with `tool_choice="auto"`?"""
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    function = {"name": Tool.READ_FILE, "description": "Read a file.", "parameters": schema}
    tool = {"type": "function", "function": function}
    extra: dict[str, Any] = {"tools": [tool]}
    if spec.provider != "ollama":
        extra["tool_choice"] = "auto"
    status, message, error = await _chat(
        spec,
        timeout_s,
        messages=[{"role": "user", "content": f"Call the {Tool.READ_FILE} tool with path notes.txt."}],
        **extra,
    )
    if error:
        return Probe("no" if 400 <= status < 500 else "unknown", f"tools request refused: {error}")
    if message.get("tool_calls"):
        return Probe("yes", "the reply held tool_calls")
    return Probe("no", "the reply was text, no tool_calls (tool_choice=auto)")
