"""The history's flush cut as one block, and its staged rows read in place (issue 38).

``HostHistory._block_columns`` cuts staged samples that list the same GPUs, pids and disks
as strided slices of one matrix of their numbers, and the per-sample readers (``latest``,
``processes``, a query's staged points) read a staged row's pids and numbers where they sit
instead of building its ``procs`` pairs and ``disks`` tuples.  Held to the code before
(``history_before.py``): random streams (GPUs appearing and going, processes coming and
going past the per-GPU maximum, listed twice, pid or memory unknown, processes not collected,
disks past the maximum, listed twice, fields unknown, repeated times, gaps past the
staging's span and the processes' forgetting, tier boundaries crossed on the default and on a
short layout) and the row-path streams of ``test_row_fold``, fed to both, answer every query
alike (series points, binned, unmerged, windows, latest, keys, GPUs, processes, disks,
step series, bytes held), every few samples.  Negative controls: an await column that
ignores an unknown half, and a process column read one place off, are both caught.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import pytest

from probes.history import HostHistory
from probes.history.raw import RawRing
from probes.history.storage import Tier
from probes.wire.samples import DiskStats, GpuProcess, GpuSample, HostSample, HostStats
from tests.history.history_before import HostHistoryBefore
from tests.history.test_row_fold import _decode, _steps_digest, _streams
from tests.support.fingerprint import fingerprint

SHORT = (Tier(1.0, 300.0), Tier(5.0, 600.0), Tier(10.0, 1200.0), Tier(30.0, 3000.0))
"""A layout whose every tier boundary a stream of a few thousand seconds crosses."""


def _maybe(rng: random.Random, v: float, p: float = 0.05) -> float | None:
    return None if rng.random() < p else v


def _random_stream(seed: int, n: int) -> list[HostSample]:
    """``n`` samples in runs that keep their GPUs, processes and disks (what the block cut
    takes) broken by changes of every kind."""
    rng = random.Random(seed)
    out: list[HostSample] = []
    ts = 1_800_000_000.0
    while len(out) < n:
        gpus = sorted(rng.sample(range(8), rng.choice((8, 8, 8, 7, 3))))
        procs: dict[int, list[int | None] | None] = {}
        for g in gpus:
            r = rng.random()
            if r < 0.1:
                procs[g] = None  # not collected
            else:
                pids: list[int | None] = list(rng.sample(range(100, 112),
                                                         rng.choice((0, 1, 1, 2, 10))))
                if rng.random() < 0.02 and pids:
                    pids.append(pids[0])  # listed twice
                if rng.random() < 0.1:
                    pids.append(None)
                procs[g] = pids
        disks = [f"sd{c}" for c in rng.sample("abcdefghijklmnopqrst", rng.choice((1, 3, 3, 18)))]
        if rng.random() < 0.03:
            disks.append(disks[0])
        for _ in range(rng.choice((1, 5, 16, 40, 90, 150))):
            step = rng.choices((1.0, 0.0, 7.0, 200.0, 800.0), (95, 1, 2, 1, 1))[0]
            ts += step
            gs = tuple(GpuSample(
                index=g, mem_used_mib=_maybe(rng, rng.uniform(0, 80000)),
                util_pct=_maybe(rng, rng.choice((0.0, 100.0, rng.uniform(0, 100)))),
                temp_c=_maybe(rng, rng.uniform(30, 90)), power_w=_maybe(rng, rng.uniform(50, 700)),
                sm_clock_mhz=_maybe(rng, rng.uniform(200, 2000)),
                processes=None if procs[g] is None else tuple(
                    GpuProcess(pid=p, name="p", user="u", used_mib=_maybe(rng, rng.uniform(0, 9e4)))
                    for p in procs[g] or ()))
                for g in gpus)
            ds = tuple(DiskStats(d, r_await=_maybe(rng, rng.uniform(0, 50), 0.2),
                                 w_await=_maybe(rng, rng.uniform(0, 50), 0.2),
                                 util=_maybe(rng, rng.uniform(0, 100)),
                                 aqu_sz=_maybe(rng, rng.uniform(0, 9)))
                       for d in disks)
            host = HostStats(cpu_pct=_maybe(rng, rng.uniform(0, 100)),
                             mem_used_bytes=int(rng.uniform(1e9, 1e12)),
                             swap_in_pages_s=_maybe(rng, 0.0), swap_out_pages_s=rng.uniform(0, 1e5))
            out.append(HostSample(ts=ts, seq=len(out), gpus=gs, host=host, disks=ds))
    return out[:n]


def nbytes_as_columns(h: Any) -> int:
    """``h.nbytes()`` as a raw tier of a column a series counted it: a ``RawRing`` holds the
    same values with one array header (64 bytes) a codec instead of one a series."""
    raw = h.store.rings[0]
    if isinstance(raw, RawRing) and raw.cap:
        return int(h.nbytes()) + 64 * (len(raw.codecs) - len(raw.mats))
    return int(h.nbytes())


def _digest(h: Any) -> str:
    """Every query's answer, as text (NaN compares equal as text): ``fingerprint``, equal
    exactly where ``repr`` is, at a third of its cost."""
    return fingerprint(_answers(h))


def _answers(h: Any) -> list[object]:
    """Every query's answer."""
    out: list[object] = [h.series_keys(), h.gpu_indices(), h.gpus_missing_since(), h.disks(),
                         [(g, h.processes(g)) for g in range(9)], h.dropped, nbytes_as_columns(h),
                         len(h._staged), h._staged_counts, h._mixed, _steps_digest(h)]
    last = h.last_ts or 0.0
    for key in h.series_keys():
        s = h.series(key)
        if s is not None:
            out.append((key, s.points(), s.points(max_points=7), s.latest(),
                        s.columns(last - 130.0, last - 3.0), s.unmerged(last - 600.0, 40),
                        s.points(last - 4000.0, max_points=50)))
    return out


