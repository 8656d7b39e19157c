"""A relayed v2 tick as ONE packed float64 block: what it would save the console and cost
the collector, measured before building it (issue 38, session 14, branch issue38-wire14).

The candidate: the collector, which already decoded the tick's typed row (``quick_row``),
ships the tick's numbers as one float64 block in the history's staged layout (host
numbers, ``GPU_NUMBERS`` a GPU, the processes' amounts, 4 a disk) followed by the numbers
the history does not stage, with the texts beside it; the console checks the block's
bounds (one C-level pass over its top bytes, an exact Python check only for the rare
value outside [0, 2**49)), keeps the block in the sample and stages it with one copy.

Measured here, in one process, on the real collector output (``bench_relay_decode``'s
agent recordings through the real ``Relay``), the hosts' ticks taken round-robin a tick
at a time (each host's previous sample freed a round later, cold, as the console frees
it; each host's staged rows freed every ``STAGE_MAX``, as the history's flush lets
them go), CPU per host-sample, the two paths alternating pass by pass:

* ``now``: ``relayed_sample`` (typed decode, text check, ``from_row``) + ``stage_row``;
* ``block``: the prototype's decode (a typed Struct with the block as ``bytes``), its
  checks (length against the stream's static facts, bounds, Count fields integral, None
  positions, texts printable), a sample-like holder, and the staging (``frombytes`` of the
  staged part, NaN written where None);
* the collector's side, hot: ``relayed_tick``'s encode against the prototype's build +
  encode from the same ``SampleRow``.

What the prototype leaves out (so its console figure is a floor, not a result): the
per-tick readers that read the row today (the judges' reasons, disk utils and swap,
``steps.fold_row``'s reasons) would read the block by index or the reasons list; the
lazy ``gpus``/``host``/``disks`` and the recorder would build from the block.

    python tests/bench/bench_wire_s14.py [--hosts 256] [--seconds 20] [--passes 6]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from struct import Struct
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.config.fleet import HostSpec
from probes.history import STAGE_MAX as STAGE_MAX_HINT
from probes.history.keys import GPU_FIELDS
from probes.history.staged import HOST_NUMBERS, stage_row
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport import collector_wire
from probes.transport.collector_wire import (
    CollectorJob,
    _proven,
    check_batch,
    relayed_sample,
    relayed_tick,
    unframe,
)
from probes.transport.host_clock import clocked
from probes.wire import structs, tick_block
from probes.wire.compact import DISK_COLUMNS, GPU_ROW_FIELDS, HostRow, SampleRow
from probes.wire.fields import Amount, Count
from probes.wire.structs import Seq, Stamp
from tests.bench.bench_relay_decode import agent_feed, collector_frames
from tui.gc_policy import tune_for_streaming

_R = attrgetter("clock_reasons")
_chain = chain.from_iterable
_PACK: dict[int, Any] = {}
_enc = msgspec.msgpack.Encoder().encode
_row_dec = msgspec.json.Decoder(SampleRow).decode
_unpack_from = Struct("<d").unpack_from
HOST_REST, GPU_REST = tick_block.HOST_REST, tick_block.GPU_REST
DISK_STAGED, DISK_REST = tick_block.DISK_STAGED, tick_block.DISK_REST


def build_kept(static_id: int, row: SampleRow, kept: list[list[int] | None]
               ) -> tuple[int, bytes]:
    """The collector's side from its typed row (``tick_block.encode``), the stream's last
    None places tried first."""
    body, kept[0] = tick_block.encode(row, kept[0])
    return static_id, body


# --- the collector's decode shaped for the block (a tick's line to the relayed entry) -----
_A = Amount | None
GpuT = tuple[_A, _A, _A, _A, _A, _A, _A, _A, _A, _A, tuple[str, ...], list[_A] | None]
HostT = tuple[_A, _A, _A, _A, Count | None, Count | None, _A, _A]
DiskT = tuple[str, _A, _A, _A, _A, _A, _A, _A, _A]


class FlatRow(msgspec.Struct, array_like=True, gc=False):
    """A tick decoded with the same bounds as ``SampleRow``, each GPU, the host and each
    disk a typed tuple in the wire's order (no Struct per GPU to read field by field)."""

    seq: Seq | None
    ts: Stamp
    gpus: list[GpuT]
    host: HostT
    disks: list[DiskT]
    pcie: structs.Chains | None = None


