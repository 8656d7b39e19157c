"""Recording cost: codec speed, bytes per host-sample, writer CPU at 64 hosts x 1 Hz, reading.

Prints one JSON object and one summary line.  Samples come from the agent's simulator
(8 GPUs, values moving tick to tick), so compression sees realistic rows.  Writer CPU is the
writer thread's own CPU time (``time.thread_time``), compared with ``codec.encode`` alone.

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


def write_flat_out(path: Path, per_host: list[list[HostSample]]) -> dict[str, float]:
    """Every sample as fast as record() takes them: the writer's ceiling."""
    ticks = len(per_host[0])
    rec = recording.Recorder(path, "bench", [f"node-{h:02d}" for h in range(len(per_host))])
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
    return {"items": n, "items_per_s": round(n / wall),
            "record_call_us": round(queued / n * 1e6, 2),
            "writer_cpu_us_per_item": round(rec.writer_cpu_s / n * 1e6, 1)}


def write_realtime(path: Path, per_host: list[list[HostSample]], seconds: int) -> dict[str, float]:
    """64 hosts at 1 Hz in real time: what the writer costs a live console."""
    rec = recording.Recorder(path, "bench", [f"node-{h:02d}" for h in range(len(per_host))])
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
    body = conn.execute("SELECT avg(length(body)) FROM items").fetchone()[0]
    conn.close()
    size = os.path.getsize(path)
    return {"items": n, "read_items_per_s": round(n / full), "next_time_us": round(jump * 1e6, 1),
            "file_bytes": size, "file_bytes_per_item": round(size / n),
            "body_bytes_per_item": round(body)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="few iterations, to keep it working")
    args = p.parse_args()
    ticks, realtime_s, repeat, sim_hosts = (6, 2, 20, 4) if args.quick else (60, 10, 200, 16)
    base = simulated_samples(sim_hosts, ticks)
    per_host = [base[h % sim_hosts] for h in range(HOSTS)]
    with tempfile.TemporaryDirectory() as tmp:
        codecs = codec_figures([s for host in base for s in host], repeat)
        flat = write_flat_out(Path(tmp) / "flat.sqlite3", per_host)
        live = write_realtime(Path(tmp) / "live.sqlite3", per_host, realtime_s)
        read = read_figures(Path(tmp) / "flat.sqlite3")
    flat["writer_over_encode_ratio"] = round(flat["writer_cpu_us_per_item"] / codecs["encode_us"],
                                             2)
    out = {"bench": "recording", "python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
           "machine": platform.machine(), "cores": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d"), "quick": args.quick, "hosts": HOSTS,
           "gpus_per_sample": len(base[0][0].gpus), "codec": codecs, "write": flat,
           "realtime_64x1hz": live, "read": read}
    print(json.dumps(out))
    print(f"recording: 8-GPU sample encode+decode {codecs['encode_decode_us']} us, "
          f"{codecs['body_bytes']} B/row ({codecs['json_bytes']} B JSON, "
          f"{codecs['zlib_no_dict_bytes']} B zlib without dictionary); writer "
          f"{flat['items_per_s']} items/s, {flat['writer_cpu_us_per_item']} us CPU/item "
          f"({flat['writer_over_encode_ratio']}x encode alone), "
          f"{live['writer_core_pct']}% of a core at {HOSTS} hosts x 1 Hz; "
          f"read {read['read_items_per_s']} items/s")


if __name__ == "__main__":
    main()