def _streams_here() -> list[tuple[list[HostSample], tuple[Tier, ...] | None]]:
    out: list[tuple[list[HostSample], tuple[Tier, ...] | None]] = [
        (_random_stream(1, 1500), None), (_random_stream(2, 1500), SHORT)]
    rows = _streams()
    for i, (hello, lines) in enumerate((rows[2], rows[7], rows[10])):
        lazy = _decode(hello, lines, eager=False)
        out.append((lazy, None) if i % 2 else ([dataclasses.replace(s) for s in lazy], SHORT))
    return out


@pytest.fixture(scope="module")
def streams() -> list[tuple[list[HostSample], tuple[Tier, ...] | None]]:
    return _streams_here()


def _differences(streams: list[tuple[list[HostSample], tuple[Tier, ...] | None]],
                 every: int = 251) -> tuple[int, int, int]:
    """(checks that differ, checks, flushes cut as one block)."""
    differ = checks = blocks = 0
    real = HostHistory._block_columns

    def counted(self: HostHistory, rows: Any) -> Any:
        nonlocal blocks
        got = real(self, rows)
        blocks += got is not None
        return got

    HostHistory._block_columns = counted  # type: ignore[method-assign,assignment]
    try:
        for samples, tiers in streams:
            kw: dict[str, Any] = {} if tiers is None else {"tiers": tiers}
            new, old = HostHistory(**kw), HostHistoryBefore(**kw)
            for n, s in enumerate(samples):
                new.add(s)
                old.add(s)
                if n % every == every - 1 or n == len(samples) - 1:
                    checks += 1
                    differ += _digest(new) != _digest(old)
    finally:
        HostHistory._block_columns = real  # type: ignore[method-assign]
    return differ, checks, blocks


def test_the_block_cut_answers_as_the_flush_before(
        streams: list[tuple[list[HostSample], tuple[Tier, ...] | None]]) -> None:
    differ, checks, blocks = _differences(streams)
    assert checks >= 15
    assert blocks > 150  # the block cut ran, not only the general one
    assert differ == 0


def test_negative_control_await_ignoring_an_unknown_half_is_seen(
        streams: list[tuple[list[HostSample], tuple[Tier, ...] | None]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.history import block

    monkeypatch.setattr(block, "awaits", lambda ra, wa: np.where(wa > ra, wa, ra))
    differ, _, _ = _differences([(streams[0][0][:400], None)], every=199)
    assert differ > 0


def test_negative_control_a_process_column_read_one_place_off_is_seen(
        streams: list[tuple[list[HostSample], tuple[Tier, ...] | None]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = HostHistory._make_plan

    def shifted(self: HostHistory, *a: Any) -> Any:
        plan = real(self, *a)
        codecs = []
        for codec, keys, at in plan.codecs:
            at = at.copy()
            for i, key in enumerate(keys):
                if key.startswith("proc/"):
                    at[i] -= 1
            codecs.append((codec, keys, at))
        return plan._replace(codecs=tuple(codecs))

    monkeypatch.setattr(HostHistory, "_make_plan", shifted)
    differ, _, _ = _differences([(streams[0][0][:400], None)], every=199)
    assert differ > 0


def test_negative_control_a_staged_process_read_as_missing_is_seen(
        streams: list[tuple[list[HostSample], tuple[Tier, ...] | None]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.history import host

    monkeypatch.setattr(host, "proc_mib", lambda r, gpu, pid: None)
    differ, _, _ = _differences([(streams[0][0][:400], None)], every=199)
    assert differ > 0



def test_negative_control_bucket_means_a_little_off_are_seen(
        streams: list[tuple[list[HostSample], tuple[Tier, ...] | None]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.history import tiers

    real = tiers.encode_groups

    def off(groups: Any, mat: Any) -> Any:  # the tier-1 cut's means (every third column)
        mat = mat.copy()
        mat[:, 2::3] *= 1.01
        return real(groups, mat)

    monkeypatch.setattr(tiers, "encode_groups", off)
    differ, _, _ = _differences([(streams[1][0][:600], SHORT)], every=199)
    assert differ > 0


def test_negative_control_a_short_bucket_miscounted_is_seen(
        streams: list[tuple[list[HostSample], tuple[Tier, ...] | None]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Buckets short of a value (a field unknown in some samples) are built apart from the
    full ones: they are compared too."""
    from probes.history import tiers

    real = tiers.stat

    def miscounted(vals: Any) -> Any:
        got = real(vals)
        return got if got is None else (*got[:3], got[3] + 1)

    monkeypatch.setattr(tiers, "stat", miscounted)
    differ, _, _ = _differences([(streams[1][0][:600], SHORT)], every=199)
    assert differ > 0