_flat_dec = msgspec.json.Decoder(FlatRow).decode
_GF = tuple(GPU_ROW_FIELDS.index(f) for f in GPU_FIELDS)
_GRF = tuple(GPU_ROW_FIELDS.index(f) for f in GPU_REST)
_HF = tuple(HostRow.__struct_fields__.index(f) for f in HOST_NUMBERS)
_HRF = tuple(HostRow.__struct_fields__.index(f) for f in HOST_REST)
_DF = tuple(1 + DISK_COLUMNS[1:].index(f) for f in DISK_STAGED)
_DRF = tuple(1 + DISK_COLUMNS[1:].index(f) for f in DISK_REST)
_G_T, _GR_T = itemgetter(*_GF), itemgetter(*_GRF)
_H_T, _HR_T = itemgetter(*_HF), itemgetter(*_HRF)
_D_T, _DR_T = itemgetter(*_DF), itemgetter(*_DRF)
_PROCS_T = itemgetter(11)
_REASONS_T = itemgetter(10)
_NAME_T = itemgetter(0)


def line_now(static_id: int, line: bytes) -> tuple[int, bytes]:
    """Today's collector: the typed row (``quick_row``'s decode) and its msgpack."""
    return relayed_tick(static_id, _row_dec(line))


def line_block(static_id: int, line: bytes, kept: list[list[int]]) -> tuple[int, bytes]:
    """``build_kept``'s entry straight from a tuple-shaped decode (the same layout, the
    fields taken by ``itemgetter`` from each tuple)."""
    r = _flat_dec(line)
    gpus = r.gpus
    host, disks = r.host, r.disks
    values = [*_H_T(host), *_chain(map(_G_T, gpus)), *_chain(map(_PROCS_T, gpus)),
              *_chain(map(_D_T, disks)), *_HR_T(host), *_chain(map(_GR_T, gpus)),
              *_chain(map(_DR_T, disks))]
    n = len(values)
    pack = _PACK.get(n)
    if pack is None:
        pack = _PACK[n] = Struct(f"<{n}d").pack
    nones = kept[0]
    try:
        for i in nones:
            if values[i] is not None:
                raise ValueError
            values[i] = 0.0
        block = pack(*values)
    except Exception:
        nones = kept[0] = [i for i, v in enumerate(values) if v is None]
        block = pack(*[0.0 if v is None else v for v in values])
    return static_id, _enc(tick_block.BlockTick(r.seq, r.ts, block, nones,
                                                list(map(_REASONS_T, gpus)),
                                                list(map(_NAME_T, r.disks)), r.pcie))


class Held:
    """What the console would keep of a block tick (the sample's stand-in)."""

    __slots__ = ("block", "epoch", "names", "nones", "pcie", "reasons", "seq", "ts")

    def __init__(self, t: tick_block.BlockTick, epoch: object) -> None:
        self.block, self.nones, self.reasons, self.names = t.block, t.nones, t.reasons, t.names
        self.ts, self.seq, self.pcie, self.epoch = t.ts, t.seq, t.pcie, epoch


def console(reader: Any, tick: tuple[int, bytes], gpus: int, procs: int
            ) -> tuple[Held, tick_block.BlockTick] | None:
    """The console's side: ``tick_block.check``, the texts as ``relayed_sample`` judges
    them, a holder."""
    static_id, body = tick
    stream = reader.compact
    try:
        if stream is None or stream.static_id != static_id:
            raise ValueError("another static")
        t = tick_block.check(body, gpus, procs)
        seen = collector_wire._printable
        for name in t.names:
            if name not in seen and not _proven(name):
                raise ValueError("text")
        for rs in t.reasons:
            for r in rs:
                if r not in seen and not _proven(r):
                    raise ValueError("text")
        if t.pcie is not None:
            text = "".join(structs.chain_texts(t.pcie))
            if not (text.isascii() and text.isprintable()):
                raise ValueError("text")
        return Held(t, stream._epoch), t
    except Exception:
        reader.stats.garbled += 1
        return None


