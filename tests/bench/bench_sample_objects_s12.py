"""What a relayed tick's sample objects cost the console, made and freed (issue 38, session
12, ``apply12``): a measurement for a change not made here, not a bench of the product.

A relayed tick's sample (``CompactStream._sample``) holds its decoded row and, built from it
each tick, a ``HostStats`` and a ``DiskStats`` per disk, each with its ``__dict__``: the
per-tick judges read the row instead (``sample_judge.tick_inputs``), the history folds the
row (``stage_row``), the recorder reads the row.  The previous sample is freed when the next
is folded (under cProfile that release is ``FleetState.apply``'s self time).  Here, over
the stand-in recordings' relayed ticks (``bench_relay_decode``'s frames, 256 hosts), each
tick's row is decoded and its sample built, the sample kept in a ring of one per host (so
it is freed a round later, cold, as the console frees it): **now** with ``_sample`` as it
is, **rows only** with a sample holding no ``HostStats``/``DiskStats`` (what a
``HostSample`` whose ``host`` and ``disks`` were built on first read from ``wire_row``, as
its ``gpus`` are, would pay on the ticks nobody reads them).  CPU µs a tick, the two
alternating, median of ``--passes``.

    python tests/bench/bench_sample_objects_s12.py [--hosts 256] [--passes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.config.fleet import HostSpec
from probes.sources import collectors
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport.collector_wire import CollectorJob, _decode_row, check_batch, unframe
from probes.wire import compact
from probes.wire.samples import HostSample
from tests.bench.bench_relay_decode import agent_feed, collector_frames

_new, _set = object.__new__, object.__setattr__


def rows_only(stream: Any, s: Any, gpus: object) -> HostSample:
    """``_sample`` of a row tick with no host or disk objects (its checks kept)."""
    if len(set(map(compact._DISK_NAME, s.disks))) != len(s.disks):
        raise ValueError("a disk named twice")
    obj = _new(HostSample)
    _set(obj, "__dict__", {"ts": s.ts, "seq": s.seq or 0, "pcie": None,
                           "static_epoch": stream._epoch, "wire_row": s})
    return obj


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--passes", type=int, default=10)
    args = p.parse_args()
    hosts, seconds = args.hosts, 12
    specs = tuple(HostSpec(name=f"h{i:04d}") for i in range(hosts))
    frames, _ = collector_frames(agent_feed(hosts, seconds), specs, seconds)
    shard = _Shard(1, CollectorJob(specs, 4, 0.05))
    ticks: list[tuple[Any, bytes]] = []
    relayed = collectors.relayed_sample

    def spy(reader: Any, tick: Any) -> Any:
        ticks.append((reader.compact, tick[1]))
        return relayed(reader, tick)

    async def fold() -> None:
        for data in frames:
            await CollectorBackend._fold(shard, check_batch(unframe(data[4:]), hosts),
                                         lambda h, i: None, FoldSlices(budget_s=3600.0))

    collectors.relayed_sample = spy  # type: ignore[assignment]
    try:
        asyncio.run(fold())
    finally:
        collectors.relayed_sample = relayed
    ticks = ticks[-hosts * 8:]
    now = compact.CompactStream._sample

    def one(build: Any) -> float:
        ring: list[object] = [None] * hosts
        t0 = time.process_time()
        for k, (stream, body) in enumerate(ticks):
            ring[k % hosts] = build(stream, _decode_row(body), None)
        ring.clear()
        return 1e6 * (time.process_time() - t0) / len(ticks)

    got: dict[str, list[float]] = {"now": [], "rows_only": []}
    for k in range(args.passes):
        order = (("now", now), ("rows_only", rows_only))
        for name, build in order if k % 2 == 0 else order[::-1]:
            got[name].append(one(build))
    print(json.dumps({"hosts": hosts, "ticks": len(ticks),
                      **{k: round(statistics.median(v), 2) for k, v in got.items()},
                      "lower_in": sum(b < a for a, b in zip(got["now"], got["rows_only"],
                                                            strict=True))}))


if __name__ == "__main__":
    main()
