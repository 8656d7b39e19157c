"""Supervised host sessions: start the agent, read its stream, retry with backoff.

A session never raises into its caller: every failure becomes a ``Disconnected``
item with a reason the operator can act on, followed by a retry.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from probes.backend import Emit
from probes.errors import TransportError
from probes.fleet import HostSpec
from probes.protocol import MessageReader
from probes.samples import AgentMessage, Hello, HostSample, LogEvent, ProbeError
from probes.session_events import Connected, Disconnected
from probes.transport.local import LocalTransport

BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
ONCE_TIMEOUT_S = 20.0


class Transport(Protocol):
    """What a session needs from a transport."""

    async def start(self) -> None:
        """Start the agent; raise TransportError when that fails."""

    def chunks(self) -> AsyncIterator[bytes]:
        """Raw stdout chunks until the stream ends."""

    async def exit_reason(self) -> str:
        """Why the stream ended."""

    async def stop(self) -> None:
        """Stop the agent and release the channel."""


def make_transport(spec: HostSpec, once: bool = False) -> Transport:
    """The transport a host spec asks for.

    Raises:
        TransportError: the spec names a transport this build does not have.
    """
    if spec.transport == "local":
        return LocalTransport(spec.agent_args(once=once), python=spec.python)
    raise TransportError(f"{spec.name}: transport {spec.transport!r} is not available")


async def _stream_once(spec: HostSpec, emit: Emit, transport: Transport,
                       reader: MessageReader) -> tuple[str, bool]:
    """Run one connection to its end; returns (reason, whether any message came)."""
    got_any = False
    try:
        await transport.start()
        emit(spec.name, Connected(time.time()))
        async for chunk in transport.chunks():
            for msg in reader.feed(chunk):
                got_any = True
                emit(spec.name, msg)
        for msg in reader.close():
            emit(spec.name, msg)
        return await transport.exit_reason(), got_any
    except TransportError as exc:
        return exc.msg, got_any
    finally:
        await transport.stop()


async def run_session(spec: HostSpec, emit: Emit, backoff: tuple[float, ...] = BACKOFF_S) -> None:
    """Keep one host's agent streaming until cancelled, reconnecting with backoff."""
    attempt = 0
    while True:
        reader = MessageReader()
        try:
            transport = make_transport(spec)
        except TransportError as exc:
            emit(spec.name, Disconnected(time.time(), exc.msg, None, reader.stats))
            return
        reason, got_any = await _stream_once(spec, emit, transport, reader)
        if got_any:
            attempt = 0
        delay = backoff[min(attempt, len(backoff) - 1)]
        attempt += 1
        emit(spec.name, Disconnected(time.time(), reason, delay, reader.stats))
        await asyncio.sleep(delay)


@dataclass
class OnceResult:
    """What one ``--once`` run of the agent returned for one host."""

    spec: HostSpec
    hello: Hello | None = None
    sample: HostSample | None = None
    events: list[LogEvent] = field(default_factory=list)
    errors: list[ProbeError] = field(default_factory=list)
    failure: str | None = None
    garbled: int = 0


async def collect_once(spec: HostSpec, timeout_s: float = ONCE_TIMEOUT_S) -> OnceResult:
    """Run the agent with ``--once`` on one host and gather its hello and sample."""
    result = OnceResult(spec)
    reader = MessageReader()

    def keep(_host: str, item: object) -> None:
        _file(result, item)

    try:
        transport = make_transport(spec, once=True)
        reason, _ = await asyncio.wait_for(_stream_once(spec, keep, transport, reader), timeout_s)
    except TransportError as exc:
        reason = exc.msg
    except asyncio.TimeoutError:
        reason = f"no complete answer within {timeout_s:g} s"
    result.garbled = reader.stats.garbled + reader.stats.overlong
    if result.sample is None:
        result.failure = reason
    return result


def _file(result: OnceResult, item: object) -> None:
    msg: AgentMessage | object = item
    if isinstance(msg, Hello):
        result.hello = msg
    elif isinstance(msg, HostSample):
        result.sample = msg
    elif isinstance(msg, LogEvent):
        result.events.append(msg)
    elif isinstance(msg, ProbeError):
        result.errors.append(msg)
