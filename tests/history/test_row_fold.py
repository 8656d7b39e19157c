"""A wire v2 tick kept as its row: GPUs built on first read, history folded from the row.

Issue 38 item 1 (no per-GPU objects on the hot path): when the v2 fast path keeps a tick
whole (``HostSample.wire_row``), the sample's ``gpus`` are built only when something reads
them (``probes.wire.samples._RowGpus``, ``StaticEpoch.row_gpus``), and ``HostHistory.add``
stages and folds it from the row and its static epoch (``staged.stage_row``,
``GpuSteps.fold_row``) without reading ``gpus``.

Held to the code before the change, on the agent simulator's streams (``bench_ingest``'s
templates) and on mutated ones (odd values that take the checked path, GPUs v1 would drop,
GPUs leaving the static facts, process lists changing, clock reasons flapping, ``static``
messages re-sent or changed mid-stream):

* every sample decoded with the eager build (main's ``_fast``, kept here) equals the lazily
  built one field by field: same values, types, key order, and which GPUs' process tuples
  are shared with the sample before;
* a ``HostHistory`` fed the lazy samples (row path) and one fed ``dataclasses.replace``
  copies of the eager ones (no ``wire_row``: today's path) stage the same rows and answer
  every query the same (series points, binned points, latest, keys, GPUs, processes, disks,
  step series) every few samples.

Negative controls: a row fold that misses a clock-reason change within an epoch, processes'
pids taken one GPU off, and lazily built GPUs one position off are each caught.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterator
from itertools import pairwise
from operator import attrgetter
from typing import Any

import pytest
from msgspec.structs import asdict

from probes.history import HostHistory
from probes.history import host as history_host
from probes.history.steps import GpuSteps
from probes.wire import compact, structs
from probes.wire.clock_reasons import REASON_BITS
from probes.wire.compact import static_gpus
from probes.wire.protocol import MessageReader
from probes.wire.samples import DiskStats, GpuSample, HostSample, HostStats
from tests.support.fingerprint import fingerprint
from tests.support.templates import template
from tests.wire.test_decode_rows import _mutate, _shape

_new = object.__new__
_set = object.__setattr__
_STATIC = {name: i for i, name in enumerate(compact.GPU_STATIC)}
_REASONS = [*sorted(REASON_BITS), "a_reason_this_console_does_not_know"]


def _eager_fast(self: compact.CompactStream, line: bytes) -> HostSample:
    """``CompactStream._fast`` as it was before (main at 6999a55): every GPU built."""
    s = compact._DECODER.decode(line)
    if s.pcie is not None or len(s.gpus) != len(self._gpu_base):
        raise structs.Refused("pcie or GPU count")
    gpus = []
    for i, (row, base) in enumerate(zip(s.gpus, self._gpu_base, strict=True)):
        if base is None:
            continue
        values = compact._fill_gpu(base, row)
        values["processes"] = self._processes(i, row.processes)
        obj = _new(GpuSample)
        _set(obj, "__dict__", values)
        gpus.append(obj)
    host = compact._fill_host(self._host_base, s.host)
    stats = _new(HostStats)
    _set(stats, "__dict__", host)
    disks = []
    for d in s.disks:
        disk = _new(DiskStats)
        _set(disk, "__dict__", asdict(d))
        disks.append(disk)
    if len({d.name for d in s.disks}) != len(disks):
        raise structs.Refused("a disk named twice")
    return structs.sample(s.seq or 0, s.ts, tuple(gpus), stats, tuple(disks),
                          self._epoch, s if self._whole else None)


# --- streams -------------------------------------------------------------------------------

def _lines(k: int, seconds: int) -> tuple[bytes, list[bytes]]:
    """Simulated host ``k``'s v2 hello and message lines (``bench_ingest.template``)."""
    (_, _), (hello, chunks) = template(k, seconds)
    return hello, [ln for chunk in chunks for ln in chunk.splitlines() if ln]