# --- the run ----------------------------------------------------------------------------

def ticks_of(frames: list[bytes], specs: tuple[HostSpec, ...]) -> tuple[Any, list[Any]]:
    """A console that took every frame (its readers), and the last frames' ticks by frame."""
    shard = _Shard(1, CollectorJob(specs, 4, 0.05))
    slices = FoldSlices(budget_s=3600.0)
    emit = clocked(lambda host, item: None)

    async def fill() -> None:
        for data in frames:
            await CollectorBackend._fold(shard, check_batch(unframe(data[4:]), len(specs)),
                                         emit, slices)

    asyncio.run(fill())
    per_frame = [[(i, e) for i, e in check_batch(unframe(data[4:]), len(specs))
                  if type(e) is tuple] for data in frames]
    return shard.readers, per_frame


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--passes", type=int, default=6)
    p.add_argument("--last", type=int, default=12, help="frames measured (the last ones)")
    p.add_argument("--readers", action="store_true",
                   help="each side also reads what a quiet tick's judges and steps read")
    args = p.parse_args()
    tune_for_streaming()
    specs = tuple(HostSpec(name=f"h{i:04d}", expect_gpus=8) for i in range(args.hosts))
    frames, _ = collector_frames(agent_feed(args.hosts, args.seconds), specs, args.seconds)
    readers, per_frame = ticks_of(frames, specs)
    per_frame = [f for f in per_frame if f][-args.last:]
    # each host's facts, as its history and stream hold them
    facts: dict[int, Any] = {}
    rows: list[tuple[int, SampleRow]] = []
    block_frames = []
    kept_of: dict[int, list[list[int] | None]] = {}
    for f in per_frame:
        out = []
        for i, e in f:
            s = relayed_sample(readers[i], e)
            if s is None:
                continue
            row = s.wire_row
            assert isinstance(row, SampleRow)
            epoch: Any = s.static_epoch
            pids = tuple(tuple(q.pid for q in g.processes or ()) for g in epoch.gpus)
            layout = tuple(g.index for g in epoch.gpus)
            procs = sum(map(len, pids))
            staged_n = tick_block.staged_size(len(layout), procs, len(row.disks))
            facts[i] = (pids, layout, tuple(map(len, pids)), staged_n, len(layout), procs)
            rows.append((e[0], row))
            out.append((i, build_kept(e[0], row, kept_of.setdefault(i, [None]))))
        block_frames.append(out)
    # the block's staging is the history's, bit for bit
    for f_now, f_blk in zip(per_frame, block_frames, strict=True):
        for (i, e), (_, b) in zip(f_now, f_blk, strict=False):
            pids, layout, lens, staged_n, ng, procs = facts[i]
            s = relayed_sample(readers[i], e)
            got = console(readers[i], b, ng, procs)
            assert s is not None and got is not None
            a = stage_row(s, s.wire_row, pids, layout, 1.0, lens).numbers  # type: ignore
            assert a.tobytes() == tick_block.staged_numbers(got[1], staged_n).tobytes()

    readers_too = args.readers

    def run_now() -> float:
        last: dict[int, Any] = {}
        staged: dict[int, list[Any]] = {i: [] for i in facts}
        hs = 0
        t0 = time.process_time()
        for f in per_frame:
            for i, e in f:
                s = relayed_sample(readers[i], e)
                if s is None:
                    continue
                pids, layout, lens, *_ = facts[i]
                row = s.wire_row
                if readers_too:  # what the judges and the steps read of a quiet tick
                    tuple(map(_R, row.gpus))  # type: ignore[union-attr]
                    for d in row.disks:  # type: ignore[union-attr]
                        d.util  # noqa: B018
                    row.host.swap_in_pages_s  # type: ignore[union-attr]  # noqa: B018
                st = staged[i]
                if len(st) >= STAGE_MAX_HINT:
                    st.clear()
                st.append(stage_row(s, s.wire_row, pids, layout, 1.0, lens))  # type: ignore
                last[i] = s
                hs += 1
        return 1e6 * (time.process_time() - t0) / hs

    def run_block() -> float:
        last: dict[int, Any] = {}
        staged: dict[int, list[Any]] = {i: [] for i in facts}
        hs = 0
        t0 = time.process_time()
        for f in block_frames:
            for i, b in f:
                _, _, _, staged_n, ng, procs = facts[i]
                got = console(readers[i], b, ng, procs)
                if got is None:
                    continue
                h, t = got
                if readers_too:  # the same, read off the block
                    tuple(h.reasons)
                    blk = h.block
                    for k in range(len(h.names)):
                        _unpack_from(blk, 8 * (staged_n - 4 * len(h.names) + 4 * k))
                    _unpack_from(blk, 16)
                st = staged[i]
                if len(st) >= STAGE_MAX_HINT:
                    st.clear()
                st.append(tick_block.staged_numbers(t, staged_n))
                last[i] = h
                hs += 1
        return 1e6 * (time.process_time() - t0) / hs

    pairs = []
    for k in range(args.passes):
        gc.collect()
        if k % 2:
            us_block = run_block()
            us_now = run_now()
        else:
            us_now = run_now()
            us_block = run_block()
        pairs.append((round(us_now, 2), round(us_block, 2)))
    coll = []
    sample_rows = rows[:2000]
    kept: dict[int, list[list[int] | None]] = {sid: [None] for sid, _ in sample_rows}
    for sid, row in sample_rows:  # each kept list as after the stream's first tick
        build_kept(sid, row, kept[sid])
    for _ in range(args.passes):
        t0 = time.process_time()
        for sid, row in sample_rows:
            relayed_tick(sid, row)
        t1 = time.process_time()
        for sid, row in sample_rows:
            build_kept(sid, row, [None])
        t2 = time.process_time()
        for sid, row in sample_rows:
            build_kept(sid, row, kept[sid])
        t3 = time.process_time()
        coll.append((round(1e6 * (t1 - t0) / len(sample_rows), 2),
                     round(1e6 * (t2 - t1) / len(sample_rows), 2),
                     round(1e6 * (t3 - t2) / len(sample_rows), 2)))
    lines = [ln for _, chunks in agent_feed(16, 8) for c in chunks
             for ln in c.split(b"\n") if ln.startswith(b"[")]
    kl: list[list[int]] = [[]]
    for ln in lines:  # the same entry as from the typed row (the layout is one)
        assert line_block(1, ln, [[]]) == build_kept(1, _row_dec(ln), [None]), ln
    for ln in lines[:50]:
        line_block(1, ln, kl)
    coll_line = []
    for _ in range(args.passes):
        t0 = time.process_time()
        for ln in lines:
            line_now(1, ln)
        t1 = time.process_time()
        for ln in lines:
            line_block(1, ln, kl)
        t2 = time.process_time()
        coll_line.append((round(1e6 * (t1 - t0) / len(lines), 2),
                          round(1e6 * (t2 - t1) / len(lines), 2)))
    nb = statistics.median(len(b) for f in block_frames for _, (_, b) in f)
    nr = statistics.median(len(e[1]) for f in per_frame for _, e in f)
    print(json.dumps({
        "bench": "wire_s14", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load1": round(os.getloadavg()[0], 2), "hosts": args.hosts, "readers": args.readers,
        "ticks_per_pass": sum(map(len, per_frame)),
        "console_pairs_now_block_us": pairs,
        "now_median": statistics.median(a for a, _ in pairs),
        "block_median": statistics.median(b for _, b in pairs),
        "block_lower": sum(b < a for a, b in pairs),
        "collector_encode_block_blockkept_us": coll,
        "collector_line_now_block_us": coll_line,
        "body_bytes_now_block": [nr, nb]}))


if __name__ == "__main__":
    main()
