"""A young history's detectors (issue 38 item 1, session 10): a detector whose every finding
needs a covered window gives [] without reading it while the history is younger than that
(``detectors.YOUNG``), and the schedule's verdicts are those of running it.

Held to ``detectors_before_s10`` (main at ``001268f``) at every tick: one ``HostHistory``
per host, both schedules run over it after each sample (findings compared field by field,
types and onsets; None where none was due).  Hosts: the simulator's healthy, throttling
(from minute 5), leaking, hung collective, saturated disk, idle and flipping hosts and the
random hosts of ``test_fold_age`` (GPUs switching between busy, idle, near the lines, hung),
at 1, 2, 5 and 10 s, with silences and restarts (ticks stamped before the newest, which the
history drops); a wire stream with NaN/inf and GPUs missing (``agent_stream``); under the
default limits and random ones (windows of 20 s to 15 min, coverage 0 to 1, the leak's
data from 1 to 30 min) so that findings come right as a window is first covered.
Negative controls: a gate a few seconds laxer, or one reading the history's age from its
first sample only (not its coarse buckets), is caught.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterator

import pytest

from probes.analysis import detectors
from probes.analysis.detectors import DetectorSchedule
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, HostSample
from tests.analysis import detectors_before_s10 as before_s10
from tests.analysis.test_fold_age import RandomSim
from tests.analysis.test_judges_changed import _exact
from tests.bench.bench_fold_age import HOSTS, T0, stream
from tests.transport.test_relay_rows import agent_stream


def random_limits(rng: random.Random) -> DetectorLimits:
    """Short windows and odd coverages: findings as soon as a window is covered."""
    def w() -> float:
        return rng.choice((20.0, 45.0, 60.0, 90.0, 150.0, 300.0, 900.0))

    return dataclasses.replace(
        DEFAULT_LIMITS, min_coverage=rng.choice((0.0, 0.3, 0.5, 0.8, 1.0)),
        throttle_window_s=w(), temp_window_s=w(), power_window_s=w(), starve_window_s=w(),
        swap_window_s=w(), hang_window_s=w(),
        leak_min_data_s=rng.choice((60.0, 300.0, 900.0, 1800.0)),
        leak_window_s=rng.choice((600.0, 1800.0, 3600.0)),
        temp_margin_c=rng.choice((5.0, 30.0)), power_pinned_share=rng.choice((0.5, 0.95)),
        leak_min_mib_h=rng.choice((1.0, 50.0)), throttle_min_share=rng.choice((0.0, 0.6)))


def samples(data: Iterator[bytes]) -> Iterator[Hello | HostSample]:
    reader = MessageReader()
    for chunk in data:
        for item in reader.feed(chunk):
            if isinstance(item, Hello | HostSample):
                yield item


def first_difference(items: Iterator[Hello | HostSample], limits: DetectorLimits,
                     found: Counter[str] | None = None,
                     skipped: Counter[str] | None = None) -> str | None:
    """Both schedules over one history, every sample; where they first differ (``found``:
    the codes found; ``skipped``: the runs the gate answered)."""
    history = HostHistory()
    new = DetectorSchedule(limits)
    old = before_s10.DetectorSchedule(limits)
    hello: Hello | None = None
    for item in items:
        if isinstance(item, Hello):
            hello = item
            continue
        history.add(item)
        due = dict(new._due)
        a = new.run("h", history, hello, item)
        if skipped is not None and history.last_ts is not None:
            oldest = detectors._oldest(history)
            age = history.last_ts - oldest if oldest is not None else None
            skipped.update(d.__name__ for d, young in detectors.YOUNG.items()
                           if new._due.get(d) != due.get(d) and age is not None
                           and age < young(limits))
        b = old.run("h", history, hello, item)
        if (a is None) != (b is None) or (a is not None and b is not None
                                          and _exact(a) != _exact(b)):
            return f"at {item.ts}: {[f.code for f in a or ()]} / {[f.code for f in b or ()]}"
        if found is not None and a:
            found.update(f.code.value for f in a)
    return None


CASES = [(name, interval) for name in HOSTS for interval in (1.0, 5.0)]


@pytest.mark.parametrize(("name", "interval"), CASES)
def test_simulated_hosts_under_default_limits(name: str, interval: float) -> None:
    seconds = 2400.0 if interval == 1.0 else 4000.0
    assert first_difference(samples(stream(name, seconds, interval, gaps=0.003)),
                            DEFAULT_LIMITS) is None


@pytest.mark.parametrize("seed", range(6))
def test_random_hosts_under_random_limits(seed: int) -> None:
    rng = random.Random(seed)
    found: Counter[str] = Counter()
    for k, name in enumerate(HOSTS):
        interval = rng.choice((1.0, 2.0, 10.0))
        sim = RandomSim(seed * 10 + k) if k % 3 == 0 else None
        data = stream(name, rng.choice((600.0, 1500.0, 2400.0)), interval, seed=seed + k,
                      sim=sim, gaps=0.01)
        where = first_difference(samples(data), random_limits(rng), found)
        assert where is None, (name, where)
    assert found, "not vacuous: something is found"


def test_hostile_wire_streams() -> None:
    rng = random.Random(7)
    for seed in range(8):
        where = first_difference(samples(iter([agent_stream(seed, 300)])), random_limits(rng))
        assert where is None, (seed, where)


def test_findings_come_as_windows_fill() -> None:
    """Not vacuous: across random limits the gated detectors find something, and the gate
    answers runs of each of them."""
    rng = random.Random(99)
    found: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    for k in range(12):
        name = ("throttle", "leak", "hang", "starved")[k % 4]
        where = first_difference(samples(stream(name, 1800.0, 1.0, seed=k)),
                                 random_limits(rng), found, skipped)
        assert where is None, where
    assert {"throttled-while-busy", "memory-leak", "collective-hang"} <= set(found), found
    assert len(skipped) == len(detectors.YOUNG), skipped


# --- negative controls ----------------------------------------------------------------------

def _laxer(mp: pytest.MonkeyPatch, slack_s: float) -> None:
    mp.setattr(detectors, "YOUNG", {d: (lambda lim, f=f: f(lim) + slack_s)
                                    for d, f in detectors.YOUNG.items()})


def _caught(limits_seed: int = 3) -> bool:
    rng = random.Random(limits_seed)
    for k in range(8):
        name = ("throttle", "leak", "hang", "starved")[k % 4]
        lim = random_limits(rng)
        if first_difference(samples(stream(name, 1800.0, 1.0, seed=k)), lim) is not None:
            return True
    return False


def test_negative_control_a_laxer_gate_is_caught() -> None:
    with pytest.MonkeyPatch.context() as mp:
        _laxer(mp, 3.0)
        assert _caught()


def test_negative_control_the_age_from_the_first_sample_alone_is_caught() -> None:
    """A coarse bucket starts before the sample it holds: the first sample's time alone
    makes the history look younger than its points.  The host's first sample 50 s past a
    minute: its 15 s bucket starts 5 s before it, and the leak's hour is read from the 15 s
    tier; with 1,809 s of data asked, the run at 1,806 s (due every 300 s from the first,
    run past it) finds the leak from 1,811 s of points."""
    def first_only(history: HostHistory) -> float | None:
        return history.first_ts

    limits = dataclasses.replace(DEFAULT_LIMITS, leak_min_data_s=1809.0)
    data = [x for x in samples(stream("leak", 2400.0, 1.0, seed=2))
            if isinstance(x, Hello) or x.ts >= T0 + 50.0]
    found: Counter[str] = Counter()
    assert first_difference(iter(data), limits, found) is None
    assert found["memory-leak"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(detectors, "_oldest", first_only)
        assert first_difference(iter(data), limits) is not None
