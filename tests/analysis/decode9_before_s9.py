"""The fold's per-tick path outside the history and the detectors as on main before
session 9's quiet-tick work (``12ea918``): ``FleetState.apply`` taking a sample through the
general item path (``numbers_mark``, ``HostState.apply``, ``ReachTracker.note``),
``HostState._apply_sample``, ``fleet_changes.numbers_only`` and ``findings._throttled``
(``judging_before``), copied unchanged.  The reference ``test_quiet_tick`` holds
the fold to, and the same-run baseline of ``bench_quiet_tick.py``.  Not imported by the
console."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from probes.analysis import actions as acts
from probes.analysis import findings
from probes.analysis.findings import Finding
from probes.analysis.fleet_changes import NumbersMark, numbers_mark
from probes.analysis.item_findings import sample_chains
from probes.analysis.judge import POWER_CAP, slowing_reasons
from probes.analysis.limits import DetectorLimits
from probes.analysis.tick_gpus import MovingGpu, tick_gpus
from probes.fleet_state import FleetState, HostState
from probes.triage import Code, Severity, Step
from probes.wire.events import JobChange, SessionItem, SourceHealth
from probes.wire.samples import GpuSample, Hello, HostSample


def numbers_only_before(host: HostState, mark: NumbersMark) -> bool:
    shape, status, outage, watch, last = mark
    reach = host.reach
    new = host.last
    kept = host.findings_kept
    if (kept.content - kept.reworded != shape or reach.status is not status
            or reach.outage is not outage or reach.watch is not watch or reach.onsets
            or last is None or new is None or host.logs.speed.drops(host.limits.detectors)):
        return False
    was, now = tick_gpus(last)[1], tick_gpus(new)[1]
    return was is now or [g.state for g in was] == [g.state for g in now]


def _throttled_before(host: str, gpu: GpuSample, now: MovingGpu, ts: float,
                      limits: DetectorLimits) -> Finding | None:
    """``findings._throttled`` as before (its ``Finding`` built by ``__init__``)."""
    active = slowing_reasons(now.clock_reasons, now.util_pct, limits)
    if not active:
        return None
    clocks = ""
    sm_clock = now.sm_clock_mhz
    if sm_clock is not None and gpu.sm_clock_max_mhz:
        clocks = f" at {sm_clock:.0f}/{gpu.sm_clock_max_mhz:.0f} MHz"
    return Finding(Step.GPU, Code.CLOCKS_THROTTLED, Severity.WARNING,
                   f"GPU {gpu.index} throttled: {', '.join(sorted(active))}{clocks}",
                   host, gpu=gpu.index, ts=ts,
                   action=acts.ACTION_POWER_CAPPED if set(active) == {POWER_CAP}
                   else acts.ACTION_THROTTLED)


@contextmanager
def judging_before() -> Iterator[None]:
    """While it lasts, the per-tick judges build a throttle finding as before."""
    saved = findings._throttled
    findings._throttled = _throttled_before
    try:
        yield
    finally:
        findings._throttled = saved


class HostStateBefore(HostState):
    """``HostState`` as before: a sample through ``apply`` and ``_apply_sample``."""

    def _apply_sample(self, sample: HostSample) -> None:
        self.last = sample
        self.history.add(sample)
        detected = self.detectors.run(self.name, self.history, self.hello, sample)
        if detected is not None:
            self.findings_kept.set_detected(detected)
        self.holds.update(sample)
        found = self.sample_judge.judged(self.name, self.hello, sample, self.history, self.holds,
                                         self.limits.detectors, self.spec.expect_gpus, self.peers)
        chains = sample_chains(self.name, self.hello, sample)
        if chains is not None:
            self.findings_kept.set_chains(chains)
        self.findings_kept.take_sample(found, sample.ts)


class FleetStateBefore(FleetState):
    """``FleetState`` whose hosts are ``HostStateBefore`` and whose ``apply`` is as before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, s in self.hosts.items():
            old = HostStateBefore(s.spec, limits=s.limits, detectors=s.detectors,
                                  history=s.history, logs=s.logs, peers=s.peers)
            self.hosts[name] = old

    def apply(self, host: str, item: SessionItem, now: float) -> None:
        if isinstance(item, JobChange):
            self.jobs[item.job] = item
            self._log.bump()
            return
        state = self.hosts.get(host)
        if state is not None:
            if isinstance(item, Hello) or (isinstance(item, HostSample) and state.last is None):
                self._rank_epoch += 1
            if isinstance(item, Hello):
                self.peers.add(host, item)
            mark = numbers_mark(state) if isinstance(item, HostSample) else None
            state.apply(item, now)
            if isinstance(item, SourceHealth):
                if state.reach.watch is None:
                    self.unseen.pop(host, None)
                else:
                    self.unseen[host] = state.reach.watch
            self._log.changed(host, judged=mark is None or
                              not numbers_only_before(state, mark))
            self._unticked.add(host)
