"""A small pass-through HTTP proxy on 127.0.0.1 that can fail the way a metrics server does:
answer ``503``, answer late, or (when its upstream is gone) ``502``.  The faults review put
one in front of a real Prometheus for its S7 scenarios; tests switch ``mode`` while the
console reads through it.  One request per connection (the client sends
``Connection: close``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from tests.support.sshd import free_port


@dataclass
class Proxy:
    """``mode``: ``pass``, ``503``, or ``delay`` (``delay_s`` before the request is passed)."""

    upstream_port: int
    port: int = field(default_factory=free_port)
    mode: str = "pass"
    delay_s: float = 0.0
    requests: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        try:
            if self.mode == "503":
                await reader.read(65536)
                body = b"Service Unavailable"
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
                return
            if self.mode == "delay":
                await asyncio.sleep(self.delay_s)
            try:
                up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            except OSError as exc:
                body = f"upstream: {exc.strerror or exc}".encode()
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                return
            await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(OSError):
                writer.close()


@contextlib.asynccontextmanager
async def http_proxy(upstream_port: int) -> AsyncIterator[Proxy]:
    """A running proxy to ``127.0.0.1:upstream_port`` on the current loop."""
    proxy = Proxy(upstream_port)
    server = await asyncio.start_server(proxy._serve, "127.0.0.1", proxy.port)
    try:
        yield proxy
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2.0)
