"""Start-up decode (issue 38, session 8): what each host's hello and first ``static`` cost
the console's UI process, relayed by a collector, in the same process and run.

The agent's own simulator makes 16 hosts' v2 hellos and first ``static`` messages
(``bench_ingest.template``); host *i* replays template *i mod 16* under its own name.  Per
pass, every host's hello and static go through the real console side, two ways alternating:

* ``text``: the hello's line through the console's reader (``MessageReader.feed``: parse,
  sanitise, decode), as before session 8;
* ``relayed``: the hello as the collector now relays it (``RelayedHello``): ``unframe`` of a
  frame of them, then ``MessageReader.relayed_hello`` (``relayed_hello_one_a_frame_us``:
  each in a frame of its own, where the pickle's memo shares nothing between hosts);

then the ``static`` line through that reader (``static_us``: the same code both ways), and
again with the static facts checked GPU by GPU as before session 8 (``CompactStream
._check_all`` refusing: the fallback, which is the code before; ``static_gpu_by_gpu_us``).  And
the collector's side of the hello: ``frame`` of the bytes entries against ``frame`` of the
``RelayedHello`` entries (``relayed_hello``, its copy, the pickle).  CPU (``process_time``)
per host, median of ``--passes`` passes.

    python tests/bench/bench_start_decode.py [--hosts 256] [--passes 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from probes.transport.collector_wire import RelayedHello, frame, unframe
from probes.wire.compact import CompactStream
from probes.wire.protocol import MessageReader
from tests.bench.bench_ingest import template


def _lines(hosts: int) -> list[tuple[bytes, bytes]]:
    """Each host's hello line and first ``static`` line (v2), under its own name."""
    out = []
    temps = [template(k, 1)[1] for k in range(min(hosts, 16))]
    for i in range(hosts):
        hello, ticks = temps[i % len(temps)]
        hello = hello.replace(b'"hostname":"t%d"' % (i % 16), b'"hostname":"h%04d"' % i)
        static = next(ln + b"\n" for ln in ticks[0].splitlines() if b'"static"' in ln)
        out.append((hello, static))
    return out


def _relayed(lines: list[tuple[bytes, bytes]]) -> list[tuple[int, RelayedHello]]:
    """What a collector relays for these hellos (its reader's decode)."""
    out = []
    for i, (hello, _) in enumerate(lines):
        reader = MessageReader()
        (msg,) = reader.feed(hello)
        assert reader.compact is not None
        out.append((i, RelayedHello(msg, reader.compact.columns, len(hello))))
    return out


def _pass_text(lines: list[tuple[bytes, bytes]]) -> tuple[float, float]:
    readers = [MessageReader() for _ in lines]
    t0 = time.process_time()
    for r, (hello, _) in zip(readers, lines, strict=True):
        r.feed(hello)
    t1 = time.process_time()
    for r, (_, static) in zip(readers, lines, strict=True):
        r.feed(static)
    return t1 - t0, time.process_time() - t1


def _pass_relayed(lines: list[tuple[bytes, bytes]], body: bytes) -> tuple[float, float]:
    readers = [MessageReader() for _ in lines]
    t0 = time.process_time()
    batch = unframe(body)
    assert isinstance(batch, list)
    for i, e in batch:
        readers[i].relayed_hello(e.hello, e.columns)
    t1 = time.process_time()
    for r, (_, static) in zip(readers, lines, strict=True):
        r.feed(static)
    return t1 - t0, time.process_time() - t1


def _pass_single(lines: list[tuple[bytes, bytes]], bodies: list[bytes]) -> float:
    """The relayed hellos one a frame (nothing shared by the pickle's memo): the worst case."""
    readers = [MessageReader() for _ in lines]
    t0 = time.process_time()
    for body in bodies:
        ((i, e),) = unframe(body)  # type: ignore[misc]
        readers[i].relayed_hello(e.hello, e.columns)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--passes", type=int, default=7)
    args = ap.parse_args()
    lines = _lines(args.hosts)
    relayed = _relayed(lines)
    text_body = frame([(i, h) for i, (h, _) in enumerate(lines)])[4:]
    body = frame(relayed)[4:]
    n = args.hosts
    got: dict[str, list[float]] = {k: [] for k in (
        "text_hello_us", "relayed_hello_us", "text_static_us", "relayed_static_us",
        "collector_text_frame_us", "collector_relayed_frame_us")}
    got["static_gpu_by_gpu_us"] = []
    got["relayed_hello_one_a_frame_us"] = []
    singles = [frame([e])[4:] for e in relayed]
    one_call = CompactStream._check_all
    for _ in range(args.passes):
        CompactStream._check_all = lambda self, gpus: None  # type: ignore[method-assign]
        _, s = _pass_text(lines)
        got["static_gpu_by_gpu_us"].append(s / n * 1e6)
        CompactStream._check_all = one_call  # type: ignore[method-assign]
        h, s = _pass_text(lines)
        got["text_hello_us"].append(h / n * 1e6)
        got["text_static_us"].append(s / n * 1e6)
        got["relayed_hello_one_a_frame_us"].append(_pass_single(lines, singles) / n * 1e6)
        h, s = _pass_relayed(lines, body)
        got["relayed_hello_us"].append(h / n * 1e6)
        got["relayed_static_us"].append(s / n * 1e6)
        t0 = time.process_time()
        frame([(i, h) for i, (h, _) in enumerate(lines)])
        t1 = time.process_time()
        frame(_relayed_copies(relayed))
        t2 = time.process_time()
        got["collector_text_frame_us"].append((t1 - t0) / n * 1e6)
        got["collector_relayed_frame_us"].append((t2 - t1) / n * 1e6)
    out: dict[str, object] = {k: round(statistics.median(v), 1) for k, v in got.items()}
    out["hosts"] = n
    out["hello_bytes"] = len(text_body) // n
    out["relayed_hello_bytes"] = len(body) // n
    out["hello_ratio"] = round(statistics.median(got["relayed_hello_us"])
                               / statistics.median(got["text_hello_us"]), 3)
    out["static_ratio"] = round(statistics.median(got["text_static_us"])
                                / statistics.median(got["static_gpu_by_gpu_us"]), 3)
    out["load1"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out))


def _relayed_copies(relayed: list[tuple[int, RelayedHello]]) -> list[tuple[int, RelayedHello]]:
    """What ``collector_wire.relayed_hello`` adds per hello before the pickle: the copy."""
    import copy
    return [(i, RelayedHello(copy.copy(e.hello), e.columns, e.size)) for i, e in relayed]


if __name__ == "__main__":
    main()
