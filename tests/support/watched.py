"""A fleet fed by a real backend the way the console feeds it: every item folded into a
``FleetState`` at arrival (console wall time), and the alerts checked every
``CHECK_EVERY_S`` as the app's tick does.  Tests of the watcher's own faults (collectors,
Prometheus) read what an operator would have seen and been paged for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable

from probes.analysis.alerts import Alert, AlertPolicy, AlertTracker
from probes.config.fleet import HostSpec, demo_fleet
from probes.fleet_state import FleetState
from probes.sources.base import Backend
from probes.wire.events import SessionItem

CHECK_EVERY_S = 0.25


def healthy_hosts(n: int, prefix: str = "h") -> list[HostSpec]:
    """``n`` simulated healthy 8-GPU hosts (local agents, 1 s samples): nothing about them
    should ever page."""
    base = demo_fleet(speed=60)[0]
    return [dataclasses.replace(base, name=f"{prefix}{i + 1}", simulate=("healthy",),
                                seed=i + 1, extra_args=()) for i in range(n)]


class Watched:
    """``backend`` run with its items folded and its alerts kept (``alerts``)."""

    def __init__(self, backend: Backend, policy: AlertPolicy | None = None) -> None:
        self.backend = backend
        self.fleet = FleetState(list(backend.specs))
        self.tracker = AlertTracker(policy or AlertPolicy())  # warnings page too: strictest
        self.items: dict[str, list[SessionItem]] = defaultdict(list)
        self.alerts: list[Alert] = []
        self._tasks: list[asyncio.Task[None]] = []

    def _emit(self, host: str, item: SessionItem) -> None:
        self.items[host].append(item)
        self.fleet.apply(host, item, time.time())

    async def _check(self) -> None:
        while True:
            now = time.time()
            self.fleet.tick(now)  # staleness judged before the alerts, as the app's redraw
            self.alerts += self.tracker.update(self.fleet.all_findings(), now,
                                               hosts=len(self.fleet.hosts))
            await asyncio.sleep(CHECK_EVERY_S)

    async def __aenter__(self) -> Watched:
        self._tasks = [asyncio.create_task(self.backend.run(self._emit)),
                       asyncio.create_task(self._check())]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def running(self) -> bool:
        """The backend has not ended (a crash would end it)."""
        return not self._tasks[0].done()

    def status(self, host: str) -> str:
        return self.fleet.hosts[host].row(time.time()).status.value

    def row_reason(self, host: str) -> str:
        return self.fleet.hosts[host].row(time.time()).reason or ""

    def pages(self, event: str = "alert") -> list[tuple[str, str]]:
        """(host, code) of each alert (or recovery) so far."""
        return [(a.finding.host, str(a.finding.code if event == "alert"
                                     else a.finding.extra.get("recovers")))
                for a in self.alerts if a.event == event]

    def samples_since(self, host: str, mark: int) -> int:
        from probes.wire.samples import HostSample
        return sum(isinstance(i, HostSample) for i in self.items[host][mark:])


async def until(cond: Callable[[], bool], timeout: float, what: str = "the condition") -> float:
    """Seconds until ``cond`` held; fails after ``timeout``."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - t0
