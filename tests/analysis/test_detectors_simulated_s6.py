"""Session 6's two detector changes (throttled-while-busy tries a busy GPU's clocks first;
collective-hang bounds its hour of power from a coarse read) on realistic streams: the
agent's own simulator, as the fleet benches replay it (``bench_ingest.template``, wire v2
decoded by ``MessageReader``), with the demo's troubles (a GPU throttling, one leaking, an
Xid 79 GPU lost, a hung NCCL collective, a saturated disk, an x8 link, plain training).
Every minute from the fifth to the 20th, every detector against main's copies from before
(``clocks_before_s6``, ``spin_before_s6``; the rest are unchanged), finding by finding; the
throttling, the hang, the lost GPU and the starved input must be found (the leak needs half
an hour of data: it is held to before in ``test_detectors_pruned``).  The negative control is in
``test_throttle_busy_first`` and ``test_hang_hour_bound``.
"""

from __future__ import annotations

from collections import Counter

import pytest

import tests.bench.bench_ingest as bench_ingest
from probes.analysis.detectors import SCHEDULE
from probes.analysis.limits import DEFAULT_LIMITS
from tests.analysis import clocks_before_s6, spin_before_s6
from tests.bench.bench_detectors import hosts_at

TROUBLES = ("throttle:5", "leak:3", "xid79:6@3900", "nccl-timeout@4200", "disk-saturated",
            "link-downgrade:2", "train", "healthy")
"""The simulator's scenarios (its stream starts an hour into the run: @3900 is 5 min in)."""
OLD = {"detect_throttled_while_busy": clocks_before_s6.detect_throttled_while_busy,
       "detect_collective_hang": spin_before_s6.detect_collective_hang}


def test_simulated_troubles_find_what_they_found_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_ingest, "SCENARIOS", TROUBLES)
    found: Counter[str] = Counter()
    for _, hosts in hosts_at(len(TROUBLES), list(range(300, 1201, 60))):
        for det, _ in SCHEDULE:
            old = OLD.get(det.__name__, det)
            for name, hist, hello, sample in hosts:
                got = det(name, hist, hello, sample, DEFAULT_LIMITS)
                assert got == old(name, hist, hello, sample, DEFAULT_LIMITS), (name, det)
                found.update(f.code for f in got)
    want = {"throttled-while-busy", "collective-hang", "gpu-dropout", "data-starvation"}
    assert want <= set(found), found
