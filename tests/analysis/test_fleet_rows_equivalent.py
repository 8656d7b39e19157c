"""Cheap fleet rows (issue 38, the UI process at a thousand hosts) answer as before.

A row now reads its numbers and GPU verdicts from the tick's row and static epoch
(``probes.analysis.row_judge``), never building a v2 tick's GPUs, each verdict kept while
what it reads holds; a host's findings are remembered while nothing they read moved
(``HostState.findings_key``: a sample that changed no kept finding moves nothing); a kept
row is re-stamped without ``dataclasses.replace``.  Here a fleet of every kind of sample
(wire v2's fast path and its checked path, eager v1-shaped samples, the agent's v1 stream
with its events and fabric, samples read back from a recording, Prometheus-shaped samples)
with outages, silences, a watcher's fault, kernel Xid lines and clock offsets, is read each
second through the console's ``FleetRows`` and through the reference copy of the code before
(``tests.analysis.fleet_rows_before``): every row, the totals, each host's own row and its
findings, compared field by field (``repr``: the types of numbers too), with the on-screen
hosts changing.  Negative controls: a findings memo keyed on less, verdicts kept past a
moving input, the numbers read from the static half, each caught.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from probes import agent
from probes.agent.output import CompactEncoder, compact_columns
from probes.analysis import row_judge
from probes.analysis.limits import DetectorLimits
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind, WatcherFault
from probes.fleet_state import FleetState, HostState
from probes.sources.prometheus.source import Discovery
from probes.store import codec
from probes.wire.events import ClockOffset, Connected, Disconnected, SessionItem, SourceHealth
from probes.wire.protocol import MessageReader
from probes.wire.samples import GpuInfo, GpuSample, Hello, HostSample, LogEvent
from tests.analysis.fleet_rows_before import FleetRowsBefore, findings_before, row_before
from tests.analysis.test_judges_read_the_row import SIM, sim_stream
from tests.analysis.test_sample_findings_cache import _stream as cache_stream
from tests.bench.bench_ingest import SIM_START_S, wire
from tests.support.templates import template
from tests.support.tui_fakes import T0, sim_items
from tui.views.fleet_rows import FleetRows

SECONDS = 150
XID = "NVRM: Xid (PCI:0000:05:00): 79, pid=1, name=python, GPU has fallen off the bus."
LIMITS = DetectorLimits(alloc_idle_s=120.0)

Feed = Iterator[list[SessionItem]]
"""One host's items, a list per second."""


def _samples(stream: Iterator[tuple[HostSample, str, Hello | None, Any]],
             copy: str = "") -> Feed:
    """A judged stream as a host's items: its hellos when they change, its samples (``copy``:
    ``replace``d, as v1 and the checked path build them, or read back from a recording)."""
    hello: Hello | None = None
    for sample, _, known, _ in stream:
        items: list[SessionItem] = []
        if known is not None and known is not hello:
            hello = known
            items.append(known)
        if copy == "eager":
            sample = dataclasses.replace(sample)
        elif copy == "replay":
            sample = codec.decode(codec.encode(sample))  # type: ignore[assignment]
        items.append(sample)
        yield items


def _v1(host: str, scenario: str, seed: int) -> Feed:
    """The agent's simulator in wire v1, with its events, fabric and clock (one simulated
    minute a second)."""
    items = sim_items(host, scenario, seed=seed, minutes=SECONDS + 5)
    batch: list[SessionItem] = []
    for item in items:
        batch.append(item)
        if isinstance(item, HostSample):
            yield batch
            batch = []


def _jitter(seed: int) -> Feed:
    """Wire v2 from the agent's simulator with the moving inputs of the GPU verdicts that no
    finding reads (power near its limit, memory nearly full, a busy GPU at its power cap)
    moving tick by tick under one static message."""
    rng = random.Random(seed)
    sim = agent.Simulator(agent.parse_scenarios("healthy"), seed, f"j{seed}")
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": 2, "agent": "test", "ts": T0,
                             "host": facts, "gpus": gpus, "columns": compact_columns()}
    reader, encoder = MessageReader(), CompactEncoder()
    yield [m for m in reader.feed(wire(hello)) if isinstance(m, Hello)]
    for seq in range(SECONDS + 5):
        g, h, disks = sim.sample(SIM_START_S + seq)
        for gpu in g:
            if rng.random() < 0.3:
                gpu["power_w"] = gpu.get("power_limit_w") or 700.0
            if rng.random() < 0.3 and gpu.get("mem_total_mib"):
                gpu["mem_used_mib"] = 0.99 * gpu["mem_total_mib"]
            if rng.random() < 0.2:
                gpu["clock_reasons"] = ["sw_power_cap"]
                gpu["util_pct"] = rng.choice([5.0, 99.0])
        msg = {"type": "sample", "v": 1, "seq": seq, "ts": T0 + seq, "gpus": g, "host": h,
               "disks": disks}
        yield list(reader.feed(b"".join(wire(x) for x in encoder.encode(msg))))


