"""The HTTP server of a worker's probes: its own thread and event loop, so a worker whose loop is
blocked still answers (with 503), and connections that say nothing never keep a probe out.

A connection costs a few kilobytes and no thread while it waits: its request must arrive whole
within ``idle`` seconds (however slowly it trickles), then it is answered at once; a connection
silent that long is closed. At most ``limit`` connections stay open: one more closes the one
silent longest, so a fresh probe always gets in (32 silent connections once held every thread
of the old server and the next probe was closed unanswered: an orchestrator would have
restarted a healthy worker). Keep-alive is honoured (Prometheus scrapes reuse a connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable

Answer = tuple[int, str, bytes]
"""A response: status, content type, body."""
Responder = Callable[[str], Awaitable[Answer]]
"""What answers a GET of a path."""

IDLE_SECONDS = 10.0
"""A connection silent this long (or whose request has not arrived whole by then) is closed."""
MAX_CONNECTIONS = 256
"""Connections kept open at once; one more closes the one silent longest."""
_HEAD_LIMIT = 8192  # the most a request line and headers may take
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HealthServer:
    """Answers on ``host:port`` (0: a free port, see ``server_address``) from a daemon thread
    until ``shutdown()``; binding fails here, in the caller, with ``OSError``."""

    def __init__(
        self,
        address: tuple[str, int],
        respond: Responder,
        *,
        idle: float = IDLE_SECONDS,
        limit: int = MAX_CONNECTIONS,
    ) -> None:
        self._socket = socket.create_server(address, backlog=128)
        self.server_address: tuple[str, int] = self._socket.getsockname()[:2]
        self.respond, self.idle, self.limit = respond, idle, limit
        self._open: dict[asyncio.StreamWriter, bool] = {}
        """The connections open now, the longest silent first; True while one is answered."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)
        self._thread.start()
        self._ready.wait()

    @property
    def open_connections(self) -> int:
        """How many connections are open now."""
        return len(self._open)

    def shutdown(self) -> None:
        """Stop answering and close every connection (waits for the thread a few seconds)."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop is already closed
                self._loop.call_soon_threadsafe(self._stopping)
        self._thread.join(timeout=5)

    def server_close(self) -> None:
        """Release the port (``shutdown`` does; kept for callers of an ``HTTPServer``)."""
        self._socket.close()

    def _stopping(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _run(self) -> None:
        # The runner cancels and awaits the connections still open when it stops: each
        # closes its socket on the way out.
        try:
            with asyncio.Runner() as runner:
                self._loop = runner.get_loop()
                runner.run(self._serve())
        finally:
            self._ready.set()  # a server that could not start: its starter waits no longer
            self._socket.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=self._socket, limit=_HEAD_LIMIT)
        self._ready.set()
        async with server:
            await self._stop.wait()
            for writer in list(self._open):
                writer.transport.abort()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._opened(writer)
        try:
            while await self._one_request(reader, writer):
                self._open.pop(writer, None)  # silent again, from now: to the end of the line
                self._open[writer] = False
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # silent too long, gone, or not HTTP: the connection simply ends
        finally:
            self._open.pop(writer, None)
            writer.transport.abort()

    def _opened(self, writer: asyncio.StreamWriter) -> None:
        """Count a new connection; beyond the limit, close the one silent longest."""
        self._open[writer] = False
        if len(self._open) > self.limit:
            oldest = next((w for w, busy in self._open.items() if not busy), None)
            if oldest is not None and oldest is not writer:
                self._open.pop(oldest)
                oldest.transport.abort()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Read one request whole (within ``idle`` s), answer it; whether to read another."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.idle)
        except asyncio.IncompleteReadError as ended:
            if ended.partial.strip():
                raise
            return False  # the client closed between requests
        except asyncio.LimitOverrunError as too_long:
            raise ValueError("request head too long") from too_long
        self._open[writer] = True
        method, path, keep = _parsed(head)
        if method not in ("GET", "HEAD"):
            code, kind, body = 405, "text/plain", b"only GET\n"
            keep = False
        else:
            code, kind, body = await self.respond(path.split("?", 1)[0])
        writer.write(_response(code, kind, b"" if method == "HEAD" else body, len(body), keep))
        await asyncio.wait_for(writer.drain(), self.idle)
        return keep


def _parsed(head: bytes) -> tuple[str, str, bool]:
    """Method, path and whether the client keeps the connection (HTTP/1.1 unless it says
    ``close``; HTTP/1.0 only if it says ``keep-alive``)."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, version = lines[0].split(" ")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    connection = headers.get("connection", "")
    keep = connection == "keep-alive" if version == "HTTP/1.0" else connection != "close"
    if headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers:
        keep = False  # a body follows that nobody reads: the connection cannot be reused
    return method, path, keep


def _response(code: int, kind: str, body: bytes, length: int, keep: bool) -> bytes:
    head = (
        f"HTTP/1.1 {code} {_REASONS.get(code, 'OK')}\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {length}\r\nConnection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    )
    return head.encode("latin-1") + body