def _mutate_static(msg: dict[str, Any], rng: random.Random, state: dict[str, Any]) -> None:
    gpus = msg["gpus"]
    for _ in range(rng.randint(1, 3)):
        g = gpus[rng.randrange(len(gpus))]
        what = rng.choice(("count", "count", "state", "index", "procs", "procs", "limit",
                           "drop"))
        if what == "count":
            col = rng.choice(("ecc_corrected_volatile", "ecc_uncorrected_volatile",
                              "remap_correctable", "pcie_width", "pcie_gen"))
            g[_STATIC[col]] = rng.choice((0, 1, 3, 8, 16, None))
        elif what == "state":
            g[_STATIC["state"]] = rng.choice(("ok", "lost", "unknown", "unresponsive", None))
        elif what == "index":  # v1 drops -1 and text; another index repeats a neighbour's
            g[_STATIC["index"]] = rng.choice((-1, "x", 0, 3, g[_STATIC["index"]]))
        elif what == "limit":
            g[_STATIC["power_limit_w"]] = rng.choice((300.0, 700, 450.5, None))
        elif what == "procs":
            procs = g[_STATIC["processes"]]
            if isinstance(procs, list) and procs and rng.random() < 0.5:
                procs.pop()
            elif isinstance(procs, list):
                p = list(procs[0]) if procs else [50000, "python", "u"] + [None] * 12
                p[0] = rng.randrange(1000, 90000)
                procs.append(p)
            if rng.random() < 0.1:
                g[_STATIC["processes"]] = rng.choice((None, []))
        elif len(gpus) > 1:  # a GPU leaves the static facts (and the ticks) for good
            j = rng.randrange(len(gpus))
            del gpus[j]
            state["dropped"].append(j)


def _mutated(lines: list[bytes], rng: random.Random, every: int) -> Iterator[bytes]:
    """The stream with its static facts changed and re-sent now and then, clock reasons
    flapping, process amounts moving, and odd values in some ticks."""
    state: dict[str, Any] = {"dropped": [], "static": None}
    for n, line in enumerate(lines):
        obj = json.loads(line)
        if isinstance(obj, dict) and obj.get("type") == "static":
            state["static"] = obj
            for j in state["dropped"]:
                del obj["gpus"][j]
            yield json.dumps(obj).encode()
            continue
        if not isinstance(obj, list):
            yield line
            continue
        static = state["static"]
        if static is not None and n % every == 0:  # re-sent, changed half the time
            again = json.loads(json.dumps(static))
            if rng.random() < 0.5:
                _mutate_static(again, rng, state)
            state["static"] = again
            yield json.dumps(again).encode()
        gpus = obj[2]
        for j in state["dropped"]:
            del gpus[j]
        if static is not None:
            for g, sg in zip(gpus, state["static"]["gpus"], strict=False):
                procs = sg[_STATIC["processes"]]
                want = len(procs) if isinstance(procs, list) else 0
                mib = [m if rng.random() < 0.9 else float(rng.randrange(100, 9000))
                       for m in (g[-1] or [])]
                g[-1] = (mib + [float(rng.randrange(1, 5000))] * want)[:want]
        if rng.random() < 0.3:
            g = gpus[rng.randrange(len(gpus))]
            g[-2] = rng.sample(_REASONS, rng.randint(0, 2))
        if n % 4 == 0:
            _mutate(obj, rng)
        yield json.dumps(obj, separators=(",", ":")).encode()


def _streams() -> list[tuple[bytes, list[bytes]]]:
    out = []
    for k in range(4):  # healthy, throttle, leak, link-downgrade
        hello, lines = _lines(k, 160)
        out.append((hello, lines))
        out.append((hello, list(_mutated(lines, random.Random(3838 + k), 37))))
        out.append((hello, list(_mutated(lines, random.Random(38 + k), 19))))
    return out


