"""A live backend that records what it emits, and resumes from the recording it left.

Recording sits on the emit path, not in the app: whatever reaches the screens reaches the
file, in the same order.  ``Recorder.record`` only queues, so the UI thread never waits on
the disk.  After a crash the console starts again on the same inventory, finds its
recording, plays the recent part of it back into the screens (history, findings, status)
and appends to it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec
from probes.sources.base import Backend, BackendBase
from probes.store.codec import Item
from probes.store.recording import Recorder
from probes.store.recording_reader import RecordingReader
from probes.wire.events import Emit, SessionItem, SourceHealth

RESUME_WINDOW_S = 2 * 3600.0
"""How much of an earlier recording is played back at start: the finest history tier."""
YIELD_EVERY = 500
"""Items played back between yields to the event loop, so the screens stay live."""


def item_ts(item: SessionItem) -> float:
    """The time an item happened (the agent's clock for its messages)."""
    return float(getattr(item, "ts", 0.0) or 0.0)


class RecordingBackend(BackendBase):
    """Wraps a backend: plays back a resumed recording first, then tees live items to it."""

    def __init__(self, inner: Backend, recorder: Recorder,
                 resume_from: RecordingReader | None = None,
                 resume_window_s: float = RESUME_WINDOW_S) -> None:
        self.inner = inner
        self.specs: list[HostSpec] = inner.specs
        self.recorder = recorder
        recorder.describe_hosts(self.specs)
        self.resume_from = resume_from
        self.resume_window_s = resume_window_s
        self.resumed_items = 0

    def mode_text(self) -> str:
        """``● rec``, or why nothing is being recorded, after the live source's own note
        (``Prometheus URL``)."""
        inner = self.inner.mode_text()
        return f"{inner} · {self._rec_text()}" if inner else self._rec_text()

    def _rec_text(self) -> str:
        status = self.recorder.status
        if status.state == "recording":
            return "● rec"
        if status.state == "paused":
            return f"rec paused: {status.reason}"
        return f"not recording: {status.reason}" if status.reason else "not recording"

    def record_alert(self, finding: Finding, ts: float) -> None:
        """A mark in the recording, so a replay can jump to it (``>`` and ``<``)."""
        self.recorder.record(finding.host, ts, finding)

    def retry_now(self, host: str) -> bool:
        """The live backend's: recording does not change how hosts are reached."""
        return self.inner.retry_now(host)

    def drill_down(self, host: str) -> bool:
        """The live backend's (what it reads is recorded like any other item)."""
        return self.inner.drill_down(host)

    def _earlier(self) -> Iterator[tuple[str, float, Item]]:
        reader = self.resume_from
        if reader is None:
            return iter(())
        span = reader.span()
        if span is None:
            return iter(())
        return reader.items(since=span[1] - self.resume_window_s)

    async def run_once(self, emit: Emit) -> None:
        """One read of the inner source: nothing is recorded or followed for it."""
        await self.inner.run_once(emit)

    async def run(self, emit: Emit) -> None:
        """Play back what was recorded before, then run the live backend, recording it."""
        unseen: dict[str, SourceHealth] = {}
        for n, (host, _ts, item) in enumerate(self._earlier(), 1):
            if not isinstance(item, Finding):  # findings are derived again from the items
                emit(host, item)
                self.resumed_items += 1
            if isinstance(item, SourceHealth):
                if item.fault is None:
                    unseen.pop(host, None)
                else:
                    unseen[host] = item
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        if self.resume_from is not None:
            self.resume_from.close()
        # a fault of the last session's collectors or Prometheus is not this one's: this
        # session's sources say their own (none is said while all is well)
        now = time.time()
        for host, health in unseen.items():
            emit(host, SourceHealth(now, health.source, None, "a new session"))

        def tee(host: str, item: SessionItem) -> None:
            self.recorder.record(host, item_ts(item), item)
            emit(host, item)

        try:
            await self.inner.run(tee)
        finally:
            await asyncio.to_thread(self.recorder.close)
