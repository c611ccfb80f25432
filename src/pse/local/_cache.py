"""How many prompt tokens llama.cpp served from its cache, reported the way OpenAI reports it.

llama-cpp-python keeps the KV cache of the last prompt it evaluated and, with `cache` on in a model's
settings, saves each finished prompt's state in RAM (`LlamaRAMCache`) and reloads the longest matching
one: a role whose next turn starts with its previous prompt (its system message, the task, its own
turns) evaluates only what is new. Its server does not say how much it reused, so PSE could not report
it. `serve_cached_tokens` adds it: each chat completion's `usage` gains
`prompt_tokens_details.cached_tokens` (what PSE's OpenAI client reads, `pse.models._cached`), counted
as llama-cpp-python decides it (`Llama.generate`: the common prefix of the tokens in the context and the
new prompt, less the one token it re-evaluates when the whole prompt matched).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

__all__ = ["serve_cached_tokens"]

_REUSED: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("pse_reused", default=None)
"""The reused prefix of the request being served (a dict shared with the worker thread that runs it)."""


def _reused_prefix(llama: Any, tokens: list[int]) -> int:
    """The prompt tokens `Llama.generate` will not evaluate again (its own rule, read before it runs)."""
    if llama.n_tokens <= 0:
        return 0
    prefix = 0
    for cached, new in zip(llama._input_ids[: llama.n_tokens].tolist(), tokens, strict=False):
        if cached != new:
            break
        prefix += 1
    return prefix - 1 if prefix == len(tokens) else prefix


def _patch_generate(llama_class: Any) -> None:
    original = llama_class.generate
    if getattr(original, "_pse_counts_reuse", False):
        return

    def generate(self: Any, tokens: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        tokens = list(tokens)
        holder = _REUSED.get()
        if holder is not None and kwargs.get("reset", True):
            holder["cached"] = max(0, _reused_prefix(self, tokens))
        return original(self, tokens, *args, **kwargs)  # type: ignore[no-any-return]

    generate._pse_counts_reuse = True  # type: ignore[attr-defined]
    llama_class.generate = generate


def serve_cached_tokens(app: Any, llama_class: Any) -> None:
    """Make every non-streamed chat completion of `app` (llama-cpp-python's FastAPI app) report the
    prompt tokens its model reused, as `usage.prompt_tokens_details.cached_tokens`."""
    _patch_generate(llama_class)

    @app.middleware("http")  # type: ignore[untyped-decorator]
    async def report_cached(request: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return await call_next(request)
        holder: dict[str, int] = {}
        token = _REUSED.set(holder)  # the worker thread gets a copy of this context: the same dict
        try:
            response = await call_next(request)
        finally:
            _REUSED.reset(token)
        if "cached" not in holder or "application/json" not in response.headers.get("content-type", ""):
            return response
        body = b"".join([chunk async for chunk in response.body_iterator])
        return _with_cached(body, holder["cached"], response)

    del report_cached


def _with_cached(body: bytes, cached: int, response: Any) -> Any:
    from starlette.responses import Response

    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    try:
        data = json.loads(body)
        usage = data["usage"]
    except (ValueError, KeyError, TypeError):
        return Response(body, status_code=response.status_code, headers=headers)
    usage["prompt_tokens_details"] = {"cached_tokens": min(cached, int(usage.get("prompt_tokens", cached)))}
    return Response(json.dumps(data), status_code=response.status_code, headers=headers)
