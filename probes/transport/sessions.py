"""Many hosts' sessions at once: each one supervised, all concurrently, each cancellable.

This is still one host's stream per task (``session.run_session``), only many of them: the
fleet-level sources (``probes.sources.agents`` in the console, a collector process in
``collector_worker``) run their hosts through ``SessionFleet``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Literal

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.wire.events import Disconnected, Emit

if TYPE_CHECKING:
    from probes.transport.session import NewReader, RetryWake, SessionPolicy

MAX_CONCURRENT_CONNECTS = 32
"""Handshakes are CPU-bound: 1000 hosts connecting at once would stampede the bastion."""
CRASHED_SESSION_RETRY_S = 30.0
"""A session that raised past its own supervision starts again after this long."""
log = logging.getLogger(__name__)


async def supervise(spec: HostSpec, emit: Emit, policy: SessionPolicy | None,
                    gate: asyncio.Semaphore | None,
                    retry_s: float = CRASHED_SESSION_RETRY_S,
                    wake: RetryWake | None = None,
                    new_reader: NewReader | None = None) -> None:
    """Run one host's session; if it ever raises, that is this host's state, and it restarts.

    ``run_session`` turns every failure of a connection into a ``Disconnected`` already;
    this is the backstop for a bug in that supervision itself (or an ``emit`` that raised),
    so that no exception from one host can end the fleet's run or cancel other sessions.
    """
    from probes.transport.session import crash_reason, run_session

    while True:
        try:
            await run_session(spec, emit, policy, gate, wake, new_reader)
            return
        except Exception as exc:  # one host's crash is its state only
            log.error("%s: session crashed", spec.name, exc_info=True)
            reason = f"session crashed: {crash_reason(exc)}"
            try:
                emit(spec.name, Disconnected(time.time(), reason, retry_s, None,
                                             DisconnectKind.AGENT_FAILED))
            except Exception:
                log.error("%s: reporting the crash failed", spec.name, exc_info=True)
        if wake is None:
            await asyncio.sleep(retry_s)
        else:
            await wake.sleep(retry_s)


class ConnectGate(asyncio.Semaphore):
    """The fleet's limit on concurrent handshakes, which also tells whether one is under way
    (``held``): a collector's loop serves a handshake's round trips as they come, without
    coalescing its wakes (``coalesce``)."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.held = 0
        """Connection attempts inside the gate now."""

    async def acquire(self) -> Literal[True]:
        await super().acquire()
        self.held += 1  # no await between: a cancel lands before the take or after it
        return True

    def release(self) -> None:
        self.held -= 1
        super().release()


class SessionFleet:
    """Run one supervised agent session per host, all concurrently."""

    def __init__(self, specs: list[HostSpec], max_connecting: int = MAX_CONCURRENT_CONNECTS,
                 policy: SessionPolicy | None = None,
                 crash_retry_s: float = CRASHED_SESSION_RETRY_S,
                 new_reader: NewReader | None = None) -> None:
        self.specs = specs
        self.new_reader = new_reader
        self.max_connecting = max_connecting
        self.policy = policy
        self.crash_retry_s = crash_retry_s
        self._wakes: dict[str, RetryWake] = {}
        self._gate: ConnectGate | None = None

    def handshaking(self) -> bool:
        """Whether a connection attempt holds the gate now (a handshake under way)."""
        gate = self._gate
        return gate is not None and gate.held > 0

    def retry_now(self, host: str) -> bool:
        """Cut ``host``'s backoff: it connects at once.  False when it is not waiting
        (streaming, connecting now) or not a host of this fleet."""
        wake = self._wakes.get(host)
        return wake is not None and wake.poke()

    async def run(self, emit: Emit) -> None:
        """Run every host's session until cancelled; on cancel, return only once every
        session has stopped its agent.

        A plain ``gather`` would not do: cancelled, it finishes with the first session to
        end, while the others are still closing their agents' pipes and channels.
        """
        from probes.transport.host_clock import clocked
        from probes.transport.session import RetryWake

        emit = clocked(emit)  # each host's times on the console's clock, before any fold
        gate = self._gate = ConnectGate(self.max_connecting)
        self._wakes = {spec.name: RetryWake() for spec in self.specs}
        tasks = [asyncio.create_task(supervise(spec, emit, self.policy, gate,
                                               self.crash_retry_s, self._wakes[spec.name],
                                               self.new_reader),
                                     name=f"session {spec.name}") for spec in self.specs]
        try:
            # Each task returns only when its host cannot be watched at all; none raises
            # (``supervise``), and a failed one never takes the others with it.
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            cancel_once(tasks)
            await asyncio.gather(*tasks, return_exceptions=True)


def cancel_once(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel each task not already being cancelled: a second cancel would interrupt one
    that is stopping its agent (or its collector) in a ``finally``."""
    for task in tasks:
        cancelling = getattr(task, "cancelling", None)  # Python 3.11+
        if cancelling is None or not cancelling():
            task.cancel()