@pytest.fixture(scope="module")
def streams() -> list[tuple[bytes, list[bytes]]]:
    return _streams()


def _decode(hello: bytes, lines: list[bytes], eager: bool) -> list[HostSample]:
    reader = MessageReader()
    real = compact.CompactStream._fast
    if eager:
        compact.CompactStream._fast = _eager_fast  # type: ignore[method-assign]
    try:
        out = reader.feed(hello + b"\n")
        for ln in lines:
            out += reader.feed(ln + b"\n")
    finally:
        compact.CompactStream._fast = real  # type: ignore[method-assign]
    return [m for m in out if isinstance(m, HostSample)]


# --- comparing -----------------------------------------------------------------------------

def _steps_digest(h: HostHistory) -> list[object]:
    out: list[object] = []
    for key in h.series_keys():
        st = h.steps(key)  # type: ignore[arg-type]
        if st is not None:
            out.append((key, [getattr(st, k) for k in type(st).__slots__], st.latest()))
    return out


def _digest(h: HostHistory) -> str:
    """Every query's answer, as text (NaN compares equal as text)."""
    out: list[object] = [h.series_keys(), h.gpu_indices(), h.gpus_missing_since(), h.disks(),
                         [(g, h.processes(g)) for g in h.gpu_indices()], h.dropped,
                         h._staged, h._staged_counts, h._mixed, _steps_digest(h)]
    for key in h.series_keys():
        s = h.series(key)  # type: ignore[arg-type]
        if s is not None:
            out.append((key, s.points(), s.points(max_points=7), s.latest()))
    return fingerprint(out)  # equal exactly where repr is, at a fraction of its cost


def _shared(samples: list[HostSample]) -> list[list[bool]]:
    """Per sample, which GPUs' process tuples are the one of the sample before."""
    out = []
    for a, b in pairwise(samples):
        out.append([x.processes is y.processes and x.processes is not None
                    for x, y in zip(a.gpus, b.gpus, strict=False)])
    return out


def _differences(streams: list[tuple[bytes, list[bytes]]]) -> tuple[int, int, int, int]:
    """(samples whose GPUs differ, history checks that differ, row samples, samples)."""
    gpus_differ = history_differ = rows = total = 0
    for hello, lines in streams:
        lazy = _decode(hello, lines, eager=False)
        eager = _decode(hello, lines, eager=True)
        assert len(lazy) == len(eager)
        by_row, by_old = HostHistory(), HostHistory()
        for n, (a, b) in enumerate(zip(lazy, eager, strict=True)):
            total += 1
            assert (a.wire_row is None) == (b.wire_row is None)
            by_row.add(a)
            if a.wire_row is not None:
                rows += 1
                assert "gpus" not in a.__dict__  # the history did not build them
            copy = dataclasses.replace(b)
            assert copy.wire_row is None
            by_old.add(copy)
            if n % 11 == 0 or n == len(lazy) - 1:
                history_differ += _digest(by_row) != _digest(by_old)
        for a, b in zip(lazy, eager, strict=True):  # built here, in stream order
            same = a == b and _shape(a) == _shape(b) and list(vars(a)) == list(vars(b))
            gpus_differ += not same
        gpus_differ += _shared(lazy) != _shared(eager)
    return gpus_differ, history_differ, rows, total


def test_lazy_gpus_and_the_row_fold_equal_the_eager_path(
        streams: list[tuple[bytes, list[bytes]]]) -> None:
    gpus_differ, history_differ, rows, total = _differences(streams)
    assert gpus_differ == 0
    assert history_differ == 0
    assert total > 1900
    assert 0.5 * total < rows < total  # both paths taken: the row and every other one


