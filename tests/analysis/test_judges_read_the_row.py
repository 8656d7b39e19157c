"""The per-tick judges read a v2 tick's decoded row, not the sample's GPUs (issue 38).

A fast-path v2 sample carries its decoded row (``wire_row``) and its static epoch, whose
``gpus`` hold each GPU position's checked static half.  ``HostState._apply_sample``'s judges
(``HoldTracker.update`` and, through ``item_findings.sample_judged``, ``sample_findings``,
``host_findings``, ``idle_allocation_findings``, ``stray_process_findings``) take the moving
numbers from the row and the static half from the epoch (``probes.analysis.tick_gpus``), so a
steady fold never reads ``sample.gpus``, which such a sample need not build.

Here every judge's answer on such a sample must equal its answer on a ``dataclasses.replace``
copy (no row, no epoch: today's code, reading the sample's GPUs), finding by finding, field
by field (``extra`` included), tick after tick, with the holds' state compared too.  The
streams: the agent's simulator (healthy, throttling, leaking, on an x8 link, a GPU lost,
disks saturated, no environment, training) with processes outside any job appearing and
leaving, jobs leaving GPUs, GPUs going idle and the host swapping, so static messages come
mid-stream; and the random v2 streams of ``test_sample_findings_cache`` (states, links, ECC,
NVLinks and processes changing with each static message, new hellos, other limits).
No judge builds a row sample's GPUs (``HostSample.gpus`` builds them on first read: they
stay unbuilt), and a sample whose ``gpus`` raises goes through every judge unharmed.
Negative controls: the rows read at the wrong positions, or the static halves of a stale
epoch, fail the comparison; and a judge that reads the GPUs is caught (the raising sample,
the GPUs built).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from probes import agent
from probes.agent.output import CompactEncoder, compact_columns
from probes.analysis import allocation, findings, tick_gpus
from probes.analysis.allocation import (
    HoldTracker,
    idle_allocation_findings,
    stray_process_findings,
)
from probes.analysis.findings import Finding, host_findings, sample_findings
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory
from probes.triage import Code
from probes.wire.compact import GPU_ROW_FIELDS, StaticEpoch, static_gpus
from probes.wire.protocol import MessageReader
from probes.wire.samples import GpuSample, Hello, HostSample
from tests.analysis.test_sample_findings_cache import _stream as cache_stream
from tests.bench.bench_ingest import SIM_START_S, T0, wire

SHORT_IDLE = DetectorLimits(alloc_idle_s=120.0)
"""Idle allocations judged over two minutes, so a few minutes of stream show them."""
SIM = ("healthy", "throttle:5", "leak:3", "link-downgrade:2", "throttle:1,leak:6",
       "disk-saturated", "xid79:6@3700", "no-environ", "train", "throttle:2,link-downgrade:4")

Judged = tuple[HostSample, str, Hello | None, DetectorLimits]


def _stray(rng: random.Random, pid: int) -> dict[str, Any]:
    """A process outside any job (its environment read), big or below ``stray_min_mib``."""
    return {"pid": pid, "name": rng.choice(["python", "jupyter"]), "user": "eve",
            "used_mib": rng.choice([100.0, 3000.0]), "environ": True}


def sim_stream(scenario: str, seed: int, seconds: int = 300) -> Iterator[Judged]:
    """The agent's simulator as the agent sends it in v2, with processes coming and going,
    jobs leaving GPUs, GPUs idling and the host swapping now and then."""
    rng = random.Random(seed)
    sim = agent.Simulator(agent.parse_scenarios(scenario), seed, f"s{seed}")
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": 2, "agent": "test", "ts": T0, "host": facts,
                             "gpus": gpus, "columns": compact_columns()}
    hello.update(sim.topology())
    reader, encoder = MessageReader(), CompactEncoder()
    known: Hello | None = None
    for m in reader.feed(wire(hello)):
        known = m if isinstance(m, Hello) else known
    strays: dict[int, list[dict[str, Any]]] = {}
    gone: set[int] = set()  # GPUs their job left
    idle: set[int] = set()
    limits = rng.choice([SHORT_IDLE, DEFAULT_LIMITS])
    for seq in range(seconds):
        g, h, disks = sim.sample(SIM_START_S + seq)
        roll, at = rng.random(), rng.randrange(len(g))
        if roll < 0.04:
            strays.setdefault(at, []).append(_stray(rng, 90000 + seq))
        elif roll < 0.07 and strays:
            strays.pop(rng.choice(sorted(strays)))
        elif roll < 0.09:
            gone ^= {at}
        elif roll < 0.11:
            idle ^= {at}
        for i in idle & set(range(len(g))):  # a lost GPU leaves the list
            g[i]["util_pct"], g[i]["clock_reasons"] = 0.0, []
        for i in gone & set(range(len(g))):
            g[i]["processes"] = []
        for i, procs in strays.items():
            if i >= len(g):
                continue
            for p in procs:  # their memory moves tick by tick
                p["used_mib"] = max(0.0, p["used_mib"] + rng.choice([-50.0, 0.0, 50.0]))
            g[i]["processes"] = list(g[i].get("processes") or []) + [dict(p) for p in procs]
        if rng.random() < 0.05:
            h["swap_in_pages_s"] = 400.0
        msg = {"type": "sample", "v": 1, "seq": seq, "ts": T0 + seq, "gpus": g, "host": h,
               "disks": disks}
        for m in reader.feed(b"".join(wire(x) for x in encoder.encode(msg))):
            if isinstance(m, HostSample):
                yield m, f"s{seed}", known, limits


def _fields(found: Sequence[Finding]) -> list[dict[str, object]]:
    """Every field of every finding, the ones equality leaves out included."""
    return [{**vars(f), "extra": dict(f.extra)} for f in found]


class Judges:
    """One host's per-tick judges, called as ``HostState._apply_sample`` calls them."""

    def __init__(self) -> None:
        self.holds = HoldTracker()

    def judge(self, history: HostHistory, sample: HostSample, host: str,
              hello: Hello | None, limits: DetectorLimits) -> dict[str, object]:
        """Each judge's answer (a mutant's misreading that raises: its error, that judge's)."""
        holds = self.holds
        return {
            "held": _either(lambda: (holds.update(sample), dict(holds.held))[1]),
            "findings": _either(lambda: _fields(sample_findings(host, hello, sample, limits))),
            "host": _either(lambda: _fields(host_findings(host, sample))),
            "idle": _either(lambda: _fields(idle_allocation_findings(host, history, sample,
                                                                     holds, limits))),
            "strays": _either(lambda: _fields(stray_process_findings(host, sample, limits)))}


