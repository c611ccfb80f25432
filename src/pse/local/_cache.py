"""Per request of the local server: the prompt tokens llama.cpp served from its cache, and a stop when the
client goes away.

llama-cpp-python keeps the KV cache of the last prompt it evaluated and, with `cache` on in a model's
settings, saves each finished prompt's state in RAM (`LlamaRAMCache`) and reloads the longest matching
one: a role whose next turn starts with its previous prompt (its system message, the task, its own
turns) evaluates only what is new. Its server does not say how much it reused, so PSE could not report
it. `serve_cached_tokens` adds it: each chat completion's `usage` gains
`prompt_tokens_details.cached_tokens` (what PSE's OpenAI client reads, `pse.models._cached`), counted
as llama-cpp-python decides it (`Llama.generate`: the common prefix of the tokens in the context and the
new prompt, less the one token it re-evaluates when the whole prompt matched).

**An abandoned request stops.** llama-cpp-python runs a chat completion that is not streamed to its end
even when its client has gone (a timeout, a stopped run): the next request then waits behind tokens
nobody reads (a run's first call timed out twice in a row so, issue 44). `serve_cached_tokens` also
watches each such request's connection (every `WATCH_S`) and, once the client is gone, ends the model's
token stream at the next token: the server is free for the next request within a token's time.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

__all__ = ["serve_cached_tokens"]

_REUSED: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("pse_reused", default=None)
"""The request being served: its reused prefix (`cached`) and whether its client left (`abandoned`), in a
dict shared with the worker thread that runs it."""
WATCH_S = 0.2
"""How often a request's connection is looked at while the model answers it."""


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
        produced: Iterator[int] = original(self, tokens, *args, **kwargs)
        return produced if holder is None else _until_abandoned(produced, holder)

    generate._pse_counts_reuse = True  # type: ignore[attr-defined]
    llama_class.generate = generate


def _until_abandoned(produced: Iterator[int], holder: dict[str, int]) -> Iterator[int]:
    """`produced`, ended at the first token after the request's client left."""
    try:
        for token in produced:
            if holder.get("abandoned"):
                return
            yield token
    finally:
        close = getattr(produced, "close", None)
        if close is not None:
            close()


async def _watch(request: Any, holder: dict[str, int]) -> None:
    """Mark the request abandoned once its client has gone (its connection closed)."""
    while not await request.is_disconnected():
        await asyncio.sleep(WATCH_S)
    holder["abandoned"] = 1


def serve_cached_tokens(app: Any, llama_class: Any) -> None:
    """Make every non-streamed chat completion of `app` (llama-cpp-python's FastAPI app) report the
    prompt tokens its model reused, as `usage.prompt_tokens_details.cached_tokens`, and stop generating
    once its client has gone."""
    _patch_generate(llama_class)

    @app.middleware("http")  # type: ignore[untyped-decorator]
    async def report_cached(request: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return await call_next(request)
        holder: dict[str, int] = {}
        token = _REUSED.set(holder)  # the worker thread gets a copy of this context: the same dict
        await request.body()  # read now, so the watcher's reads can only see the client leave
        watcher = asyncio.ensure_future(_watch(request, holder))
        try:
            response = await call_next(request)
        finally:
            watcher.cancel()
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
