"""The MCP stdio transport over a sandboxed process's pipes: newline-delimited JSON-RPC, bounded.

The SDK's own `stdio_client` starts its server itself, outside any sandbox; PSE starts the server with
`pse.sandbox.start_process` and hands the SDK's `ClientSession` the same pair of streams `stdio_client`
would. Reading is bounded: a line longer than the limit means the server is broken (`on_broken`), and
a line that is no JSON-RPC message (a stray print) is dropped, never handed to the session. The end of
its stdout means it is gone (`on_broken` too), told before the session fails the calls waiting on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from pse.sandbox import SandboxedProcess

__all__ = ["pipe_streams"]


@contextlib.asynccontextmanager
async def pipe_streams(
    process: SandboxedProcess, limit: int, on_broken: Callable[[str], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) for `mcp.ClientSession`, over `process`'s stdout and stdin."""
    import anyio
    import mcp.types as types
    from mcp.shared.message import SessionMessage

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), process.stdout
    )
    write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, process.stdin)
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def from_server() -> None:
        async with read_send:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # the line is over the limit
                    on_broken(f"it sent a message of more than {limit} bytes")
                    return
                except OSError:
                    return
                if not line:  # end of its stdout: it exited, or closed it; either way it is gone
                    on_broken("it closed the connection")
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    continue
                try:
                    await read_send.send(SessionMessage(message))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def to_server() -> None:
        async with write_recv:
            async for item in write_recv:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    writer.write(data.encode("utf-8"))
                    await writer.drain()
                except OSError:
                    return

    async with anyio.create_task_group() as group:
        group.start_soon(from_server)
        group.start_soon(to_server)
        try:
            yield read_recv, write_send
        finally:
            group.cancel_scope.cancel()
            read_transport.close()
            write_transport.close()
