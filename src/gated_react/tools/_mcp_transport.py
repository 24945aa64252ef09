"""How an MCP session reaches its server: a child process over stdio, or streamable HTTP with
a watched client; and what a failure looks like as one line."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import IO, Any, TextIO, cast

import httpx

from gated_react.errors import exception_line, one_line
from gated_react.tools._mcp_config import ServerSpec


@contextlib.asynccontextmanager
async def connect(
    spec: ServerSpec, errlog: IO[str] | None
) -> AsyncIterator[tuple[Any, Any, asyncio.Future[None]]]:
    """The server's message streams, and a future that fails when its transport breaks. A stdio
    server writes its stderr to ``errlog``: never onto the user's terminal."""
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if spec.stdio is not None and errlog is not None:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        stdio = spec.stdio
        params = StdioServerParameters(
            command=stdio.command, args=stdio.args, env=stdio.env, cwd=stdio.cwd
        )
        async with stdio_client(params, errlog=cast(TextIO, errlog)) as (read, write):
            yield read, write, lost
    elif spec.http is not None:
        from mcp.client.streamable_http import streamable_http_client

        client = _watched_client(spec.http.headers, lost)
        async with client, streamable_http_client(spec.http.url, http_client=client) as streams:
            yield streams[0], streams[1], lost


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