def _either(judge: Callable[[], object]) -> object:
    try:
        return judge()
    except (ValueError, IndexError, AttributeError, TypeError) as e:  # a mutant's misreading
        return repr(e)


def _compare(streams: Iterator[Iterator[Judged]]) -> tuple[Counter[str], Counter[str], int]:
    """(ticks where the row path and the GPUs' path differ, by judge, and ``built``: row
    samples whose GPUs the judges built; findings by code on the GPUs' path; samples with a
    row)."""
    wrong, codes, rows = Counter[str](), Counter[str](), 0
    for stream in streams:
        history, by_row, by_gpus = HostHistory(), Judges(), Judges()
        for sample, host, hello, limits in stream:
            history.add(sample)  # from its row, where it has one (its GPUs stay unbuilt)
            got = by_row.judge(history, sample, host, hello, limits)
            if sample.wire_row is not None:
                rows += 1
                wrong["built"] += "gpus" in vars(sample)  # built on first read only
            copy = dataclasses.replace(sample)  # no row, no epoch: the sample's GPUs
            assert copy.wire_row is None and copy.static_epoch is None
            want = by_gpus.judge(history, copy, host, hello, limits)
            for k, v in want.items():
                wrong[k] += got[k] != v
                if k != "held":
                    codes.update(f["code"] for f in v)  # type: ignore[attr-defined]
    return wrong, codes, rows


def _all_streams(sims: int, caches: int) -> Iterator[Iterator[Judged]]:
    for k in range(sims):
        yield sim_stream(SIM[k % len(SIM)], 11 + k)
    for seed in range(caches):
        yield cache_stream(seed, 300)


def test_every_judge_reads_the_row_as_it_read_the_gpus() -> None:
    wrong, codes, rows = _compare(_all_streams(len(SIM), 4))
    assert wrong == Counter({"findings": 0, "host": 0, "idle": 0, "strays": 0, "held": 0,
                             "built": 0})
    # the streams reach every per-tick judgement, and most samples carry a row
    for code in (Code.GPU_LOST, Code.GPU_UNRESPONSIVE, Code.CLOCKS_THROTTLED,
                 Code.PCIE_LINK_DOWNGRADED, Code.ECC_UNCORRECTABLE, Code.NVLINK_DOWN,
                 Code.DISK_SATURATED, Code.GPU_STRAY_PROCESS, Code.GPU_ALLOCATED_IDLE,
                 Code.HOST_SWAPPING):
        assert codes[code] > 10, (code, codes)
    assert rows > 3000


