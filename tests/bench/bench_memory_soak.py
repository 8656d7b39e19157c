"""Memory over a soak: N hosts x 8 GPUs for 24 h at 1 Hz, time-compressed, with recording on.

Prints one JSON object and one summary line.  The question is whether a console left
running for a day stays small and *flat*: the issue's target is at most 400 MB of RSS for
64 hosts x 8 GPUs over 24 h, with no growth left once the history's tiers have filled.

What is fed, as fast as the CPU allows (agent time runs ahead of wall time):

* Wire lines from the agent's simulator, built by ``bench_ingest.template`` (16 templates,
  a quarter each healthy, throttling, leaking on GPU 3 and on an x8 link) and decoded once
  with ``decode_line`` into a pool of ``--pool`` distinct seconds per template.  Host *i*
  replays template *i mod 16* under its own name.  Every agent second each template's
  pooled sample is re-stamped (``dataclasses.replace`` of ``ts`` and ``seq``); the hosts of
  one template share that object (samples are immutable; the history copies values into
  its columns, so sharing changes nothing it keeps).
* The pool repeats every ``--pool`` seconds, except that the leaking GPU keeps leaking: its
  memory (and its process's) is raised by the simulator's ``LEAK_MIB_PER_H`` for each pass
  over the pool, so the leak grows for the whole day (up to the card's size) and the leak
  detector sees a real day-long ramp.  Everything else is the pool repeated.
* Each host's hello first, and every 5 agent minutes one kernel log line per host (a benign
  line, distinct each time; every 6 h an Xid 13 line, which the log rules keep as one sticky
  finding whose count grows).
* Every item goes through ``FleetState.apply`` (history, detector schedule, findings) and
  into a ``Recorder`` on a temporary directory (SQLite in WAL mode, the writer thread, the
  console's retention settings).  The feeder waits while more than ``MAX_BACKLOG`` items are
  queued for the writer, so the queue measures nothing but a busy disk.

Measured: RSS (``VmRSS`` of ``/proc/self/status``) every 15 agent minutes, as a series of
(agent hours, MB); the peak (``VmHWM``), the end, and the least-squares slope over the
second half of the run in MB per agent hour (and as % of the end RSS per hour).  Alongside:
the history's columns (``HostHistory.nbytes`` summed), whose 15 s tier keeps filling until
it holds 12 h, so little second-half growth is expected and is reported next to RSS; the
recording file's size; wall and CPU seconds (CPU of the whole process, writer included).

Baseline, in the same run: ``rss_start_mb`` is this process after building the pool and
before feeding (``VmHWM`` is reset there, so the peak is the soak's).  The "first cut" store
is what a first monitor keeps to draw a day of charts: a per-host ``deque`` of every line's
``json.loads`` dict (and, leaner, a tuple of the values the history keeps,
``bench_history.tuple_row``), measured with tracemalloc for one host-hour (after the soak)
and scaled to hosts x hours (it has no tiers, so it grows linearly).  Ratios: first-cut
growth over rigwatch's RSS growth.

CPU: about 270 us per host-sample on a 2-core VM, 60 % of it the recorder's writer (encode
and compress); the full 64 x 24 h (5.5 M host-samples) takes about 25 minutes there, so
``--hours 6`` is the practical run on such a machine.

    python tests/bench/bench_memory_soak.py [--quick] [--hosts 64] [--hours 24] [--step 1]

``--quick``: 4 hosts for 3 h (about 15 s).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter, deque
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import bench_history
import bench_ingest

from probes import agent
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.history import HostHistory
from probes.store import recording
from probes.wire.protocol import decode_line
from probes.wire.samples import Hello, HostSample, LogEvent
from tui.gc_policy import tune_for_streaming
from tui.settings import RecordingLimits

T0 = bench_ingest.T0
TEMPLATES = bench_ingest.TEMPLATES
RSS_EVERY_S = 900
"""Agent seconds between RSS readings."""
LOG_EVERY_S = 300
XID_EVERY_S = 6 * 3600
MAX_BACKLOG = 20_000
"""Items queued for the recorder's writer before the feeder waits for it."""
TARGET_MB = 400.0


