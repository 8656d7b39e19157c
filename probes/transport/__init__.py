"""Transports: how the agent's source reaches a host and its stream comes back.

``TRANSPORTS`` is the one registry of them, keyed by the inventory's ``transport`` word
(``TransportName``): sessions make a transport through it, and a test checks it covers
every name the inventory accepts.  A new transport is one class with the ``Transport``
methods, one factory here, one ``TransportName`` member.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol

from probes.config.fleet import HostSpec, TransportName


class Transport(Protocol):
    """What a session needs from a transport."""

    notes: list[str]
    """Things the operator should hear about after ``start`` (a recorded host key)."""

    async def start(self) -> None:
        """Start the agent; raise TransportError when that fails."""

    def chunks(self) -> AsyncIterator[bytes]:
        """Raw stdout chunks until the stream ends.  A transport may also offer
        ``async chunks_to(sink)``, calling ``sink`` with each chunk as it arrives (no task
        switch per chunk); the session then reads that way."""

    async def exit_reason(self) -> str:
        """Why the stream ended."""

    async def stop(self) -> None:
        """Stop the agent and release the channel."""


def loop_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """``loop.time`` as a function to call: ``time.monotonic`` itself where the loop's clock
    is asyncio's own (``BaseEventLoop.time`` returns it), so a read noted once a chunk costs
    no Python frame (issue 38, the collector's CPU); the loop's method where it has another
    clock (a test's virtual one)."""
    if type(loop).time is asyncio.BaseEventLoop.time:
        return time.monotonic
    return loop.time


async def read_chunks(transport: Transport, feed: Callable[[bytes], None]) -> None:
    """Hand each chunk of the stream to ``feed`` until it ends: as the chunks arrive where the
    transport offers ``chunks_to`` (no task switch per chunk), else from ``chunks``."""
    if (push := getattr(transport, "chunks_to", None)) is not None:
        await push(feed)
    else:
        async for chunk in transport.chunks():
            feed(chunk)


TransportFactory = Callable[[HostSpec, list[str], asyncio.Semaphore | None], Transport]
"""(host, agent arguments, shared gate on concurrent connects) -> a transport not yet started."""


def _local(spec: HostSpec, args: list[str], _gate: asyncio.Semaphore | None) -> Transport:
    from probes.transport.local import LocalTransport

    return LocalTransport(args, python=spec.python)


def _ssh(spec: HostSpec, args: list[str], gate: asyncio.Semaphore | None) -> Transport:
    from probes.transport.ssh import SshTransport  # asyncssh loads only when a host uses it

    return SshTransport(spec, args, gate=gate)


TRANSPORTS: Mapping[TransportName, TransportFactory] = {
    TransportName.LOCAL: _local,
    TransportName.SSH: _ssh,
}
