"""A fabric report's findings without judging links already judged quiet, nor placing GPUs
beside ports when no finding names them (issue 38 item 5, session 11).

``fabric._judged`` now skips ``nvlink_verdicts`` for the very link objects judged to have no
verdict before (``quiet_or_verdicts``), and works out ``beside`` only when there is a
finding.  Checked against the reference copy (``judged_before``) over random fleets: hosts
of a few models whose links are mostly shared and healthy, and some dead, slow or erring
links, ports down or slower than their siblings, counters rising, hellos with and without
NICs; the findings equal field by field, host by host, report after report.  Negative
control: a memo keyed by the links' count hands a host with a dead link the quiet answer.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from probes.analysis import fabric
from probes.analysis.fabric import FabricTracker, fabric_findings
from probes.analysis.limits import DEFAULT_LIMITS
from probes.rules.fabric import LinkView, Verdict, nvlink_verdicts
from probes.wire.protocol import decode_line
from probes.wire.samples import FabricSample, Hello, IbPortSample, NvLinkSample
from tests.transport.test_relay_rows import agent_stream
from tests.wire.start_decode_before_s11 import judged_before
from tests.wire.test_shared_facts import _typed


def _links(rng: random.Random, model: int, noisy: bool) -> tuple[NvLinkSample, ...]:
    speed: Any = (26.562, 50.0, 25)[model % 3]
    out = []
    for gpu in range(8):
        for n in range(18 if model % 2 == 0 else 12):
            active: bool | None = True
            s, replay, recovery, crc = speed, 0, 0, 0
            r = rng.random() if noisy else 1.0
            if r < 0.004:
                active = False
            elif r < 0.008:
                s = speed / 2
            elif r < 0.012:
                replay = rng.choice((1, 3, 50))
            elif r < 0.014:
                crc = 1
            elif r < 0.016:
                active, s = None, None
            elif r < 0.018:
                s = -0.0 if rng.random() < 0.5 else 0.0
            out.append(NvLinkSample(gpu, n, active, s, replay, recovery, crc))
    return tuple(out)


def _ports(rng: random.Random, noisy: bool) -> tuple[IbPortSample, ...]:
    out = []
    for i in range(rng.choice((0, 4, 8))):
        state, rate = "ACTIVE", 400.0
        r = rng.random() if noisy else 1.0
        if r < 0.03:
            state = "DOWN"
        elif r < 0.06:
            rate = 200.0
        errors = {"symbol_error": rng.randrange(1, 40)} if noisy and rng.random() < 0.03 \
            else {}
        out.append(IbPortSample(f"mlx5_{i}", 1, state, "LinkUp", rate, "InfiniBand", errors))
    return tuple(out)


@functools.cache
def _hello(k: int) -> Hello:
    """The simulator's hello (its HCAs beside its GPUs)."""
    hello = decode_line(agent_stream(200 + k, 1, spoil=False).splitlines()[0])
    assert isinstance(hello, Hello) and hello.nics
    return hello


def _findings(judge: Any, seed: int) -> list[Any]:
    rng = random.Random(seed)
    hellos: list[Hello | None] = [_hello(k) for k in range(3)] + [None]
    trackers = [FabricTracker() for _ in range(120)]
    out: list[Any] = []
    for report in range(4):
        for h, tracker in enumerate(trackers):
            model, noisy = h % 3, rng.random() < 0.4
            tracker.add(FabricSample(1_800_000_000.0 + 30 * report + h, 30.0,
                                     _ports(rng, noisy), _links(rng, model, noisy), None))
            hello = hellos[h % len(hellos)]
            got = judge(f"h{h}", tracker, hello, DEFAULT_LIMITS,
                        tracker.recent(tracker.ts or 0.0, DEFAULT_LIMITS.ib_errors_window_s))
            out.append([_typed(f) for f in got])
    return out


@pytest.fixture(autouse=True)
def _fresh_memo() -> None:
    fabric._quiet.clear()


def test_the_findings_are_the_judged_ones() -> None:
    want = _findings(judged_before, 38)
    fabric._quiet.clear()
    got = _findings(fabric._judged, 38)
    assert sum(1 for f in want if f) > 100 and sum(1 for f in want if not f) > 100
    assert len(fabric._quiet) > 0  # the memo was used
    assert got == want


def test_fabric_findings_reads_the_same() -> None:
    rng = random.Random(7)
    tracker = FabricTracker()
    tracker.add(FabricSample(1_800_000_000.0, 30.0, _ports(rng, True), _links(rng, 0, True),
                             None))
    want = judged_before("h", tracker, None, DEFAULT_LIMITS,
                         tracker.recent(tracker.ts or 0.0, DEFAULT_LIMITS.ib_errors_window_s))
    assert [_typed(f) for f in fabric_findings("h", tracker, None)] == \
        [_typed(f) for f in want]


def test_negative_control_a_memo_by_the_links_count_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    want = _findings(judged_before, 38)
    seen: dict[int, list[Verdict]] = {}

    def by_count(links: tuple[LinkView, ...]) -> list[Verdict]:
        if len(links) not in seen:
            seen[len(links)] = nvlink_verdicts(links)
        return list(seen[len(links)])

    monkeypatch.setattr(fabric, "quiet_or_verdicts", by_count)
    assert _findings(fabric._judged, 38) != want
