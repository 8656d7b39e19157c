"""The seam between the console and its data: a backend runs sessions and emits items.

The app takes a backend, so the same screens run on live agents (local or SSH),
on a recording, or on fixed items in tests.  Beside ``specs`` and ``run``, a backend
answers what the app would otherwise learn by asking which class it is: its header note,
whether its findings may raise alerts, where raised alerts are recorded, and the replay
controls when it is a replay.  ``BackendBase`` gives the answers of a plain live backend.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.wire.events import Disconnected, Emit

if TYPE_CHECKING:
    from probes.analysis.findings import Finding
    from probes.transport.session import NewReader, RetryWake, SessionPolicy


class ReplayControls(Protocol):
    """What the console's replay keys drive (a recording played back)."""

    start: float
    """The recording's first time."""
    on_rewind: Callable[[], None] | None
    """Called before a seek replays from its context: the app starts a fresh state."""

    def now(self) -> float:
        """The recording's time as the replay stands: the app's clock during a replay."""

    def toggle_pause(self) -> None:
        """Pause or resume."""

    def faster(self, step: int = 1) -> None:
        """Next speed up (or down with a negative step)."""

    def seek(self, t: float) -> None:
        """Go to recording time ``t``."""

    def next_finding(self) -> float | None:
        """Seek past the next recorded finding; its time, or None when there is none."""

    def previous_finding(self) -> float | None:
        """Seek past the previous recorded finding; its time, or None."""

    def findings_at(self, t: float) -> list[tuple[str, Finding]]:
        """The (host, finding) pairs recorded at ``t``, worst first: what a jump landed on."""


class Backend(Protocol):
    """Something that produces session items for a list of hosts."""

    specs: list[HostSpec]
    raises_alerts: bool
    """False for a replay: it would page people for the past."""
    replay: ReplayControls | None
    """The replay controls, when this backend plays a recording."""

    async def run(self, emit: Emit) -> None:
        """Produce items until cancelled."""

    def mode_text(self) -> str:
        """The header's note on where the data comes from (a replay position, recording)."""

    def record_alert(self, finding: Finding, ts: float) -> None:
        """Keep a raised alert's finding with the data, where the backend records any."""

    def retry_now(self, host: str) -> bool:
        """Cut ``host``'s wait before its next connection attempt; False when it cannot."""

    def drill_down(self, host: str) -> bool:
        """Read over SSH, once, what this backend's source cannot tell about ``host`` (its
        kernel log, topology, PCIe chains); False when there is nothing to add or no way."""


class BackendBase:
    """A live backend's capabilities: no note, alerts raised, nothing recorded, no replay."""

    specs: list[HostSpec]
    raises_alerts = True
    replay: ReplayControls | None = None

    def mode_text(self) -> str:
        """Nothing to say: the data is live and not recorded."""
        return ""

    def record_alert(self, finding: Finding, ts: float) -> None:
        """Nowhere to record it."""

    def retry_now(self, host: str) -> bool:
        """Nothing to retry here (a replay, a demo): the operator is told so."""
        return False

    def drill_down(self, host: str) -> bool:
        """The agents already send everything (or a replay holds what it holds)."""
        return False


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


class AgentFleetBackend(BackendBase):
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
        gate = asyncio.Semaphore(self.max_connecting)
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
