"""A watched Slurm job followed while the console runs: its state polled, each change passed
on as a ``JobChange`` item, so the job's end, a requeue or a changed node list is shown and
recorded (faults review, scenario 8: the job's end was never noticed).

The scheduler is asked in a worker thread with the client's own timeout; a controller that
does not answer is said once (and again when it answers), never taken for the job's end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.config.slurm import JobStatus, SlurmError, poll_job
from probes.sources.base import Backend, BackendBase
from probes.wire.events import Emit, JobChange

POLL_S = 30.0
"""How often the job is asked after (settings ``slurm.poll_s``)."""
log = logging.getLogger(__name__)
Poll = Callable[[str], JobStatus]


class JobWatchBackend(BackendBase):
    """Wraps a backend: runs it, and polls the job beside it."""

    def __init__(self, inner: Backend, job: str, host: str, poll_s: float = POLL_S,
                 poll: Poll = poll_job, nodes: tuple[str, ...] = ()) -> None:
        self.inner = inner
        self.specs: list[HostSpec] = inner.specs
        self.raises_alerts = inner.raises_alerts
        self.replay = inner.replay
        self.job = job
        self.host = host
        """The host the job's items are passed under (its batch host)."""
        self.poll_s = poll_s
        self._poll = poll
        self._nodes = nodes
        self.last: JobChange | None = None

    def mode_text(self) -> str:
        """The inner backend's note, then the job's state once it is known."""
        inner = self.inner.mode_text()
        last = self.last
        if last is None:
            return inner
        said = f"job {self.job} {last.state}" + (f" ({last.exit_code})"
                                                 if last.exit_code else "")
        return f"{inner} · {said}" if inner else said

    def record_alert(self, finding: Finding, ts: float) -> None:
        """The inner backend's."""
        self.inner.record_alert(finding, ts)

    def retry_now(self, host: str) -> bool:
        """The inner backend's."""
        return self.inner.retry_now(host)

    def drill_down(self, host: str) -> bool:
        """The inner backend's."""
        return self.inner.drill_down(host)

    async def run_once(self, emit: Emit) -> None:
        """One read of the inner source: nothing is recorded or followed for it."""
        await self.inner.run_once(emit)

    async def run(self, emit: Emit) -> None:
        """Run the inner backend and the job's poll until cancelled."""
        poller = asyncio.create_task(self._follow(emit), name=f"slurm job {self.job}")
        try:
            await self.inner.run(emit)
        finally:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)

    async def _follow(self, emit: Emit) -> None:
        failing = False
        while True:
            try:
                status = await asyncio.to_thread(self._poll, self.job)
            except SlurmError as exc:
                if not failing:
                    failing = True
                    last = self.last or JobChange(0.0, self.job, "UNKNOWN", nodes=self._nodes)
                    self._pass(emit, JobChange(time.time(), self.job, last.state, last.reason,
                                               last.exit_code, last.nodes,
                                               f"Slurm did not tell: {exc.msg}"))
            except Exception:  # a poll's bug never stops the hosts' sessions
                log.warning("polling Slurm job %s failed", self.job, exc_info=True)
            else:
                failing = False
                self._seen(emit, status)
            await asyncio.sleep(self.poll_s)

    def _seen(self, emit: Emit, status: JobStatus) -> None:
        exit_code = str(status.exit) if status.exit is not None else None
        last = self.last
        if last is not None and last.state == status.state and \
                last.exit_code == exit_code and last.nodes == status.nodes and last.note is None:
            return
        note = None
        known = last.nodes if last is not None and last.nodes else self._nodes
        if known and status.nodes and status.nodes != known:
            note = (f"node list changed to {status.node_list}: restart rigwatch --slurm-job "
                    f"{self.job} to watch the new nodes")
        self._pass(emit, JobChange(time.time(), self.job, status.state, status.reason,
                                   exit_code, status.nodes, note))

    def _pass(self, emit: Emit, change: JobChange) -> None:
        self.last = change
        emit(self.host, change)
