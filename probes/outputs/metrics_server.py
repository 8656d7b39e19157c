"""A minimal Prometheus scrape endpoint on localhost: ``GET /metrics`` and nothing else.

Bound to 127.0.0.1 only: the numbers describe the fleet, and a console on a bastion must
not open a port to the network.  Prometheus (or an SSH tunnel) scrapes it locally.

Any local user can connect, so no client may cost the console more than a bounded slice:
the request head must arrive within ``READ_TIMEOUT_S`` and the whole response must be taken
within ``WRITE_TIMEOUT_S`` (a client that never reads is cut off); at most
``MAX_CONNECTIONS`` are served at once (the rest are closed at once, with a 503 that a
client reads unless its request was already in, which makes the close a reset); and the
response is rendered at most once per ``RENDER_EVERY_S`` and shared by every client,
written in chunks from one buffer, so twenty stalled clients hold neither twenty copies of
it nor the UI loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

READ_TIMEOUT_S = 5.0
"""The request line and headers must arrive within this."""
REQUEST_TIMEOUT_S = READ_TIMEOUT_S
WRITE_TIMEOUT_S = 10.0
"""The whole response must be taken within this; then the connection is dropped."""
MAX_CONNECTIONS = 32
RENDER_EVERY_S = 5.0
"""A rendered response is served to everyone for this long (a scrape interval or less)."""
MAX_REQUEST_BYTES = 8192
WRITE_CHUNK = 64 * 1024
"""Bytes handed to one connection's transport at a time (its buffer stays this small)."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 5\r\n"
        b"Connection: close\r\n\r\n")
NOT_FOUND_BODY = b"not found: try /metrics\n"


def _response(status: bytes, ctype: bytes, body: bytes) -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)


NOT_FOUND = _response(b"404 Not Found", b"text/plain", NOT_FOUND_BODY)


class MetricsServer:
    """The endpoint: a listening socket, the shared response, and the open connections."""

    def __init__(self, render: Callable[[], str], *, render_every_s: float = RENDER_EVERY_S,
                 read_timeout_s: float = READ_TIMEOUT_S,
                 write_timeout_s: float = WRITE_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._render = render
        self.render_every_s = render_every_s
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self.max_connections = max_connections
        self._clock = clock
        self._server: asyncio.Server | None = None
        self._cached: bytes | None = None
        self._cached_at = 0.0
        self._open: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self.renders = 0
        """Times the response was rendered (tests and the curious)."""
        self.refused = 0
        """Connections turned away because ``max_connections`` were open."""
        self.cut_off = 0
        """Connections dropped for missing a read or write deadline."""

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (port 0: any free one)."""
        self._server = await asyncio.start_server(self._handle, host, port,
                                                  limit=MAX_REQUEST_BYTES)

    @property
    def sockets(self) -> tuple[Any, ...]:
        """The listening sockets, as ``asyncio.Server.sockets``."""
        return tuple(self._server.sockets) if self._server is not None else ()

    @property
    def port(self) -> int:
        """The port actually bound."""
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def connections(self) -> int:
        """Connections being served now."""
        return len(self._open)

    def response(self) -> bytes:
        """The ``/metrics`` response, rendered again only once it is ``render_every_s`` old."""
        now = self._clock()
        if self._cached is None or now - self._cached_at >= self.render_every_s:
            body = self._render().encode("utf-8")
            self._cached = _response(b"200 OK", CONTENT_TYPE.encode(), body)
            self._cached_at = now
            self.renders += 1
        return self._cached

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= self.max_connections:
            self.refused += 1
            writer.write(BUSY)  # a few bytes: they fit the socket buffer, no wait
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = writer
        clean = False
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                              self.read_timeout_s)
            except asyncio.TimeoutError:
                self.cut_off += 1
                return
            parts = head.split(b"\r\n", 1)[0].split()
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] == b"/metrics":
                payload = self.response()
            else:
                payload = NOT_FOUND
            try:
                await asyncio.wait_for(_send(writer, payload), self.write_timeout_s)
            except asyncio.TimeoutError:
                self.cut_off += 1
                return
            clean = True
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return
        except asyncio.CancelledError:
            # close() ended it.  This task is the connection's own and nothing awaits it:
            # ending quietly keeps asyncio from logging the cancellation as an error.
            return
        finally:
            self._open.pop(task, None)
            if clean:
                writer.close()
            else:
                writer.transport.abort()  # drop what is buffered for a client that won't read

    def close(self) -> None:
        """Stop listening and drop every open connection now."""
        if self._server is not None:
            self._server.close()
        for task, writer in list(self._open.items()):
            writer.transport.abort()
            task.cancel()

    async def wait_closed(self) -> None:
        """Until the listener and every connection's handler are gone."""
        tasks = list(self._open)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)


async def _send(writer: asyncio.StreamWriter, payload: bytes) -> None:
    """Write one shared buffer in chunks, waiting for each to drain (no copy of the rest)."""
    view = memoryview(payload)
    for at in range(0, len(view), WRITE_CHUNK):
        writer.write(view[at:at + WRITE_CHUNK])
        await writer.drain()


async def serve_metrics(port: int, render: Callable[[], str], host: str = "127.0.0.1", *,
                        render_every_s: float = RENDER_EVERY_S,
                        read_timeout_s: float = READ_TIMEOUT_S,
                        write_timeout_s: float = WRITE_TIMEOUT_S,
                        max_connections: int = MAX_CONNECTIONS) -> MetricsServer:
    """Start serving; ``render`` runs on the event loop at most once per ``render_every_s``."""
    server = MetricsServer(render, render_every_s=render_every_s,
                           read_timeout_s=read_timeout_s, write_timeout_s=write_timeout_s,
                           max_connections=max_connections)
    await server.start(host, port)
    return server