def reset_peak() -> None:
    """Restart ``VmHWM`` from the current RSS (Linux >= 4.0; otherwise the peak includes
    building the pool)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def status_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    got = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            got[key] = int(rest.split()[0]) * 1024 / 1e6
    return got.get("VmRSS", 0.0), got.get("VmHWM", 0.0)


class Template:
    """One simulated host's hello and its pool of decoded samples, re-stamped on demand."""

    def __init__(self, k: int, pool_s: int) -> None:
        got = bench_ingest.template(k, pool_s)
        hello_line, lines = got[0] if isinstance(got[0], tuple) else got  # v1 (and v2 since)
        self.lines: list[bytes] = lines
        hello = decode_line(hello_line)
        assert isinstance(hello, Hello)
        self.hello = hello
        self.pool: list[HostSample] = []
        for line in lines:
            s = decode_line(line)
            assert isinstance(s, HostSample)
            self.pool.append(s)
        leaks = [sc for sc in agent.parse_scenarios(bench_ingest.SCENARIOS[k % len(
            bench_ingest.SCENARIOS)]) if sc["name"] == "leak"]
        self.leak_gpu: int | None = leaks[0]["gpu"] if leaks else None
        self.leak_per_pass_mib = agent.LEAK_MIB_PER_H * pool_s / 3600.0
        """What the simulator's leak grows in one pass over the pool."""

    def at(self, t: int) -> HostSample:
        """The sample of agent second ``t`` (from the start of the soak)."""
        n = len(self.pool)
        s = self.pool[t % n]
        if self.leak_gpu is not None and t >= n:
            s = self._leaked(s, self.leak_per_pass_mib * (t // n))
        return replace(s, ts=T0 + t, seq=t)

    def _leaked(self, s: HostSample, grown: float) -> HostSample:
        gpus = []
        for g in s.gpus:
            if g.index == self.leak_gpu and g.mem_used_mib is not None:
                cap = (g.mem_total_mib or math.inf) - 2.0
                mem = min(cap, g.mem_used_mib + grown)
                procs = g.processes and tuple(
                    replace(p, used_mib=p.used_mib + (mem - g.mem_used_mib))
                    if p.used_mib is not None else p for p in g.processes)
                g = replace(g, mem_used_mib=mem, processes=procs)
            gpus.append(g)
        return replace(s, gpus=tuple(gpus))


def log_event(t: int, i: int) -> LogEvent:
    if t % XID_EVERY_S == 0:
        line = (f"[{t + 12.5:.6f}] NVRM: Xid (PCI:0000:{0x18 + i % 8:02x}:00): 13, "
                f"pid=41003, name=python, Graphics Exception: ESR 0x404490=0x80000001")
    else:
        line = f"[{t + 3.25:.6f}] EXT4-fs (nvme0n1p{1 + i % 3}): re-mounted, opts: (null)"
    return LogEvent(ts=T0 + t, source="kernel", line=line, boot="bench-boot")


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (x, y) points, None with fewer than 2 distinct x."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def soak(hosts: int, hours: float, step: int, templates: list[Template],
         directory: Path, layout: str = "blocks") -> dict[str, Any]:
    names = [f"h{i:04d}" for i in range(hosts)]
    fleet = FleetState([HostSpec(name=n, expect_gpus=8) for n in names])
    limits = RecordingLimits()
    now_box = [T0]
    rec = recording.Recorder(directory / "soak.sqlite3", "bench-soak", names,
                             max_age_s=limits.max_age_days * 86400.0,
                             max_bytes=int(limits.max_size_gib * 2**30),
                             clock=lambda: now_box[0])
    if layout == "rows":  # every sample whole, as before issue 25: the baseline
        rec._packer.add = lambda *_a: False  # type: ignore[method-assign]
    by_template = [[(i, n) for i, n in enumerate(names) if i % TEMPLATES == k]
                   for k in range(TEMPLATES)]
    by_template = [group for group in by_template if group]
    rss_start, _ = status_mb()
    series: list[tuple[float, float]] = [(0.0, round(rss_start, 1))]
    hist_series: list[tuple[float, float]] = [(0.0, 0.0)]
    fed = 0
    host_samples = 0
    waits = 0
    max_backlog = 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for i, name in enumerate(names):
        hello = templates[i % TEMPLATES].hello
        fleet.apply(name, hello, T0)
        rec.record(name, T0, hello)
        fed += 1
    end = int(hours * 3600)
    for t in range(0, end, step):
        now = T0 + t
        now_box[0] = now
        for group in by_template:
            s = templates[group[0][0] % TEMPLATES].at(t)
            for _, name in group:
                fleet.apply(name, s, now)
                rec.record(name, now, s)
            host_samples += len(group)
            fed += len(group)
        if t % LOG_EVERY_S == 0 and t:
            for i, name in enumerate(names):
                ev = log_event(t, i)
                fleet.apply(name, ev, now)
                rec.record(name, now, ev)
                fed += 1
        if t % 60 == 0:
            st = rec.status
            backlog = fed - st.items_written - rec.skipped
            max_backlog = max(max_backlog, backlog)
            while backlog > MAX_BACKLOG and st.state == "recording":
                waits += 1
                time.sleep(0.002)
                st = rec.status
                backlog = fed - st.items_written - rec.skipped
        if (t + step) % RSS_EVERY_S < step:
            h = (t + step) / 3600
            series.append((round(h, 3), round(status_mb()[0], 1)))
            hist = sum(hs.history.nbytes() for hs in fleet.hosts.values())
            hist_series.append((round(h, 3), round(hist / 1e6, 2)))
    feed_wall = time.perf_counter() - wall0
    rec.close(timeout_s=None)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    rss_end, rss_peak = status_mb()
    half = [p for p in series if p[0] >= hours / 2]
    hist_half = [p for p in hist_series if p[0] >= hours / 2]
    rss_slope = slope(half)
    hist_slope = slope(hist_half)
    st = rec.status
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    codes = Counter(f.code for hs in fleet.hosts.values() for f in hs.findings())
    history_bytes = sum(hs.history.nbytes() for hs in fleet.hosts.values())
    return {
        "hosts": hosts, "hours": hours, "step_s": step, "host_samples": host_samples,
        "items_fed": fed,
        "wall_s": round(wall, 1), "feed_wall_s": round(feed_wall, 1), "cpu_s": round(cpu, 1),
        "writer_cpu_s": round(rec.writer_cpu_s, 1),
        "cpu_us_per_host_sample": round(1e6 * cpu / host_samples, 1) if host_samples else None,
        "agent_speedup": round(end / wall) if wall else None,
        "rss_start_mb": round(rss_start, 1), "rss_peak_mb": round(rss_peak, 1),
        "rss_end_mb": round(rss_end, 1), "rss_growth_mb": round(rss_end - rss_start, 1),
        "second_half_slope_mb_per_h": round(rss_slope, 3) if rss_slope is not None else None,
        "second_half_slope_pct_per_h":
            round(100 * rss_slope / rss_end, 3) if rss_slope is not None and rss_end else None,
        "history_mb": round(history_bytes / 1e6, 2),
        "history_second_half_slope_mb_per_h":
            round(hist_slope, 3) if hist_slope is not None else None,
        "recording_mb": round(st.bytes / 1e6, 1),
        "recording_bytes_per_item": round(st.bytes / st.items_written) if st.items_written
        else None,
        "recording_layout": layout,
        **recording_figures(directory / "soak.sqlite3", host_samples, step, rec.writer_cpu_s,
                            st.items_written),
        "recorder_status": {"state": st.state, "reason": st.reason,
                            "items_written": st.items_written, "skipped": rec.skipped},
        "recorder_max_backlog": max_backlog, "recorder_waits": waits,
        "findings_by_code": dict(sorted(codes.items())),
        "series": [list(p) for p in series],
        "history_series": [list(p) for p in hist_series],
    }


def recording_figures(path: Path, host_samples: int, step: int, writer_cpu_s: float,
                      items: int) -> dict[str, Any]:
    """Bytes per host-sample (pages in use: the staging rows' pages are free again after
    close), GB per day at 64 and 1024 hosts at this step, and the writer's CPU per item
    and share of a core at 1024 hosts."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        pages, free, page = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
    finally:
        conn.close()
    per = (pages - free) * page / max(host_samples, 1)
    per_item_us = 1e6 * writer_cpu_s / max(items, 1)
    per_s = 86400 / step
    return {"recording_bytes_per_host_sample": round(per, 1),
            "recording_gb_per_day_64_hosts": round(per * 64 * per_s / 1e9, 2),
            "recording_gb_per_day_1024_hosts": round(per * 1024 * per_s / 1e9, 2),
            "writer_us_per_item": round(per_item_us, 1),
            "writer_core_pct_1024_hosts": round(per_item_us * 1024 / step / 1e4, 2)}


def history_soak(hosts: int, hours: float, templates: list[Template],
                 fresh: bool) -> dict[str, Any]:
    """History alone (``HostHistory.add``, no fleet state, detectors or recorder): RSS over
    the run, bytes per host-day and the CPU of ``add``.

    ``fresh``: every host gets its own freshly decoded sample each second (``decode_line``
    of its template's line, as the console holds them); otherwise hosts of one template share
    one re-stamped sample, which is cheap but hides what staging decoded samples costs.
    """
    hist = [HostHistory() for _ in range(hosts)]
    gc.collect()
    rss_start, _ = status_mb()
    series: list[tuple[float, float]] = [(0.0, round(rss_start, 1))]
    add_cpu = 0.0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    end = int(hours * 3600)
    every = RSS_EVERY_S if hours >= 1 else 10
    for t in range(end):
        for k in range(min(TEMPLATES, hosts)):
            tmpl = templates[k]
            if fresh:
                line = tmpl.lines[t % len(tmpl.lines)]
                samples = []
                for _ in range(k, hosts, TEMPLATES):
                    got = decode_line(line)
                    assert isinstance(got, HostSample)
                    samples.append(replace(got, ts=T0 + t, seq=t))
            else:
                samples = [tmpl.at(t)] * len(range(k, hosts, TEMPLATES))
            c0 = time.process_time()
            for i, smp in zip(range(k, hosts, TEMPLATES), samples, strict=True):
                hist[i].add(smp)
            add_cpu += time.process_time() - c0
            del samples
        if (t + 1) % every == 0:
            series.append((round((t + 1) / 3600, 3), round(status_mb()[0], 1)))
    loop_cpu = time.process_time() - cpu0
    gc.collect()
    rss_end, rss_peak = status_mb()
    last6 = [p for p in series if p[0] >= hours - 6] if hours >= 12 else []
    sl = slope(last6)
    nb = sum(h.nbytes() for h in hist)
    days = hours / 24
    return {
        "hosts": hosts, "hours": hours, "fresh_samples": fresh, "host_samples": hosts * end,
        "wall_s": round(time.perf_counter() - wall0, 1),
        "add_us_per_host_sample": round(1e6 * add_cpu / (hosts * end), 1),
        "loop_cpu_us_per_host_sample": round(1e6 * loop_cpu / (hosts * end), 1),
        "rss_start_mb": round(rss_start, 1), "rss_end_mb": round(rss_end, 1),
        "rss_peak_mb": round(rss_peak, 1), "rss_growth_mb": round(rss_end - rss_start, 1),
        "rss_growth_mb_per_host_day": round((rss_end - rss_start) / hosts / days, 3),
        "history_mb": round(nb / 1e6, 2),
        "history_mb_per_host_day": round(nb / 1e6 / hosts / days, 3),
        "last_6h_slope_mb_per_h": round(sl, 2) if sl is not None else None,
        "last_6h_slope_pct_per_h": round(100 * sl / rss_end, 3) if sl is not None else None,
        "series": [list(p) for p in series],
    }


def history_main(args: argparse.Namespace) -> None:
    """``--history-only``: one ``history_soak`` in this process, printed as one JSON line."""
    gc.collect()
    templates = [Template(k, args.pool) for k in range(min(TEMPLATES, args.hosts))]
    gc.collect()
    tune_for_streaming()
    reset_peak()
    r = history_soak(args.hosts, args.hours, templates, args.fresh)
    print(json.dumps(r))


def compare_main(args: argparse.Namespace) -> None:
    """``--compare REV``: the history-only soak with REV's ``probes/history`` (the rest of
    this checkout as is) and with this checkout's, alternately, each in its own process."""
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="rigwatch-before-") as tmp:
        subprocess.run(f"git -C {root} archive HEAD | tar -x -C {tmp} && rm -rf "
                       f"{tmp}/probes/history && git -C {root} archive {args.compare} "
                       f"probes/history | tar -x -C {tmp}", shell=True, check=True)
        # This checkout's uncommitted files beyond the history (this bench among them), so
        # that the two sides differ only in ``probes/history``.
        for sub in ("probes", "tests"):
            subprocess.run(f"cd {root} && git ls-files -m -o --exclude-standard {sub} | "
                           f"grep -v '^probes/history/' | tar -cf - --ignore-failed-read -T - "
                           f"2>/dev/null | tar -xf - -C {tmp}",
                           shell=True, check=False)
        out: dict[str, Any] = {"bench": "memory_soak_history", "date": time.strftime("%Y-%m-%d"),
                               "machine": f"{os.cpu_count()}-core {platform.machine()}, "
                                          f"python {platform.python_version()}",
                               "before_rev": args.compare, "runs": []}
        here = Path(__file__).resolve()
        script = {"before": str(Path(tmp) / here.relative_to(root)), "after": str(here)}
        for hosts, hours, fresh in ((args.hosts, args.hours, False), (1024, 1 / 60, True)):
            for side in ("before", "after"):
                cmd = [sys.executable, script[side], "--history-only", "--pool", str(args.pool),
                       "--hosts", str(hosts), "--hours", str(hours)]
                if fresh:
                    cmd.append("--fresh")
                got = subprocess.run(cmd, capture_output=True, text=True, check=True)
                r = json.loads(got.stdout.strip().splitlines()[-1])
                r["side"] = side
                out["runs"].append(r)
                print(f"{side:6} {hosts:5} hosts x {hours:g} h: RSS {r['rss_start_mb']} -> "
                      f"{r['rss_end_mb']} MB, {r['rss_growth_mb_per_host_day']} MB/host-day "
                      f"(history {r['history_mb_per_host_day']}), last 6 h "
                      f"{r['last_6h_slope_mb_per_h']} MB/h, add {r['add_us_per_host_sample']} "
                      f"us/host-sample (all CPU {r['loop_cpu_us_per_host_sample']})",
                      file=sys.stderr, flush=True)
    print(json.dumps(out))


