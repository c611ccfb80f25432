"""Where a batch's tool calls run: one thread pool every run of the process shares, or the calling thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, cast

__all__ = ["MAX_TOOL_THREADS", "Offload", "complete", "on_this_thread", "on_tool_pool"]

MAX_TOOL_THREADS = 64
"""Tool calls of all runs in this process share one pool of this many threads (50 runs may share it)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_T = TypeVar("_T")


def tool_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=MAX_TOOL_THREADS, thread_name_prefix="pse-tool")
        return _pool


class Offload(Protocol):
    """Where a step of the batch runs: the shared tool pool (async path) or the calling thread (sync)."""

    def __call__(self, work: Callable[[], _T]) -> Awaitable[_T]: ...


async def on_tool_pool(work: Callable[[], _T]) -> _T:
    return await asyncio.get_running_loop().run_in_executor(tool_pool(), work)


async def on_this_thread(work: Callable[[], _T]) -> _T:
    return work()


def complete(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Drive `execute`'s own coroutine on this thread, without an event loop: one loop serves both paths.

    With `on_this_thread` as its offload the coroutine never suspends, so one `send` runs it to the end.
    """
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return cast(_T, finished.value)
    coroutine.close()
    raise RuntimeError("a batch run on the calling thread waited for something; it must not")
