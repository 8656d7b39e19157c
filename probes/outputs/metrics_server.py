"""A minimal Prometheus scrape endpoint on localhost: ``GET /metrics`` and nothing else.

Bound to 127.0.0.1 only: the numbers describe the fleet, and a console on a bastion must
not open a port to the network.  Prometheus (or an SSH tunnel) scrapes it locally.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

REQUEST_TIMEOUT_S = 5.0
MAX_REQUEST_BYTES = 8192
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def serve_metrics(port: int, render: Callable[[], str],
                        host: str = "127.0.0.1") -> asyncio.Server:
    """Start serving; ``render`` is called for every scrape (on the event loop)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        parts = head[:MAX_REQUEST_BYTES].split(b"\r\n", 1)[0].split()
        if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] == b"/metrics":
            body = render().encode("utf-8")
            status, ctype = b"200 OK", CONTENT_TYPE.encode()
        else:
            body, status, ctype = b"not found: try /metrics\n", b"404 Not Found", b"text/plain"
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype +
                     b"\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, host, port, limit=MAX_REQUEST_BYTES)
