"""Agents as a fleet source: one supervised session per host, in the console's process.

The sessions themselves are the transport's (``transport.sessions``); a collector process
runs the same ones (``sources.collectors``).  Read once, each host answers one ``--once``
run of its agent (a simulated host lives through its simulated past first), and its items
are emitted in the order the console's fold takes them.
"""

from __future__ import annotations

import asyncio

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.sources.base import BackendBase
from probes.transport.session import ONCE_CONCURRENCY, OnceResult, collect_once
from probes.transport.sessions import SessionFleet
from probes.wire.events import Connected, Disconnected, Emit, SessionItem
from probes.wire.protocol import StreamStats


class AgentFleetBackend(SessionFleet, BackendBase):
    """Run one supervised agent session per host, all concurrently."""

    async def run_once(self, emit: Emit) -> None:
        """Every host's one read (``emit_reads``)."""
        await emit_reads(self.specs, emit)


async def emit_reads(specs: list[HostSpec], emit: Emit,
                     concurrency: int = ONCE_CONCURRENCY) -> None:
    """Read every host once, ``concurrency`` at a time, and emit each host's items as soon
    as its read ends (a deadline cutting the whole read keeps the hosts that answered)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(spec: HostSpec) -> None:
        async with gate:
            result = await collect_once(spec, to_now=True)
        for item in once_items(result):
            emit(spec.name, item)

    await asyncio.gather(*(one(s) for s in specs))


def once_items(r: OnceResult) -> list[SessionItem]:
    """One host's read as the items a session would have emitted, in fold order: a
    connect, its clock, hello, log states, errors, lines, fabric, samples, and the stream's
    end where it failed or skipped garbled lines (``file_item`` files each back)."""
    at = r.sample.ts if r.sample is not None else (r.hello.ts if r.hello is not None else 0.0)
    items: list[SessionItem] = [Connected(at)]
    items += [x for x in (r.clock, r.hello, r.log_source) if x is not None]
    items += r.job_logs
    items += r.errors
    items += r.events
    items += r.others
    if r.fabric is not None:
        items.append(r.fabric)
    items += r.history
    if r.sample is not None:
        items.append(r.sample)
    stats = StreamStats(garbled=r.garbled) if r.garbled else None
    if r.sample is None and r.failure is not None:
        kind = DisconnectKind.AGENT_FAILED if r.hello is not None else DisconnectKind.DOWN
        items.append(Disconnected(at, r.failure, None, stats, kind))
    elif stats is not None:  # the --once run ended; what it skipped is told with its end
        items.append(Disconnected(at, "the agent's one read ended", None, stats,
                                  DisconnectKind.DOWN))
    return items