def baseline_bytes_per_host_hour(tmpl: Template, lines: list[bytes]) -> dict[str, int]:
    """A first cut's store for one host-hour: parsed dicts, and tuples of the same values."""
    hour = [lines[i % len(lines)] for i in range(3600)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    dicts: deque[dict[str, Any]] = deque()
    for line in hour:
        dicts.append(json.loads(line))
    dict_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del dicts
    return {"dicts": dict_bytes,
            "tuples": bench_history.baseline_bytes_per_hour(tmpl.pool)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 hosts for 3 h")
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--step", type=int, default=1, help="agent seconds between samples")
    ap.add_argument("--pool", type=int, default=600, help="distinct seconds per template")
    ap.add_argument("--record-layout", choices=("blocks", "rows"), default="blocks",
                    help="rows: every sample whole, as the recorder wrote before issue 25")
    ap.add_argument("--history-only", action="store_true",
                    help="HostHistory.add alone: no fleet state, detectors or recorder")
    ap.add_argument("--fresh", action="store_true",
                    help="with --history-only: decode each host's sample afresh")
    ap.add_argument("--compare", metavar="REV",
                    help="history-only, REV's probes/history against this checkout's "
                         "(--hosts x --hours, then 1024 fresh hosts x 1 min)")
    args = ap.parse_args()
    if args.compare:
        compare_main(args)
        return
    if args.history_only:
        history_main(args)
        return
    hosts, hours = (4, 3.0) if args.quick else (args.hosts, args.hours)
    pool_s = args.pool
    gc.collect()
    rss_before_pool, _ = status_mb()
    templates = [Template(k, pool_s) for k in range(min(TEMPLATES, hosts))]
    gc.collect()
    pool_mb = status_mb()[0] - rss_before_pool
    tune_for_streaming()  # as the console does once it has started
    reset_peak()
    with tempfile.TemporaryDirectory(prefix="rigwatch-soak-") as tmp:
        r = soak(hosts, hours, args.step, templates, Path(tmp), args.record_layout)
    # After the soak, so its transient objects count neither in its start nor in its peak.
    base_lines = templates[0].lines
    base_hour = baseline_bytes_per_host_hour(templates[0], base_lines)
    per_day = hosts * hours / args.step
    base_dict_mb = base_hour["dicts"] * per_day / 1e6
    base_tuple_mb = base_hour["tuples"] * per_day / 1e6
    growth = max(r["rss_growth_mb"], 0.1)
    r.update({
        "baseline_rss_mb": r["rss_start_mb"],
        "rss_before_pool_mb": round(rss_before_pool, 1), "pool_mb": round(pool_mb, 1),
        "rss_peak_without_pool_mb": round(r["rss_peak_mb"] - pool_mb, 1),
        "baseline_dict_bytes_per_host_hour": base_hour["dicts"],
        "baseline_tuple_bytes_per_host_hour": base_hour["tuples"],
        "baseline_dict_mb": round(base_dict_mb, 1),
        "baseline_tuple_mb": round(base_tuple_mb, 1),
        "baseline_dict_over_rss_growth": round(base_dict_mb / growth, 1),
        "baseline_tuple_over_rss_growth": round(base_tuple_mb / growth, 1),
        "target_mb": TARGET_MB, "within_target": r["rss_peak_mb"] <= TARGET_MB,
    })
    out = {"bench": "memory_soak", "date": time.strftime("%Y-%m-%d"),
           "machine": f"{os.cpu_count()}-core {platform.machine()}, "
                      f"python {platform.python_version()}",
           "quick": args.quick, "pool_s": pool_s, "gpus_per_host": 8, "results": r}
    print(json.dumps(out))
    print(f"memory soak: {hosts} hosts x {hours:g} h at {args.step} s "
          f"({r['host_samples']} host-samples, {r['wall_s']} s wall, {r['cpu_s']} s CPU): "
          f"RSS {r['rss_start_mb']} -> {r['rss_end_mb']} MB (peak {r['rss_peak_mb']}, target "
          f"{TARGET_MB:g}; {r['rss_peak_without_pool_mb']} without the bench's "
          f"{r['pool_mb']} MB sample pool), second half {r['second_half_slope_mb_per_h']} MB/h "
          f"({r['second_half_slope_pct_per_h']} %/h; history "
          f"{r['history_second_half_slope_mb_per_h']} MB/h); history {r['history_mb']} MB, "
          f"recording {r['recording_mb']} MB ({r['recorder_status']['state']}, "
          f"{r['recording_layout']}: {r['recording_bytes_per_host_sample']} B per host-sample, "
          f"{r['recording_gb_per_day_64_hosts']} GB/day at 64 hosts, "
          f"{r['recording_gb_per_day_1024_hosts']} at 1024; writer {r['writer_us_per_item']} "
          f"us per item, {r['writer_core_pct_1024_hosts']} % of a core at 1024); first cut "
          f"{r['baseline_dict_mb']} MB of dicts ({r['baseline_dict_over_rss_growth']}x "
          f"rigwatch's growth), {r['baseline_tuple_mb']} MB of tuples "
          f"({r['baseline_tuple_over_rss_growth']}x)")


if __name__ == "__main__":
    main()
