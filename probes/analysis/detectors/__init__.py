"""Detectors over a host's history: trouble that only shows over minutes or hours.

Each detector is a pure function of the host's ``HostHistory`` (plus its hello and newest
sample) returning ``Finding`` objects; ``run_detectors`` runs them all.  They read downsampled
points (15 s buckets, merged bins) rather than raw samples where a bucket's min/max/mean
answers the question, so calling them every ~10 s per host stays cheap.  Only the saw-tooth
test of data starvation and the swap check read raw samples (5 min and 1 min of them).

Every threshold lives in ``DetectorLimits`` (flat floats, ints and bools, so it can be loaded
from YAML, in ``probes.analysis.limits``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from probes.analysis.detectors.clocks import (
    detect_power_pinned,
    detect_temp_near_slowdown,
    detect_throttled_while_busy,
)
from probes.analysis.detectors.hardware import (
    detect_counters_increasing,
    detect_gpu_dropout,
    detect_link_downgrade_appeared,
)
from probes.analysis.detectors.host import detect_data_starvation, detect_swap_activity
from probes.analysis.detectors.memory import detect_memory_leak
from probes.analysis.detectors.spin import detect_collective_hang
from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory
from probes.wire.samples import Hello, HostSample

Detector = Callable[[str, HostHistory, "Hello | None", "HostSample | None", DetectorLimits],
                    list[Finding]]


SCHEDULE: tuple[tuple[Detector, float], ...] = (
    (detect_gpu_dropout, 60.0),
    (detect_counters_increasing, 60.0),
    (detect_memory_leak, 300.0),
    (detect_throttled_while_busy, 120.0),
    (detect_temp_near_slowdown, 120.0),
    (detect_power_pinned, 120.0),
    (detect_link_downgrade_appeared, 60.0),
    (detect_data_starvation, 120.0),
    (detect_swap_activity, 60.0),
    (detect_collective_hang, 60.0),
)
"""Every detector and how often (agent seconds) it needs to run: a new detector is one line.
Its verdict is about a window of minutes (sustained throttling) to an hour (a leak), so
running it every tick only costs CPU.  A drop-out is also reported from the sample itself at
once."""

DETECTORS: tuple[Detector, ...] = tuple(det for det, _ in SCHEDULE)
EVERY_S: Mapping[Detector, float] = dict(SCHEDULE)

YOUNG: Mapping[Detector, Callable[[DetectorLimits], float]] = {
    detect_throttled_while_busy: lambda lim: lim.throttle_window_s * lim.min_coverage,
    detect_temp_near_slowdown: lambda lim: lim.temp_window_s * lim.min_coverage,
    detect_power_pinned: lambda lim: lim.power_window_s * lim.min_coverage,
    detect_data_starvation: lambda lim: lim.starve_window_s * lim.min_coverage,
    detect_swap_activity: lambda lim: lim.swap_window_s * lim.min_coverage,
    detect_collective_hang: lambda lim: lim.hang_window_s * lim.min_coverage,
    detect_memory_leak: lambda lim: lim.leak_min_data_s,
}
"""The detectors that find nothing until a window's first point is this many seconds old:
each finding needs its window ``covered`` (``now - c.t[0] >= window * min_coverage``; the
leak: ``now - c.t[0] >= leak_min_data_s``), and no point of a history is older than
``_oldest``.  While a host's history is younger, such a detector's verdict is known, [],
without reading its windows (issue 38: at a fleet's start every host's first run read
every window of every detector for nothing, ~0.4 ms a host; the next minutes' runs too).
"""


def _oldest(history: HostHistory) -> float | None:
    """No point any query of ``history`` returns is older: its first sample (the raw ring
    and the staged samples hold samples' times, which only increase) or a coarser ring's
    oldest bucket (its start may precede the sample it holds).  None: not known."""
    first = history.first_ts
    if first is None:
        return None
    return min([first, *(o for r in history.store.rings if (o := r.oldest()) is not None)])


DETECTOR_HOSTS = 3000
"""Hosts whose detectors run at their own pace; a larger fleet runs each host's detectors
proportionally less often (10,000 hosts: every 3.3 periods), so their CPU stays that of
3,000 hosts'.  Their verdicts are about windows of ten minutes to an hour."""


def detector_stretch(hosts: int) -> float:
    """How many of its periods apart each detector runs in a fleet of ``hosts``."""
    return max(1.0, hosts / DETECTOR_HOSTS)


class DetectorSchedule:
    """Runs each detector of one host when it is due, keeping its last verdict between runs.

    It also keeps each finding's onset: a detector dates what it finds from its window
    (a leak from the start of the fitted hour, throttling from the first hot bucket), and
    the window slides, so the same leak would move 16:41 → 17:11 → 17:29 between runs.
    The earliest time a finding was dated while it stayed true is its onset, and triage,
    the timeline and reports order by it.
    """

    def __init__(self, limits: DetectorLimits = DEFAULT_LIMITS, stretch: float = 1.0) -> None:
        self.limits = limits
        self.stretch = stretch
        """Each detector runs every ``stretch`` times its period (a very large fleet)."""
        self._due: dict[Detector, float] = {}
        self._found: dict[Detector, list[Finding]] = {}
        self._onset: dict[tuple[str, str, int | None, int | None], float] = {}
        self._idle_from = math.inf
        self._idle_to = -math.inf
        """Sample times at which no detector is due: one comparison on most ticks."""

    def run(self, host: str, history: HostHistory, hello: Hello | None,
            sample: HostSample) -> tuple[Finding, ...] | None:
        """The findings after the detectors due at ``sample.ts`` ran; None when none was."""
        ts = sample.ts
        if self._idle_from <= ts <= self._idle_to:  # also asked by ``HostState.apply_sample``
            return None
        ran = False
        age: float | None = None
        for det in DETECTORS:
            due = self._due.get(det)
            every = EVERY_S[det] * self.stretch
            if due is not None and 0 <= due - ts <= every:
                continue
            self._due[det] = ts + every
            young = YOUNG.get(det)
            if young is not None:
                if age is None:
                    now, oldest = history.last_ts, _oldest(history)
                    age = math.inf if now is None or oldest is None else now - oldest
                if age < young(self.limits):
                    self._found[det] = []  # its verdict: no window of it is covered yet
                    ran = True
                    continue
            self._found[det] = det(host, history, hello, sample, self.limits)
            ran = True
        self._idle_window()
        if not ran:
            return None
        out = keep_onsets([f for found in self._found.values() for f in found], self._onset)
        out.sort(key=lambda f: (-f.severity.rank, f.gpu if f.gpu is not None else -1))
        return tuple(out)


    def _idle_window(self) -> None:
        """The times at which every detector's ``0 <= due - ts <= every`` holds.

        Inside [max(due - every), min(due)] it does for each; the lower end is moved up by
        ``IDLE_SLACK_S`` so that rounding in ``due - every`` never lets a tick skip a
        detector the loop would run (near either end the loop decides, as before).
        """
        if len(self._due) < len(DETECTORS):
            self._idle_from, self._idle_to = math.inf, -math.inf
            return
        self._idle_from = max(due - EVERY_S[det] * self.stretch
                              for det, due in self._due.items()) + IDLE_SLACK_S
        self._idle_to = min(self._due.values())


IDLE_SLACK_S = 1e-3
"""Far above the rounding of agent times (~2e-7 s at 2026's epoch), far below a tick."""


def keep_onsets(found: list[Finding],
                onsets: dict[tuple[str, str, int | None, int | None], float]) -> list[Finding]:
    """``found`` dated by their onsets; ``onsets`` is updated in place.

    A finding seen before keeps the earliest time it was dated; one no longer found is
    forgotten, so if it comes back it starts anew.
    """
    out = []
    for f in found:
        if f.ts is None:
            out.append(f)
            continue
        first = min(onsets.get(f.key, f.ts), f.ts)
        onsets[f.key] = first
        out.append(f if f.ts == first else replace(f, ts=first))
    keys = {f.key for f in found}
    for key in [k for k in onsets if k not in keys]:
        del onsets[key]
    return out


def run_detectors(host: str, history: HostHistory, hello: Hello | None = None,
                  sample: HostSample | None = None,
                  limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """Every detector over one host, worst first.

    Args:
        host: the host's name in the fleet.
        history: the host's history.
        hello: the host's hello (GPU list, slowdown thresholds, datasets); None if not seen.
        sample: the newest sample; defaults to the history's.
        limits: thresholds.
    """
    out: list[Finding] = []
    for det in DETECTORS:
        out.extend(det(host, history, hello, sample, limits))
    out.sort(key=lambda f: (-f.severity.rank, f.gpu if f.gpu is not None else -1))
    return out
