"""A persisting finding keeps last tick's dated object (issue 38).

``HostFindings.take_sample`` dates each current finding to its onset.  It used to do so
with ``dataclasses.replace`` for every persisting finding on every tick; now it reuses last
tick's dated finding when the new one equals it apart from its ts.  The findings must be
exactly the old ones: on the demo's agent streams folded by ``HostState`` and on random
streams of findings (evidence that changes, ``extra`` whose numbers change type, findings
that come and go), every current finding after every tick equals the old behaviour's field
by field, types included, ``extra`` and the fields ``==`` skips too.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import fields, replace

import pytest

from probes.analysis import host_findings, sample_judge
from probes.analysis.findings import Finding
from probes.analysis.host_findings import HostFindings
from probes.config.fleet import HostSpec
from probes.fleet_state import HostState
from probes.triage import Code, Severity, Step
from probes.wire.protocol import MessageReader
from tests.wire.test_wire_v2 import _agent


def old_take_sample(self: HostFindings, found: Iterable[Finding], ts: float) -> None:
    """``HostFindings.take_sample`` before (main at 9b8f24c), the reference."""
    self.revision += 1
    current = []
    for f in found:
        if f.code == Code.GPU_LOST:
            self.sticky.setdefault(f.key, f)
            continue
        first = self.since.setdefault(f.key, ts)
        current.append(f if f.ts == first else replace(f, ts=first))
    keys = {f.key for f in current}
    for key in [k for k in self.since if k not in keys]:
        del self.since[key]
    self.current = tuple(current)


def _typed(v: object) -> object:
    if isinstance(v, dict):
        return sorted((k, type(x), x) for k, x in v.items())
    return (type(v), v)


def _exact(found: Iterable[Finding]) -> list[list[object]]:
    return [[_typed(getattr(f, x.name)) for x in fields(Finding)] for f in found]


def _fold(raw: bytes, take: object, monkeypatch: pytest.MonkeyPatch
          ) -> tuple[list[object], int]:
    monkeypatch.setattr(HostFindings, "take_sample", take)
    # every tick judged and taken (``SampleJudge``'s "unchanged" would skip the take)
    monkeypatch.setattr(sample_judge, "tick_inputs", lambda *_: None)
    state = HostState(HostSpec(name="h"))
    reader = MessageReader()
    seen: list[object] = []
    reused = 0
    for item in reader.feed(raw):
        ts = getattr(item, "ts", 1.0)
        kept = state.findings_kept
        before = {f.key: f for f in kept.current}
        state.apply(item, ts)
        reused += sum(before.get(f.key) is f for f in kept.current)
        seen.append((_exact(kept.current), dict(kept.since), _exact(kept.sticky.values())))
    return seen, reused


@pytest.mark.parametrize("scenario", ["leak:3,link-downgrade:2", "throttle:2,xid79:6@20",
                                      "xid79:2@60,nccl-timeout@90,leak,throttle"])
def test_a_folded_stream_keeps_the_same_findings(monkeypatch: pytest.MonkeyPatch,
                                                 scenario: str) -> None:
    raw = _agent(scenario, "--wire", "2", count=60)
    new, reused = _fold(raw, HostFindings.take_sample, monkeypatch)
    old, _ = _fold(raw, old_take_sample, monkeypatch)
    assert new == old
    assert reused > 0  # a persisting finding kept its dated object (a throttle's text moves)


def _random_stream(rng: random.Random, ticks: int) -> list[tuple[float, list[Finding]]]:
    """Per GPU and code a finding that comes and goes, one of its fields changing now and
    then (``extra``'s number among 5, 5.0, True and 1), judged anew (ts the tick's) each tick."""
    codes = [Code.CLOCKS_THROTTLED, Code.PCIE_LINK_DOWNGRADED, Code.DISK_SATURATED,
             Code.GPU_LOST, Code.ECC_UNCORRECTABLE]
    choices: dict[str, tuple[object, ...]] = {
        "severity": (Severity.WARNING, Severity.CRITICAL), "summary": ("slow", "slower"),
        "evidence": (None, "e"), "count": (1, 2), "context": ((), ("a",)), "line": (None, 3),
        "extra": ({}, {"n": 5}, {"n": 5.0}, {"n": True}, {"n": 1}, {"n": 5, "m": "x"})}
    state = {(gpu, code): {k: v[0] for k, v in choices.items()}
             for gpu in range(4) for code in codes}
    present = dict.fromkeys(state, True)
    out = []
    for t in range(ticks):
        ts = 1000.0 + t
        found = []
        for key, values in state.items():
            if rng.random() < 0.05:
                present[key] = not present[key]
            if rng.random() < 0.2:
                name = rng.choice(list(choices))
                values[name] = rng.choice(choices[name])
            if present[key]:
                found.append(Finding(Step.GPU, key[1], summary=values["summary"], host="h",
                                     gpu=key[0], ts=rng.choice((ts, ts, None)),
                                     **{k: v for k, v in values.items() if k != "summary"}))
        out.append((ts, found))
    return out


def test_random_streams_keep_the_same_findings() -> None:
    reused = 0
    for seed in range(6):
        stream = _random_stream(random.Random(seed), 300)
        new, old = HostFindings(), HostFindings()
        for ts, found in stream:
            before = {f.key: f for f in new.current}
            new.take_sample(found, ts)
            old_take_sample(old, found, ts)
            assert _exact(new.current) == _exact(old.current)
            assert new.since == old.since and _exact(new.sticky.values()) == \
                _exact(old.sticky.values())
            reused += sum(before.get(f.key) is f for f in new.current)
    assert reused > 500


def test_negative_control_reuse_on_equality_alone_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reusing on ``==`` (which skips ``extra``, ``context``, ``line``) or ignoring the
    types in ``extra`` would change findings: the random streams see both."""
    for wrong in (lambda a, b: a == b,
                  lambda a, b: host_findings._BUT_TS(a) == host_findings._BUT_TS(b)):
        monkeypatch.setattr(host_findings, "_same", wrong)
        with pytest.raises(AssertionError):
            test_random_streams_keep_the_same_findings()
