"""MCP sessions held open while their tools are in use: one per server, all on one private event
loop thread. Any caller reaches them the same way: a sync ``invoke`` on the runner's worker
thread (which has its own loop), an ``ainvoke`` on the caller's loop. Closing them cancels the
calls still running and ends every stdio server process; so does interpreter exit, for sets
nobody closed. The MCP libraries are imported here, when servers start, never at import."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import tempfile
import threading
import weakref
from typing import IO, TYPE_CHECKING, Any

from gated_react.errors import exception_line
from gated_react.redact import redact
from gated_react.tools import _mcp_transport as transport
from gated_react.tools._mcp_config import MCPError, ServerSpec

if TYPE_CHECKING:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import BaseTool

STOP_GRACE = 6.0
"""Seconds a server gets to stop after its session closes (stdio: stdin closed, then 2 s, then
SIGTERM and SIGKILL) before its session is cancelled, which kills the process outright."""
_OPEN: weakref.WeakSet[Servers] = weakref.WeakSet()

# The SDK logs what it recovers from ("Session termination failed") and what we report
# ourselves; with no handler anywhere Python would print it on stderr. An app that configures
# logging still gets these records.
logging.getLogger("mcp").addHandler(logging.NullHandler())


class Servers:
    """The sessions of a set of servers, started together and closed together."""

    def __init__(self, specs: list[ServerSpec], *, startup_timeout: float, call_timeout: float):
        self._specs = {spec.name: spec for spec in specs}
        self._startup_timeout, self._call_timeout = startup_timeout, call_timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="gated-react-mcp", daemon=True
        )
        self._stop = asyncio.Event()
        self._holders: dict[str, asyncio.Task[None]] = {}
        self._ready: dict[str, asyncio.Future[list[BaseTool]]] = {}
        self._gone: dict[str, str] = {}
        self._errlogs: dict[str, IO[str]] = {}
        self._calls: set[asyncio.Future[Any]] = set()
        self._closed = False
        self._lock = threading.Lock()
        _OPEN.add(self)

    def start(self) -> list[tuple[str, BaseTool]]:
        """Start every server; (server, tool) for each tool they list, or ``MCPError``."""
        return self._begin().result()

    async def astart(self) -> list[tuple[str, BaseTool]]:
        return await asyncio.wrap_future(self._begin())

    def _begin(self) -> concurrent.futures.Future[list[tuple[str, BaseTool]]]:
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self._start_all(), self._loop)

    async def _start_all(self) -> list[tuple[str, BaseTool]]:
        loop = asyncio.get_running_loop()
        ready = self._ready
        for name in self._specs:
            ready[name] = loop.create_future()
            self._holders[name] = loop.create_task(self._hold(self._specs[name], ready[name]))
        await asyncio.wait(
            ready.values(), timeout=self._startup_timeout, return_when=asyncio.FIRST_EXCEPTION
        )
        failed = [future.exception() for future in ready.values() if future.done()]
        for problem in failed:
            if problem is not None:
                raise problem
        for name, future in ready.items():
            if not future.done():
                raise MCPError(
                    f"mcp server {name!r} ({self._specs[name].shown()}) did not answer within "
                    f"{self._startup_timeout:g} s of starting"
                )
        return [(name, tool) for name, future in ready.items() for tool in future.result()]

    async def _hold(self, spec: ServerSpec, ready: asyncio.Future[list[BaseTool]]) -> None:
        """Open the session, list its tools, and keep it open until the set closes or the
        server goes away; the reason it ended is left for the calls that come after."""
        if spec.stdio is not None:
            errlog = tempfile.TemporaryFile("w+", errors="replace")  # noqa: SIM115 (closed by close)
            self._errlogs[spec.name] = errlog
        try:
            async with transport.connect(spec, self._errlogs.get(spec.name)) as streams:
                await self._serve(spec, streams, ready)
        except BaseException as exc:  # whatever ends the session, cancellation included
            self._gone[spec.name] = self._why(spec, exc, started=ready.done())
        else:
            self._gone[spec.name] = f"mcp server {spec.name!r} was closed"
        if not ready.done():
            ready.set_exception(MCPError(self._gone[spec.name]))
            ready.exception()  # seen: after a start that timed out nobody waits for it

    async def _serve(
        self, spec: ServerSpec, streams: tuple[Any, Any, Any], ready: asyncio.Future[Any]
    ) -> None:
        import anyio
        from langchain_mcp_adapters.tools import load_mcp_tools
        from mcp import ClientSession

        read, write, lost = streams
        # The session reads through a relay: a server that exits ends its output, which the
        # session alone would only notice at the next write, leaving calls unanswered.
        sink, relayed = anyio.create_memory_object_stream[Any](0)
        relay = asyncio.ensure_future(transport.relay(read, sink, fatal=spec.http is not None))
        try:
            async with ClientSession(relayed, write) as session:
                await session.initialize()
                ready.set_result(await load_mcp_tools(session, server_name=spec.name))
                stop = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait({stop, relay, lost}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if not self._stop.is_set():
                    for ended in (lost, relay):
                        problem = (
                            None if ended.cancelled() or not ended.done() else ended.exception()
                        )
                        if problem is not None:
                            raise problem
                    raise ConnectionError("it closed the connection")
        finally:
            relay.cancel()

    def secrets(self, server: str) -> tuple[str, ...]:
        """The values of the server's env and headers: never shown."""
        return self._specs[server].secrets

    def call(self, server: str, tool: BaseTool, args: dict[str, Any]) -> ToolMessage:
        """Call ``tool`` of ``server`` from any thread; the reply, or ``MCPError``."""
        future = self._submit(server, tool, args)
        try:
            # The loop enforces call_timeout; this bound only guards against a stuck loop.
            return future.result(self._call_timeout + STOP_GRACE)
        except concurrent.futures.TimeoutError:
            raise MCPError(self._late(server, tool)) from None
        finally:
            future.cancel()  # Ctrl-C or an abandoned wait: the call stops too

    async def acall(self, server: str, tool: BaseTool, args: dict[str, Any]) -> ToolMessage:
        """Async ``call`` from any event loop; cancelling it cancels the call."""
        return await asyncio.wrap_future(self._submit(server, tool, args))

    def _submit(
        self, server: str, tool: BaseTool, args: dict[str, Any]
    ) -> concurrent.futures.Future[ToolMessage]:
        with self._lock:
            if self._closed:
                raise MCPError(f"mcp server {server!r} was closed; load the tools again")
            return asyncio.run_coroutine_threadsafe(self._call(server, tool, args), self._loop)

    async def _call(self, server: str, tool: BaseTool, args: dict[str, Any]) -> ToolMessage:
        holder = self._holders[server]
        if holder.done():
            raise MCPError(self._gone[server])
        request = {"type": "tool_call", "id": "gated-react", "name": tool.name, "args": args}
        call = asyncio.ensure_future(tool.ainvoke(request))
        self._calls.add(call)
        try:
            # A session that dies leaves its pending requests unanswered: race the holder.
            await asyncio.wait(
                {call, holder}, timeout=self._call_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self._calls.discard(call)
            call.cancel()
        if call.done() and not call.cancelled() and call.exception() is None:
            message: ToolMessage = call.result()
            return message
        if call.done() and not call.cancelled() and not holder.done():
            # Failed, but was it the call or the server? A server that went away ends its
            # session at once; give it a moment to, for the better message.
            await asyncio.wait({holder}, timeout=1.0)
            if not holder.done():
                problem = transport.describe(transport.leaf(call.exception()))
                line = f"mcp server {server!r}: {tool.name} failed: {problem}"
                raise MCPError(redact(line, *self._specs[server].secrets))
        if self._stop.is_set():
            raise MCPError(f"mcp server {server!r} was closed during the call")
        if holder.done():
            raise MCPError(self._gone[server])
        raise MCPError(self._late(server, tool))

    def _late(self, server: str, tool: BaseTool) -> str:
        return (
            f"mcp server {server!r}: no reply to {tool.name} within {self._call_timeout:g} s "
            "(call_timeout)"
        )

    def _why(self, spec: ServerSpec, exc: BaseException | None, *, started: bool) -> str:
        """One line on why a server failed or stopped, its secrets masked."""
        what = "stopped" if started else "failed to start"
        leaf = transport.leaf(exc)
        if isinstance(leaf, OSError) and not started and spec.stdio is not None:
            detail = f"cannot run {spec.stdio.command!r}: {leaf.strerror or exception_line(leaf)}"
        else:
            said = transport.last_words(self._errlogs.get(spec.name))
            detail = transport.describe(leaf) + (f" (stderr: {said})" if said else "")
        line = f"mcp server {spec.name!r} ({spec.shown()}) {what}: {detail}"
        return redact(line, *spec.secrets)

    def close(self) -> None:
        """Close every session and stop every server; safe to call twice, from any thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _OPEN.discard(self)
        if self._thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            with contextlib.suppress(Exception):
                done.result(2 * STOP_GRACE)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_GRACE)
        if not self._loop.is_running():
            self._loop.close()
        for errlog in self._errlogs.values():
            errlog.close()

    async def _shutdown(self) -> None:
        for call in list(self._calls):
            call.cancel()
        self._stop.set()
        for name, holder in self._holders.items():
            if not self._ready[name].done():  # still starting: nothing to close politely
                holder.cancel()
        holders = list(self._holders.values())
        if holders:
            _, late = await asyncio.wait(holders, timeout=STOP_GRACE)
            for holder in late:  # cancelling the session kills its process (anyio)
                holder.cancel()
            if late:
                await asyncio.wait(late, timeout=STOP_GRACE)


@atexit.register
def _close_all() -> None:
    """Sets nobody closed: their stdio servers are this process's children, stopped here."""
    for servers in list(_OPEN):
        servers.close()
