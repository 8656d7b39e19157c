"""The seam between the console and its data: a source (a backend) emits session items.

The app takes a backend, so the same screens run on live agents (local or SSH), on
collectors, on a Prometheus, on a recording, or on fixed items in tests; ``snapshot`` and
``preflight`` take the same backend and read it once (``run_once``).  Beside ``specs`` and
``run``, a backend answers what the app would otherwise learn by asking which class it is:
its header note, whether its findings may raise alerts, where raised alerts are recorded,
and the replay controls when it is a replay.  ``BackendBase`` gives the answers of a plain
live backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.wire.events import Emit, SessionItem
from probes.wire.samples import HostSample


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

    async def run_once(self, emit: Emit) -> None:
        """Emit one read of the fleet: each host's items up to its newest sample (after
        its past, where the source has one), then return.  The caller sets the deadline."""

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

    async def run(self, emit: Emit) -> None:
        """Produce items until cancelled: each source's own."""
        raise NotImplementedError

    async def run_once(self, emit: Emit) -> None:
        """The live stream until every host has sent a sample: a source with nothing
        better to offer for one read (a source with a past to read first overrides it)."""
        waiting = {s.name for s in self.specs}
        done = asyncio.Event()
        if not waiting:
            return

        def keep(host: str, item: SessionItem) -> None:
            emit(host, item)
            if isinstance(item, HostSample):
                waiting.discard(host)
                if not waiting:
                    done.set()

        task = asyncio.create_task(self.run(keep))
        ended = asyncio.create_task(done.wait())
        try:
            await asyncio.wait({task, ended}, return_when=asyncio.FIRST_COMPLETED)
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]  # the source cannot be read
        finally:
            for t in (task, ended):
                t.cancel()
            await asyncio.gather(task, ended, return_exceptions=True)