def _reversed(sample: HostSample) -> tick_gpus.TickGpus:
    """A mutant: each GPU's moving numbers read from another position's row."""
    moving, fixed, rows = tick_gpus.tick_gpus(sample)
    if rows is None:
        return moving, fixed, rows
    return list(moving)[::-1], fixed, list(rows)[::-1]


def _stale() -> tuple[Any, Any]:
    """A mutant: the static halves of the first epoch seen, kept across static messages."""
    first: dict[str, Sequence[GpuSample]] = {}

    def fixed(sample: HostSample) -> Sequence[GpuSample]:
        if sample.wire_row is None:
            return sample.gpus
        return first.setdefault("gpus", static_gpus(sample))

    def tick(sample: HostSample) -> tick_gpus.TickGpus:
        moving, _, rows = tick_gpus.tick_gpus(sample)
        return moving, fixed(sample), rows

    return tick, fixed


def test_rows_read_at_the_wrong_positions_fail_the_comparison(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findings, "tick_gpus", _reversed)
    monkeypatch.setattr(allocation, "tick_gpus", _reversed)
    wrong, _, _ = _compare(_all_streams(4, 0))
    assert wrong["findings"] > 100 and wrong["strays"] > 100


def test_a_stale_epochs_static_halves_fail_the_comparison(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tick, fixed = _stale()
    monkeypatch.setattr(allocation, "tick_gpus", tick)
    monkeypatch.setattr(allocation, "static_gpus", fixed)
    wrong, _, _ = _compare(_all_streams(4, 0))
    assert wrong["held"] > 100 and wrong["strays"] > 100 and wrong["idle"] > 20


class GpusRead(AssertionError):
    """A judge read the GPUs of a sample that need not have built them."""


class NoGpus(HostSample):
    """A sample whose ``gpus`` cannot be read (as a lazily built sample's must not be)."""

    @property  # type: ignore[override]
    def gpus(self) -> tuple[GpuSample, ...]:
        raise GpusRead("sample.gpus read")


def _no_gpus(sample: HostSample) -> NoGpus:
    out = object.__new__(NoGpus)
    object.__setattr__(out, "__dict__", {k: v for k, v in vars(sample).items() if k != "gpus"})
    return out


def _judge_without_gpus(streams: Iterator[Iterator[Judged]]) -> tuple[int, int]:
    """(samples judged through a ``NoGpus`` proxy, of them with the same answers)."""
    judged = same = 0
    for stream in streams:
        history, by_row, by_gpus = HostHistory(), Judges(), Judges()
        for sample, host, hello, limits in stream:
            copy = dataclasses.replace(sample)
            history.add(copy)
            want = by_gpus.judge(history, copy, host, hello, limits)
            if sample.wire_row is None:
                by_row.judge(history, sample, host, hello, limits)
                continue
            judged += 1
            same += by_row.judge(history, _no_gpus(sample), host, hello, limits) == want
    return judged, same


def test_a_sample_with_a_row_is_judged_without_its_gpus() -> None:
    judged, same = _judge_without_gpus(_all_streams(len(SIM), 2))
    assert judged > 3000 and same == judged


def test_a_judge_that_reads_the_gpus_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the row ignored (today's code before this change) raises."""
    def gpus_only(sample: HostSample) -> tick_gpus.TickGpus:
        return sample.gpus, sample.gpus, None

    assert isinstance(next(iter(sim_stream("healthy", 1)))[0].static_epoch, StaticEpoch)
    monkeypatch.setattr(findings, "tick_gpus", gpus_only)
    with pytest.raises(GpusRead):
        _judge_without_gpus(_all_streams(1, 0))
    wrong, _, rows = _compare(_all_streams(1, 0))
    assert wrong["built"] == rows > 250  # the lazily built GPUs are seen too
    monkeypatch.undo()
    monkeypatch.setattr(allocation, "static_gpus", lambda s: s.gpus)
    with pytest.raises(GpusRead):
        _judge_without_gpus(_all_streams(1, 0))


def test_the_moving_numbers_read_are_the_rows_fields() -> None:
    """``MovingGpu`` names fields of the row's ``GpuRow`` (built from the field table)."""
    wanted = {n for n in vars(tick_gpus.MovingGpu) if not n.startswith("_")}
    assert wanted == {"util_pct", "sm_clock_mhz", "clock_reasons",
                      # and the fleet row's (``probes.analysis.row_judge``)
                      "temp_c", "temp_mem_c", "mem_used_mib", "power_w"}
    assert wanted <= set(GPU_ROW_FIELDS) and "processes" in GPU_ROW_FIELDS
