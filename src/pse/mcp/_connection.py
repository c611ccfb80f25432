"""One MCP server process in the sandbox and its MCP session (the official SDK's `ClientSession`).

The session speaks newline-delimited JSON-RPC over the process's stdin and stdout (the MCP stdio
transport). It runs on a thread of its own with its own event loop: the ToolAgent calls tools from its
thread pool, synchronously, and each call waits for its answer with the tool timeout. Calls to one
server run one at a time (its workspace copy is refreshed before each, `pse.sandbox.start_process`).

Failure rule: a server that exits, breaks the protocol (a message over `MAX_MESSAGE_BYTES`) or does not
answer a call in time is **down** for the rest of the run: that call ends as `error` with what happened
(and the end of its stderr), every later call to it is an `error` saying it is down, and the run goes
on. It is not restarted: a server that crashed once may crash again, and its state is gone. A server
that answers with a JSON-RPC error (an unknown tool, arguments it refuses) stays up.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pse.exceptions import ToolInfrastructureError
from pse.mcp._config import McpServerSpec, expand_command
from pse.sandbox import Accept, Sandbox, SandboxedProcess, Synced, start_process

__all__ = ["MAX_MESSAGE_BYTES", "MAX_TOOLS", "START_TIMEOUT_S", "CallAnswer", "McpConnection"]

START_TIMEOUT_S = 30.0
"""A server must start, initialize and list its tools within this many seconds."""
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest JSON-RPC message PSE reads from a server; a longer one means the server is broken."""
MAX_TOOLS = 64
"""Most tools PSE lists from one server (the rest are not offered)."""
_MAX_PAGES = 10
_ANSWER_GRACE_S = 5.0  # the calling thread waits this much longer than the call's own timeout
_EXIT_WAIT_S = 1.0  # a server that closed its stdout gets this long to exit, for its exit code
_LIVE: weakref.WeakSet[McpConnection] = weakref.WeakSet()


@atexit.register
def _kill_live() -> None:
    """A run prepared but never run to its end leaves servers behind: none outlives the process."""
    for connection in list(_LIVE):
        if connection.process is not None:
            connection.process.kill()


@dataclass(frozen=True, slots=True)
class CallAnswer:
    """What one call gave: the server's result (content blocks, structured content, is_error), or why
    there is none (`problem`, with `down` when the server is gone)."""

    result: Any = None
    problem: str | None = None
    down: bool = False
    synced: Synced = field(default_factory=Synced)


