"""Recording cost: codec speed, bytes per host-sample, writer CPU at 64 hosts x 1 Hz, reading.

Prints one JSON object and one summary line.  Samples come from the agent's simulator
(8 GPUs, values moving tick to tick, PCIe chains every 30th tick), so compression sees
realistic rows.  Writer CPU is the writer thread's own CPU time (``time.thread_time``),
compared with ``codec.encode`` alone.

Two layouts are written in the same run: ``rows``, every sample a deflated JSON row as
before issue 25 (the recorder with its block packer switched off: today's encoding and
writer path), and ``blocks``, the columnar blocks (:mod:`probes.store.columns`).  Bytes per
host-sample are the file's pages in use after close over the samples written (the staging
table's rows are packed and their pages free for reuse by then; in a live file they hold
about a minute of each host).  GB per day at 64 and 1024 hosts at 1 Hz follow from them,
the writer's share of a core at 1024 hosts from its CPU per item.

    python tests/bench/bench_recording.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.store import codec, recording, recording_format  # noqa: E402
from probes.store.recording_reader import RecordingReader  # noqa: E402
from probes.wire.protocol import decode_line  # noqa: E402
from probes.wire.samples import HostSample  # noqa: E402

HOSTS = 64


def simulated_samples(hosts: int, ticks: int) -> list[list[HostSample]]:
    """``ticks`` samples from each of ``hosts`` simulated hosts (scenarios and seeds vary)."""
    scenarios = ["healthy", "leak", "throttle", "disk-saturated"]
    out = []
    for h in range(hosts):
        proc = subprocess.run(
            [sys.executable, "-m", "probes.agent", "--simulate", scenarios[h % len(scenarios)],
             "--seed", str(h), "--count", str(ticks), "--fast", "--hostname", f"node-{h:02d}"],
            capture_output=True, text=True, timeout=120, check=True)
        msgs = [decode_line(line) for line in proc.stdout.splitlines() if line.strip()]
        out.append([m for m in msgs if isinstance(m, HostSample)])
    return out


def per_call_us(fn: Callable[[Any], object], args: Sequence[Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeat):
            for a in args:
                fn(a)
        best = min(best, (time.perf_counter() - t0) / (repeat * len(args)))
    return best * 1e6


def codec_figures(samples: list[HostSample], repeat: int) -> dict[str, float]:
    encoded = [codec.encode(s) for s in samples]
    body = recording_format.Body(recording_format.build_zdict()[1])
    packed = [body.pack(s)[1] for s in samples]
    plain = recording_format.Body(b"")
    raw = [recording_format.dumps(e) for e in encoded]
    no_dict = [zlib.compress(r, 6) for r in raw]
    assert all(codec.decode(e) == s for e, s in zip(encoded, samples, strict=True))
    enc = per_call_us(codec.encode, samples, repeat)
    dec = per_call_us(codec.decode, encoded, repeat)
    return {
        "encode_us": round(enc, 1),
        "decode_us": round(dec, 1),
        "encode_decode_us": round(enc + dec, 1),
        "pack_us": round(per_call_us(body.pack, samples, repeat), 1),
        "unpack_us": round(per_call_us(body.unpack, packed, repeat), 1),
        "json_bytes": round(sum(map(len, raw)) / len(raw)),
        "zlib_no_dict_bytes": round(sum(map(len, no_dict)) / len(no_dict)),
        "raw_deflate_no_dict_bytes": round(sum(len(plain.pack(s)[1]) for s in samples)
                                           / len(samples)),
        "body_bytes": round(sum(map(len, packed)) / len(packed)),
    }


class RowsRecorder(recording.Recorder):
    """The recorder as it wrote before blocks: every sample whole in ``items``."""

    def _prepare(self, conn: sqlite3.Connection, fleet_key: str,
                 hosts: list[str]) -> tuple[recording_format.Body, dict[str, int]]:
        out = super()._prepare(conn, fleet_key, hosts)
        self._packer.add = lambda *_a: False  # type: ignore[method-assign]
        return out


LAYOUTS: dict[str, type[recording.Recorder]] = {"rows": RowsRecorder,
                                                 "blocks": recording.Recorder}


def write_flat_out(path: Path, per_host: list[list[HostSample]],
                   layout: str = "blocks") -> dict[str, float]:
    """Every sample as fast as record() takes them: the writer's ceiling."""
    ticks = len(per_host[0])
    rec = LAYOUTS[layout](path, "bench", [f"node-{h:02d}" for h in range(len(per_host))])
    t0 = time.perf_counter()
    n = 0
    for t in range(ticks):
        for h, host_samples in enumerate(per_host):
            s = host_samples[t]
            rec.record(f"node-{h:02d}", s.ts, s)
            n += 1
    queued = time.perf_counter() - t0
    rec.close(timeout_s=None)
    wall = time.perf_counter() - t0
    st = rec.status
    assert st.state == "off" and st.items_written == n, st
    conn = sqlite3.connect(path)
    try:
        pages, free, page = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
    finally:
        conn.close()
    per = (pages - free) * page / n  # staged rows' pages are free again after close
    return {"items": n, "items_per_s": round(n / wall),
            "record_call_us": round(queued / n * 1e6, 2),
            "writer_cpu_us_per_item": round(rec.writer_cpu_s / n * 1e6, 1),
            "file_bytes_per_host_sample": round(per, 1),
            "gb_per_day_64_hosts": round(per * 64 * 86400 / 1e9, 2),
            "gb_per_day_1024_hosts": round(per * 1024 * 86400 / 1e9, 2),
            "writer_core_pct_1024_hosts": round(rec.writer_cpu_s / n * 1024 * 100, 2)}