def test_a_steady_row_sample_is_folded_without_building_its_gpus(
        streams: list[tuple[bytes, list[bytes]]]) -> None:
    hello, lines = streams[3]  # throttle, unmutated
    samples = _decode(hello, lines, eager=False)
    h = HostHistory()
    for s in samples:
        h.add(s)
        listed = [g.index for g in static_gpus(s)]
        assert s.wire_row is not None and "gpus" not in s.__dict__
        assert listed == [g.index for g in s.gpus]  # builds them now
        assert "gpus" in s.__dict__
    assert len(samples) == 160


def test_a_row_sample_behaves_as_a_sample(streams: list[tuple[bytes, list[bytes]]]) -> None:
    import pickle

    hello, lines = streams[0]
    s, t = _decode(hello, lines, eager=False)[5:7]
    e = _decode(hello, lines, eager=True)[5]
    assert type(s) is HostSample and "gpus" not in vars(t)
    plain = {"static_epoch", "wire_row"}  # the decode's state: another reader's objects
    assert {k: v for k, v in dataclasses.asdict(t).items() if k not in plain} == \
        {k: v for k, v in dataclasses.asdict(_decode(hello, lines, eager=True)[6]).items()
         if k not in plain}
    assert pickle.loads(pickle.dumps(s)) == e
    assert dataclasses.replace(s).wire_row is None and dataclasses.replace(s) == e
    assert repr(s) == repr(e) and s == e and hash(s.gpus) == hash(e.gpus)
    assert list(vars(s)) == ["ts", "seq", "gpus", "host", "disks", "pcie", "static_epoch",
                             "wire_row"]


# --- negative controls ---------------------------------------------------------------------

def _stale_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    real = GpuSteps.fold_row
    get = attrgetter("clock_reasons")

    def fold_row(self: GpuSteps, ts: float, row: Any, epoch: Any, first: bool,
                 counts: list[float]) -> bool:
        if epoch is self._row_epoch:  # as if only a new epoch could change the steps
            self._row_reasons = tuple(map(get, row.gpus))
        return real(self, ts, row, epoch, first, counts)
    monkeypatch.setattr(GpuSteps, "fold_row", fold_row)


def _pids_off(monkeypatch: pytest.MonkeyPatch) -> None:
    real = history_host.stage_row

    def stage_row(s: Any, row: Any, pids: Any, layout: Any, ok: float, lens: Any = None) -> Any:
        return real(s, row, pids[1:] + pids[:1], layout, ok)  # their lengths counted anew
    monkeypatch.setattr(history_host, "stage_row", stage_row)


def _gpus_off(monkeypatch: pytest.MonkeyPatch) -> None:
    real = compact.StaticEpoch.row_gpus

    def row_gpus(self: compact.StaticEpoch, row: Any) -> tuple[GpuSample, ...]:
        out = real(self, row)
        return out[1:] + out[:1]
    monkeypatch.setattr(compact.StaticEpoch, "row_gpus", row_gpus)


@pytest.mark.parametrize("mutant", [_stale_reasons, _pids_off, _gpus_off])
def test_negative_control_a_wrong_row_path_is_seen(
        streams: list[tuple[bytes, list[bytes]]], monkeypatch: pytest.MonkeyPatch,
        mutant: Any) -> None:
    mutant(monkeypatch)
    gpus_differ, history_differ, _, _ = _differences(streams[:4])
    assert gpus_differ + history_differ > 3


def test_the_gpus_listed_are_counted_from_the_epoch_as_from_the_gpus(
        streams: list[tuple[bytes, list[bytes]]]) -> None:
    """``listed_gpus`` (the fleet's GPU-count check, per tick) reads a row sample's epoch;
    the streams' mutations drop and repeat GPU indices, so the counts differ between them."""
    counts = set()
    rows = 0
    for hello, lines in streams:
        for s in _decode(hello, lines, eager=False):
            from_epoch = compact.listed_gpus(s)
            rows += s.wire_row is not None
            assert from_epoch == sum(1 for g in s.gpus if g.index >= 0)
            counts.add(from_epoch)
    assert rows > 0 and len(counts) > 1