class McpConnection:
    """A server of one run: `start` lists its tools, `call` runs one, `stop` ends it.

    Args:
        name: the server's name in task.toml.
        spec: its `[mcp.NAME]` table.
        sandbox: the run's sandbox (its mode, limits, identity, halt).
        task_dir: the task folder, given to the server as a private read-only copy (`{task_dir}`).
    """

    def __init__(self, name: str, spec: McpServerSpec, sandbox: Sandbox, task_dir: Path | None) -> None:
        self.name = name
        self.spec = spec
        self.sandbox = sandbox
        self.task_dir = task_dir
        self.down: str | None = None
        """Why the server is gone (None while it is up)."""
        self.process: SandboxedProcess | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one call at a time: the workspace copy is per call

    @property
    def label(self) -> str:
        """The sandbox that runs the server, as the audit names it (bwrap-ro, fallback-copy, …)."""
        return self.process.label if self.process is not None else self.sandbox.mode

    def start(self) -> list[Any]:
        """Start the server in the sandbox, initialize the session and list its tools (SDK `Tool`s).

        Raises:
            ToolInfrastructureError: it did not start, initialize or list its tools in time.
        """
        self._thread = threading.Thread(target=self._run, name=f"pse-mcp-{self.name}", daemon=True)
        _LIVE.add(self)
        self._thread.start()
        try:
            return self._ready.result(timeout=START_TIMEOUT_S + _ANSWER_GRACE_S)
        except concurrent.futures.TimeoutError:
            self.stop()
            raise ToolInfrastructureError(
                f"MCP server {self.name} did not start within {START_TIMEOUT_S:g} s"
            ) from None
        except ToolInfrastructureError:
            self.stop()
            raise

    def call(
        self, tool: str, arguments: Mapping[str, Any], *, keep: bool, accept: Accept | None
    ) -> CallAnswer:
        """Call `tool` and wait for its answer (the tool timeout, cut by the run's wall-clock limit).

        `keep`: bring back what the call changed in a read-write server's workspace copy.

        Raises:
            ToolInfrastructureError: the workspace copy could not be made (the machinery, not the server).
        """
        with self._lock:
            if self.down is not None:
                why = f"MCP server {self.name} is down since an earlier call ({self.down})"
                return CallAnswer(problem=f"{why}; it is not restarted in this run", down=True)
            process, loop = self.process, self._loop
            assert process is not None and loop is not None
            timeout, why = process.call_timeout()
            if timeout <= 0:
                return CallAnswer(problem=f"not run: {why}")
            copy = process.before_call()
            future = asyncio.run_coroutine_threadsafe(self._call(tool, dict(arguments), timeout), loop)
            try:
                answer = future.result(timeout=timeout + _ANSWER_GRACE_S)
            except concurrent.futures.TimeoutError:
                answer = CallAnswer(problem=f"did not answer within {timeout:g} s ({why})", down=True)
            if answer.down:  # read how it ended before its own thread winds it down and drops its files
                exited = process.wait(_EXIT_WAIT_S) if self.down is not None else process.poll()
                tail = process.stderr_tail().strip()
                self._fail(answer.problem or "gone")
                return CallAnswer(problem=self._crash_note(exited, tail), down=True)
            return CallAnswer(
                answer.result, answer.problem, synced=process.after_call(copy, accept, keep=keep)
            )

    def stop(self) -> None:
        """End the session and the process (idempotent)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=START_TIMEOUT_S)
        if self.process is not None:
            self.process.stop()

    # --- the server's own thread -------------------------------------------------------------------

    def _fail(self, why: str) -> None:
        """The server is gone: kill it now (any thread), and let its own thread wind the session down."""
        self.down = self.down or why
        if self.process is not None:
            self.process.kill()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)

    def _crash_note(self, code: int | None, tail: str) -> str:
        """What a call that lost its server says: what happened, how it ended, its last stderr."""
        exited = f"; it exited with code {code}" if code is not None else "; PSE stopped it"
        said = f"\n[the end of its stderr:]\n{tail}" if tail else ""
        return (
            f"MCP server {self.name} failed during the call: {self.down}{exited}. It is down for the rest "
            f"of this run; its tools will not answer again.{said}"
        )

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported through the start future, or kept as why it is down
            if not self._ready.done():
                self._ready.set_exception(self._start_error(exc))
            else:
                self.down = self.down or f"its session ended: {_leaf(exc)}"

    def _start_error(self, exc: BaseException) -> ToolInfrastructureError:
        """Why the server could not be started: what went wrong, how it exited, its last stderr."""
        detail = str(exc) if isinstance(exc, ToolInfrastructureError) else self.down or _leaf(exc)
        process = self.process
        code = process.wait(_EXIT_WAIT_S) if process is not None else None
        tail = process.stderr_tail().strip() if process is not None else ""
        how = f" (it exited with code {code})" if code is not None else ""
        said = f"; the end of its stderr: {tail}" if tail else ""
        return ToolInfrastructureError(f"MCP server {self.name} could not be started: {detail}{how}{said}")

    async def _main(self) -> None:
        import anyio
        from mcp import ClientSession

        from pse.mcp._pipes import pipe_streams

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        private = {"task_dir": self.task_dir} if self.task_dir is not None else {}
        self.process = start_process(
            self.sandbox,
            expand_command(self.spec.command),
            access=self.spec.workspace,
            network=self.spec.network,
            private=private,
            cwd=self.spec.start_dir(),
            env=self.spec.env,
        )
        try:
            streams = pipe_streams(self.process, MAX_MESSAGE_BYTES, self._fail)
            async with streams as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(START_TIMEOUT_S):
                    await session.initialize()
                    tools = await _list_tools(session)
                self._session = session
                self._ready.set_result(tools)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(self._start_error(exc))
            raise
        finally:
            # Killed, not cleaned up: a call may still read its exit code and stderr; `stop` drops them.
            self.process.kill()

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> CallAnswer:
        import anyio
        from mcp import MCPError

        try:
            with anyio.fail_after(timeout):
                result = await self._session.call_tool(tool, arguments)
        except TimeoutError:
            return CallAnswer(problem=f"did not answer within {timeout:g} s", down=True)
        except MCPError as exc:
            if self.down is not None:  # the transport saw it go before the session failed the call
                return CallAnswer(problem=self.down, down=True)
            return CallAnswer(problem=f"the server refused the call: {exc}")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            return CallAnswer(problem=f"the connection broke ({type(exc).__name__})", down=True)
        return CallAnswer(result)


def _leaf(exc: BaseException) -> str:
    """The first exception that is not a group of others, as `Type: message`."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _list_tools(session: Any) -> list[Any]:
    """Every tool the server lists, page by page, at most `MAX_TOOLS`."""
    from mcp.types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += list(page.tools)
        cursor = page.next_cursor
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    return tools[:MAX_TOOLS]
