"""How an MCP session reaches its server: a child process over stdio, or streamable HTTP with
a watched client; and what a failure looks like as one line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from typing import IO, Any

import httpx

from gated_react.errors import exception_line, one_line
from gated_react.tools._mcp_config import ServerSpec

STOP_SECONDS = 2.0
"""How long a stdio server gets to exit at the end of its input, and again after SIGTERM."""


@contextlib.asynccontextmanager
async def connect(
    spec: ServerSpec, errlog: IO[str] | None
) -> AsyncIterator[tuple[Any, Any, asyncio.Future[None]]]:
    """The server's message streams, and a future that fails when its transport breaks. A stdio
    server writes its stderr to ``errlog``: never onto the user's terminal."""
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if spec.stdio is not None and errlog is not None:
        async with _stdio(spec.stdio, errlog) as (read, write):
            yield read, write, lost
    elif spec.http is not None:
        from mcp.client.streamable_http import streamable_http_client

        client = _watched_client(spec.http.headers, lost)
        async with client, streamable_http_client(spec.http.url, http_client=client) as streams:
            yield streams[0], streams[1], lost


@contextlib.asynccontextmanager
async def _stdio(stdio: Any, errlog: IO[str]) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport (the server in a session of its own, MCP's shutdown: end of
    input, then SIGTERM, then SIGKILL), except that the server's whole process group is killed
    on every way out. A server that exits at the end of its input, as it should, or that fails
    before its session starts, would otherwise leave the children it started running."""
    import anyio
    from mcp.client.stdio import get_default_environment

    env = get_default_environment() | (stdio.env or {})
    process = await anyio.open_process(
        [stdio.command, *stdio.args],
        env=env,
        stderr=errlog,
        cwd=stdio.cwd,
        start_new_session=True,  # its own process group, whose id is its pid
    )
    try:
        async with process, anyio.create_task_group() as tasks:
            got, read = anyio.create_memory_object_stream[Any](0)
            write, sent = anyio.create_memory_object_stream[Any](0)
            tasks.start_soon(_read_messages, process.stdout, got)
            tasks.start_soon(_write_messages, process.stdin, sent)
            try:
                yield read, write
            finally:
                await _stop(process)
                await read.aclose()
                await write.aclose()
    finally:
        signal_group(process.pid, signal.SIGKILL)


async def _read_messages(stdout: Any, sink: Any) -> None:
    """The server's output as session messages, one per line; a line that is not JSON-RPC is
    passed on as its error, which the session skips (as the SDK does)."""
    import anyio
    from anyio.streams.text import TextReceiveStream
    from mcp import types
    from mcp.shared.message import SessionMessage

    async with sink:
        pending = ""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in TextReceiveStream(stdout, errors="replace"):
                *lines, pending = (pending + chunk).split("\n")
                for line in lines:
                    item: Any
                    try:
                        item = SessionMessage(types.JSONRPCMessage.model_validate_json(line))
                    except ValueError as exc:
                        item = exc
                    await sink.send(item)


async def _write_messages(stdin: Any, source: Any) -> None:
    import anyio

    async with source:
        with contextlib.suppress(anyio.ClosedResourceError):
            async for message in source:
                line = message.message.model_dump_json(by_alias=True, exclude_none=True)
                await stdin.send((line + "\n").encode())


async def _stop(process: Any) -> None:
    """MCP's stdio shutdown: close the server's input and give it time to exit, then SIGTERM
    (to its group), more time; the caller's SIGKILL ends whatever is left."""
    import anyio

    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    for then in (signal.SIGTERM, None):
        with anyio.move_on_after(STOP_SECONDS):
            await process.wait()
            return
        if then is not None:
            signal_group(process.pid, then)


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pid`` leads, if any of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def relay(source: Any, sink: Any, *, fatal: bool) -> None:
    """Pass what the server sends on to the session. Over HTTP an exception in the stream means
    a request failed in transport: the request it belonged to would never be answered, so the
    session ends with it. Over stdio it is one line that is not JSON-RPC, which the session
    skips."""
    async with source, sink:
        async for item in source:
            if fatal and isinstance(item, Exception):
                raise item
            await sink.send(item)


def _watched_client(headers: dict[str, str], lost: asyncio.Future[None]) -> httpx.AsyncClient:
    """The client the MCP SDK would make (30 s to connect, 300 s between reads), whose
    transport fails ``lost`` with the first broken stream: the SDK drops a reply stream that
    breaks (the server went away mid-reply) and leaves its request waiting for good."""
    return httpx.AsyncClient(
        headers=dict(headers), timeout=httpx.Timeout(30, read=300), transport=_Watched(lost)
    )


class _Watched(httpx.AsyncHTTPTransport):
    def __init__(self, lost: asyncio.Future[None]) -> None:
        super().__init__()
        self._lost = lost

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        response.stream = _Stream(response.stream, self._lost)
        return response


class _Stream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, lost: asyncio.Future[None]) -> None:
        self._inner = inner
        self._lost = lost

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx.TimeoutException:
            raise  # a quiet stream, not a lost server: the call's own timeout decides
        except httpx.TransportError as exc:
            if not self._lost.done():
                self._lost.set_exception(exc)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


def last_words(errlog: IO[str] | None) -> str:
    """The last line a stdio server wrote to its stderr, if any."""
    if errlog is None:
        return ""
    with contextlib.suppress(OSError, ValueError):
        size = os.fstat(errlog.fileno()).st_size
        tail = os.pread(errlog.fileno(), 2000, max(0, size - 2000))
        lines = [line for line in tail.decode(errors="replace").splitlines() if line.strip()]
        return one_line(lines[-1])[:300] if lines else ""
    return ""


def leaf(exc: BaseException | None) -> BaseException | None:
    """The first real error inside nested exception groups (task groups wrap what failed)."""
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (real or list(exc.exceptions))[0]
    return exc


def describe(exc: BaseException | None) -> str:
    """An exception in a few words: ``Name: message``, or what it means for a session."""
    if exc is None or isinstance(exc, asyncio.CancelledError):
        return "its session was closed"
    text = exception_line(exc, first_only=True)
    name = type(exc).__name__
    if (name == "McpError" and text == "Connection closed") or isinstance(exc, ConnectionError):
        return "it closed the connection"
    return name if text in ("", name) else f"{name}: {text}"