def _prometheus(host: str, seed: int) -> Feed:
    """Samples as ``PromFleetSource`` builds them (``HostSample(ts, seq, gpus)``, only what
    dcgm-exporter collects), after its hello (some metrics not collected)."""
    rng = random.Random(seed)
    gpus = {i: GpuInfo(i, f"GPU-{seed}-{i}", None, "H100", 81559.0,
                       temp_slowdown_c=rng.choice([None, 87.0]))
            for i in range(6)}
    discovery = Discovery(gpus={host: gpus}, present=frozenset({
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE"}))
    yield [discovery.hello(host, T0, {i: 81559.0 for i in gpus})]
    for seq in range(SECONDS + 5):
        out = []
        for i in gpus:
            if rng.random() < 0.02:
                continue  # a GPU missing from this read
            out.append(GpuSample(
                i, uuid=f"GPU-{seed}-{i}", mem_total_mib=81559.0,
                mem_used_mib=rng.choice([None, 1000.0, 79000.0, 80000.0 + seq]),
                util_pct=rng.choice([None, 0.0, 95.0, 100.0]),
                temp_c=rng.choice([None, 60.0, 84.0, 90.0]),
                power_w=rng.choice([None, 300.0, 699.0])))
        yield [HostSample(T0 + seq, seq, tuple(out))]


def _feeds() -> dict[str, tuple[HostSpec, Feed]]:
    """Every kind of sample the console folds, a host (or more) each."""
    feeds: dict[str, tuple[HostSpec, Feed]] = {}
    for k, scenario in enumerate(SIM[:6]):
        feeds[f"v2-{k}"] = (HostSpec(name=f"v2-{k}", expect_gpus=8 if k % 2 else None),
                            _samples(sim_stream(scenario, 30 + k, SECONDS + 5)))
    for seed in range(2):
        feeds[f"jitter-{seed}"] = (HostSpec(name=f"jitter-{seed}"), _jitter(60 + seed))
    for seed in range(2):  # the checked path among them (odd ticks, hellos, other GPU counts)
        feeds[f"mixed-{seed}"] = (HostSpec(name=f"mixed-{seed}", expect_gpus=8),
                                  _samples(cache_stream(seed, SECONDS + 5)))
    feeds["eager"] = (HostSpec(name="eager"),
                      _samples(sim_stream("throttle:2,leak:4", 50, SECONDS + 5), "eager"))
    feeds["replay"] = (HostSpec(name="replay", expect_gpus=8),
                       _samples(sim_stream("leak:3,link-downgrade:1", 51, SECONDS + 5),
                                "replay"))
    feeds["v1"] = (HostSpec(name="v1", expect_gpus=8, simulate=("xid79:6@3000",), seed=3),
                   _v1("v1", "xid79:6@3000", 3))
    feeds["prom"] = (HostSpec(name="prom", interval_s=2.0, expect_gpus=8),
                     _prometheus("prom", 7))
    return feeds


def _repr(rows: list[Any]) -> list[str]:
    return [repr(r) for r in rows]


def _finding_fields(found: list[Any]) -> list[str]:
    return [repr({**vars(f), "extra": dict(f.extra)}) for f in found]


def run(seed: int = 1, seconds: int = SECONDS) -> tuple[Counter[str], Counter[str]]:
    """Fold the fleet, reading it each second both ways: (ticks that differ, by what;
    what the streams reached)."""
    rng = random.Random(seed)
    feeds = _feeds()
    fleet = FleetState([spec for spec, _ in feeds.values()], LIMITS)
    new, old = FleetRows(fleet), FleetRowsBefore(fleet)
    names = list(feeds)
    wrong, seen = Counter[str](), Counter[str]()
    silent: dict[str, int] = {}
    watched_out: set[str] = set()
    for t in range(seconds):
        now = T0 + t
        for name, (_, feed) in feeds.items():
            roll = rng.random()
            if silent.get(name, 0) > t:
                continue
            if roll < 0.01:  # silent for a while: stale
                silent[name] = t + rng.randrange(6, 20)
                continue
            if roll < 0.02:  # an outage, then a retry
                fleet.apply(name, Disconnected(now, "connection reset", 3.0,
                                               kind=rng.choice(list(DisconnectKind))), now)
                silent[name] = t + rng.randrange(2, 8)
                continue
            if roll < 0.025:  # connecting: its stream resumes next second
                fleet.apply(name, Connected(now), now)
                continue
            if roll < 0.03:
                fleet.apply(name, LogEvent(now, "kernel", XID), now)
            elif roll < 0.035:
                fleet.apply(name, ClockOffset(now, rng.choice([0.5, 400.0]), 0.0), now)
            elif roll < 0.04:
                fault = None if name in watched_out else WatcherFault.COLLECTOR_STALLED
                watched_out.symmetric_difference_update({name})
                fleet.apply(name, SourceHealth(now, "collector-0", fault, "stalled"), now)
            for item in next(feed, []):
                fleet.apply(name, item, now)
        fleet.tick(now + rng.choice([0.0, 0.3]))
        if rng.random() < 0.2:  # the operator scrolls: other hosts on screen
            focus = None if rng.random() < 0.2 else frozenset(rng.sample(names, 4))
            new.focus = old.focus = focus
        read_at = now + rng.choice([0.0, 0.5, 0.9])
        rows = new.rows(read_at)
        wrong["rows"] += _repr(rows) != _repr(old.rows(read_at))
        for r in rows:
            seen["jobs"] += bool(r.jobs)
            for j in r.gpus:
                seen["GPU memory high"] += j.mem_high
                seen["GPU power high"] += j.power_high
                seen["GPU slowing"] += bool(j.slowing)
                seen["GPU missing"] += j.verdict == "missing"
        wrong["totals"] += new.totals(read_at) != old.totals(read_at)
        for host in fleet.hosts.values():
            status = host.status_at(read_at)
            wrong["findings"] += _finding_fields(host.findings(status)) != \
                _finding_fields(findings_before(host, status))
            wrong["row"] += repr(host.row(read_at)) != repr(row_before(host, read_at))
            seen[host.shown_status_at(read_at).value] += 1
            if host.last is not None:
                seen["with a row" if host.last.wire_row is not None else "no row"] += 1
            for f in host.findings(status):
                seen[f.code] += 1
    seen["builds"] = new.row_builds
    wrong["builds"] = new.row_builds != old.row_builds
    return wrong, seen


def test_rows_totals_and_findings_equal_the_code_before() -> None:
    wrong, seen = run()
    assert wrong == Counter({"rows": 0, "totals": 0, "findings": 0, "row": 0, "builds": 0})
    # the streams reach what the rows show: statuses, kinds of sample, findings of each kind
    for what in ("streaming", "stale", "down", "connecting", "unknown", "with a row",
                 "no row", "host-down", "host-stale", "xid", "clock-skew", "clocks-throttled",
                 "pcie-link-downgraded", "gpu-lost", "gpu-dropout", "gpu-stray-process",
                 "metric-not-collected", "GPU memory high", "GPU power high", "GPU slowing",
                 "GPU missing", "jobs"):
        assert seen[what] > 0, (what, seen)
    assert seen["with a row"] > 500 and seen["no row"] > 500


def _late_findings(host: HostState, status: Any) -> tuple[object, ...]:
    """A mutant: findings remembered while only the kept lists hold (a new outage, a
    watcher's fault or a log source missed)."""
    return (status,)


def _kept_verdicts(self: row_judge.RowJudge, *args: Any, **kw: Any) -> Any:
    """A mutant: a host's verdicts kept past their moving inputs."""
    state = self._state
    if self._judged is not None and state is not None and args[2] is state.found \
            and state.holds(row_judge.tick_gpus(args[0])[1], args[1], *args[3:]):
        return self._judged
    return _judged(self, *args, **kw)


_judged = row_judge.RowJudge.judged


def _static_numbers(sample: HostSample | None) -> Any:
    """A mutant: the numbers read from the static half (the moving numbers unseen)."""
    if sample is None:
        return None, 0.0, 0.0, None, None
    _, fixed, _ = row_judge.tick_gpus(sample)
    temps = [g.temp_c for g in fixed if g.temp_c is not None]
    used = sum(g.mem_used_mib or 0.0 for g in fixed)
    total = sum(g.mem_total_mib or 0.0 for g in fixed if g.mem_used_mib is not None)
    return max(temps) if temps else None, used, total, None, None


@pytest.mark.parametrize("mutant", ["findings", "verdicts", "numbers"])
def test_the_comparison_catches_a_row_or_finding_that_is_late(
        monkeypatch: pytest.MonkeyPatch, mutant: str) -> None:
    if mutant == "findings":
        monkeypatch.setattr(HostState, "findings_key", _late_findings)
    elif mutant == "verdicts":
        monkeypatch.setattr(row_judge.RowJudge, "judged", _kept_verdicts)
    else:
        monkeypatch.setattr("probes.fleet_state.row_numbers", _static_numbers)
    wrong, _ = run(seconds=SECONDS if mutant == "findings" else 60)
    assert wrong["row"] > 0 and wrong["rows"] > 0, wrong
    if mutant == "findings":  # an outage, a watcher's fault, a clock or log source missed
        assert wrong["findings"] > 0


def _built_by_rows() -> tuple[int, int]:
    feeds = {k: v for k, v in _feeds().items() if k.startswith("v2-")}
    fleet = FleetState([spec for spec, _ in feeds.values()], LIMITS)
    view = FleetRows(fleet)
    built = rows = 0
    for t in range(60):
        now = T0 + t
        for name, (_, feed) in feeds.items():
            for item in next(feed, []):
                fleet.apply(name, item, now)
        fleet.tick(now)
        before = {n: "gpus" in vars(h.last) for n, h in fleet.hosts.items() if h.last}
        view.rows(now)
        for n, host in fleet.hosts.items():
            if host.last is not None and host.last.wire_row is not None:
                rows += 1
                built += "gpus" in vars(host.last) and not before[n]
            host.row(now)
            built += host.last is not None and "gpus" in vars(host.last) and not before[n]
    return rows, built


def test_a_row_never_builds_a_v2_ticks_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows read each second of a v2 fleet: no tick's GPUs are built by them (the fold's
    detectors, when due, may build some before: those are not counted)."""
    rows, built = _built_by_rows()
    assert rows > 300 and built == 0
    monkeypatch.setattr(HostState, "row", row_before)  # the rows before: every one built
    rows, built = _built_by_rows()
    assert built >= rows > 300


@pytest.mark.parametrize("before", [False, True])
def test_a_sample_that_changes_no_finding_merges_nothing_again(
        monkeypatch: pytest.MonkeyPatch, before: bool) -> None:
    """Steady v2 hosts read each second: the findings are merged again only when a sample
    changed one (``before``: the memo keyed on the host's revision, merged every sample)."""
    if before:
        monkeypatch.setattr(HostState, "findings_key",
                            lambda self, status: (self.revision, status))
    merges = Counter[str]()
    reach = HostState.reachability

    def counted(self: HostState, status: Any = None) -> Any:
        merges[self.name] += 1  # called by each merge, once
        return reach(self, status)

    monkeypatch.setattr(HostState, "reachability", counted)
    names = [f"t{k}" for k in range(8)]  # healthy, leaking, on an x8 link: steady findings
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names], LIMITS)
    view = FleetRows(fleet)
    view.focus = frozenset(names[:2])
    feeds = []
    for k, name in enumerate(names):
        (_, _), (hello, ticks) = template((0, 2, 3)[k % 3] + 4 * k, 60)
        reader = MessageReader()
        for item in reader.feed(hello):
            fleet.apply(name, item, T0)
        feeds.append((name, reader, ticks))
    samples = 0
    for t in range(60):
        now = T0 + t
        for name, reader, ticks in feeds:
            for item in reader.feed(ticks[t]):
                fleet.apply(name, item, now)
                samples += isinstance(item, HostSample)
        fleet.tick(now)
        view.rows(now)
        for name in names:  # what a look at each changed host read (the view now skips
            host = fleet.hosts[name]  # the off-screen ones whose numbers alone moved)
            host.findings_as_kept(host.status_at(now))
    assert samples == 480
    if before:
        assert sum(merges.values()) >= samples
    else:
        assert sum(merges.values()) < samples / 4, merges
    assert sum(len(fleet.hosts[n].findings()) for n in names) > 0