def write_realtime(path: Path, per_host: list[list[HostSample]], seconds: int,
                   layout: str = "blocks") -> dict[str, float]:
    """64 hosts at 1 Hz in real time: what the writer costs a live console."""
    rec = LAYOUTS[layout](path, "bench", [f"node-{h:02d}" for h in range(len(per_host))])
    slowest = 0.0
    n = 0
    start = time.monotonic()
    for t in range(seconds):
        for h, host_samples in enumerate(per_host):
            s = host_samples[t % len(host_samples)]
            c0 = time.perf_counter()
            rec.record(f"node-{h:02d}", s.ts, s)
            slowest = max(slowest, time.perf_counter() - c0)
            n += 1
        time.sleep(max(0.0, start + t + 1 - time.monotonic()))
    cpu = rec.writer_cpu_s
    rec.close(timeout_s=None)
    return {"seconds": seconds, "items": n,
            "writer_core_pct": round(cpu / seconds * 100, 3),
            "writer_cpu_us_per_item": round(cpu / n * 1e6, 1),
            "slowest_record_call_us": round(slowest * 1e6, 1)}


def read_figures(path: Path) -> dict[str, float]:
    with RecordingReader(path) as r:
        n = r.count()
        t0 = time.perf_counter()
        seen = sum(1 for _ in r.items())
        full = time.perf_counter() - t0
        span = r.span()
        assert seen == n and span is not None
        t0 = time.perf_counter()
        for i in range(200):
            r.next_time("sample", span[0] + (span[1] - span[0]) * i / 200)
        jump = (time.perf_counter() - t0) / 200
    conn = sqlite3.connect(path)
    body = sum(conn.execute(f"SELECT coalesce(sum(length(body)), 0) FROM {t}").fetchone()[0]
               for t in ("items", "blocks", "templates"))
    conn.close()
    size = os.path.getsize(path)
    return {"items": n, "read_items_per_s": round(n / full), "next_time_us": round(jump * 1e6, 1),
            "file_bytes": size, "file_bytes_per_item": round(size / n),
            "body_bytes_per_item": round(body / n, 1)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="few iterations, to keep it working")
    args = p.parse_args()
    ticks, realtime_s, repeat, sim_hosts = (6, 2, 20, 4) if args.quick else (60, 10, 200, 16)
    base = simulated_samples(sim_hosts, ticks)
    per_host = [base[h % sim_hosts] for h in range(HOSTS)]
    layouts: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        codecs = codec_figures([s for host in base for s in host], repeat)
        for layout in LAYOUTS:
            flat = write_flat_out(Path(tmp) / f"flat-{layout}.sqlite3", per_host, layout)
            live = write_realtime(Path(tmp) / f"live-{layout}.sqlite3", per_host, realtime_s,
                                  layout)
            read = read_figures(Path(tmp) / f"flat-{layout}.sqlite3")
            flat["writer_over_encode_ratio"] = round(
                flat["writer_cpu_us_per_item"] / codecs["encode_us"], 2)
            layouts[layout] = {"write": flat, "realtime_64x1hz": live, "read": read}
    rows, blocks = layouts["rows"]["write"], layouts["blocks"]["write"]
    ratios = {"bytes_rows_over_blocks": round(rows["file_bytes_per_host_sample"]
                                              / blocks["file_bytes_per_host_sample"], 1),
              "writer_cpu_rows_over_blocks": round(rows["writer_cpu_us_per_item"]
                                                   / blocks["writer_cpu_us_per_item"], 2)}
    out = {"bench": "recording", "python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
           "machine": platform.machine(), "cores": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d"), "quick": args.quick, "hosts": HOSTS,
           "ticks": ticks, "gpus_per_sample": len(base[0][0].gpus), "codec": codecs,
           "layouts": layouts, "ratios": ratios}
    print(json.dumps(out))
    b_read = layouts["blocks"]["read"]
    print(f"recording: 8-GPU host-sample {rows['file_bytes_per_host_sample']} B as rows, "
          f"{blocks['file_bytes_per_host_sample']} B in blocks "
          f"({ratios['bytes_rows_over_blocks']}x smaller; "
          f"{blocks['gb_per_day_64_hosts']} GB/day at 64 hosts, "
          f"{blocks['gb_per_day_1024_hosts']} at 1024, against "
          f"{rows['gb_per_day_64_hosts']} and {rows['gb_per_day_1024_hosts']}); writer "
          f"{blocks['writer_cpu_us_per_item']} us CPU/item against "
          f"{rows['writer_cpu_us_per_item']} ({blocks['writer_core_pct_1024_hosts']}% of a "
          f"core at 1024 hosts x 1 Hz against {rows['writer_core_pct_1024_hosts']}%); "
          f"read {b_read['read_items_per_s']} items/s")


if __name__ == "__main__":
    main()
