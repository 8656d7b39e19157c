"""The fold's fabric and per-sample judging as on main before session 7's change
(``8b3ea60``): every fabric report's findings rebuilt whole (``fabric_findings`` copied
unchanged), every tick judged by ``sample_judged`` and handed to ``take_sample``.  The
reference ``test_judges_changed`` holds ``HostState`` to, and the same-run baseline of
``bench_judges_changed.py``.  Not imported by the console."""

from __future__ import annotations

from probes.analysis.fabric import (
    FabricTracker,
    _finding,
    beside,
    errors_rising,
    port_views,
)
from probes.analysis.findings import Finding
from probes.analysis.item_findings import sample_chains, sample_judged
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.fleet_state import HostState
from probes.rules.fabric import nvlink_verdicts, port_verdicts
from probes.wire.events import SessionItem
from probes.wire.samples import FabricSample, Hello, HostSample


def fabric_findings_before(host: str, tracker: FabricTracker, hello: Hello | None,
                           limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """The host's port, error and NVLink findings from its newest fabric."""
    if tracker.ts is None:
        return []
    ts = tracker.ts
    near = beside(hello)
    verdicts = port_verdicts(port_views(tracker.ports, hello)) + nvlink_verdicts(tracker.links)
    out = [_finding(host, v, ts, near) for v in verdicts]
    rising = errors_rising(tracker.recent(ts, limits.ib_errors_window_s), limits)
    if rising is not None:
        out.append(_finding(host, rising, ts, near))
    return out


class HostStateBefore(HostState):
    """``HostState`` judging every fabric report and every tick afresh (``8b3ea60``)."""

    def apply(self, item: SessionItem, now: float) -> None:
        if not isinstance(item, FabricSample):
            super().apply(item, now)
            return
        self.changes += 1
        self.revision += 1
        self.reach.note(item, now)
        self.fabric.add(item)
        self.findings_kept.set_fabric(fabric_findings_before(self.name, self.fabric, self.hello,
                                                             self.limits.detectors))

    def _apply_sample(self, sample: HostSample) -> None:
        self.last = sample
        self.history.add(sample)
        detected = self.detectors.run(self.name, self.history, self.hello, sample)
        if detected is not None:
            self.findings_kept.set_detected(detected)
        self.holds.update(sample)
        found = sample_judged(self.name, self.hello, sample, self.history, self.holds,
                              self.limits.detectors, self.spec.expect_gpus, self.peers)
        chains = sample_chains(self.name, self.hello, sample)
        if chains is not None:
            self.findings_kept.set_chains(chains)
        self.findings_kept.take_sample(found, sample.ts)
