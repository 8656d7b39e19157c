"""The recorder's writer alone: its CPU per item at fleet scale, without the fleet's noise.

``bench_fleet.py --record blocks`` measures the writer thread inside the whole console, on a
shared machine where one tree's runs spread over 52-74 µs per item.  This bench feeds the
same kind of items synchronously: each of ``--hosts`` hosts' agent lines (the simulator's v2
stream, recorded once per template as the stand-in fleet does, re-stamped each tick) goes
through the host's own ``MessageReader`` into one real ``Recorder``; after each tick (one
item per host) the bench calls the recorder's ``_flush`` itself, with the block packer on a
virtual clock (one second a tick), so blocks close at the fleet's pace.  The figure is the
recorder's own ``writer_cpu_s`` (``time.thread_time`` around ``_flush``) over the ticks
after ``--warm``.

Variants take parts of the writer out, to say where its time goes (all in the same run, as
ratios against ``full``): ``no-row`` (frames read from the samples' fields, not from the
wire's decoded rows: the writer before issue 25g), ``no-pack`` (closed blocks are dropped,
not encoded), ``no-staging`` (no staged rows inserted or deleted), ``no-sqlite`` (nothing
executed but BEGIN/COMMIT), ``no-free`` (the bench holds each tick's items until after the
flush, so freeing them is not the writer's: in the console whichever thread drops a sample
last frees it).  ``--profile`` prints cProfile's top functions over the
measured flushes.
``--trees A B ...`` runs the ``full`` variant of each source tree in turn (subprocesses,
interleaved), for a base against a branch in the same minutes.

    python tests/bench/bench_writer.py [--hosts 1024] [--ticks 150] [--variants full,no-pack]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(os.environ.get("RIGWATCH_TREE") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(REPO))
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from probes.store import recording  # noqa: E402
from probes.wire.protocol import MessageReader  # noqa: E402

AGENT_ARGS = ("--wire", "2", "--interval", "1")
"""What the console's bootstrap asks of a host (the stand-in fleet's recordings too)."""
T0 = 1_780_000_000.0


def _no_pack(rec: recording.Recorder) -> None:
    rec._packer._pack = lambda _op: None  # type: ignore[method-assign]


def _no_staging(rec: recording.Recorder) -> None:
    conn = rec._packer._conn

    class Filter:
        def __getattr__(self, name: str) -> Any:
            return getattr(conn, name)

        def executemany(self, sql: str, rows: Any) -> Any:
            return None if "INTO staging" in sql else conn.executemany(sql, rows)

        def execute(self, sql: str, *a: Any) -> Any:
            return None if sql.startswith("DELETE FROM staging") else conn.execute(sql, *a)

    rec._packer._conn = Filter()  # type: ignore[assignment]


class _NoRows:
    def fetchone(self) -> None:
        return None


def _no_sqlite(rec: recording.Recorder) -> None:
    conn = rec._conn

    class Null:
        def __getattr__(self, name: str) -> Any:
            return getattr(conn, name)

        def executemany(self, sql: str, rows: Any) -> Any:
            return None

        def execute(self, sql: str, *a: Any) -> Any:
            return conn.execute(sql, *a) if sql in ("BEGIN IMMEDIATE", "COMMIT",
                                                    "ROLLBACK") else _NoRows()

    rec._packer._conn = Null()  # type: ignore[assignment]
    rec._conn = Null()  # type: ignore[assignment]


def _no_row(rec: recording.Recorder) -> None:
    """Frames from the samples' fields, not their wire rows (the writer before issue 25g)."""
    from probes.store import columns

    columns._ROWS_FIT = False  # run_once puts it back


VARIANTS: dict[str, Callable[[recording.Recorder], None] | None] = {
    "full": None, "no-row": _no_row, "no-pack": _no_pack, "no-staging": _no_staging,
    "no-sqlite": _no_sqlite, "no-free": None}


def load_templates(n: int, count: int) -> list[Any]:
    """The stand-in fleet's recordings (imported here: ``standin_server`` puts its own tree
    first on ``sys.path``, and ``--trees`` runs must import ``probes`` from theirs)."""
    from standin_server import record

    return record(AGENT_ARGS, n, count)


_GC = {"s": 0.0, "n": 0.0, "t0": 0.0}


def _gc_timer(phase: str, _info: dict[str, Any]) -> None:
    """Collections run by this thread, as the writer's CPU counts them (the console's
    thresholds, ``tui.gc_policy``: whichever thread crosses them collects)."""
    if phase == "start":
        _GC["t0"] = time.thread_time()
    else:
        _GC["s"] += time.thread_time() - _GC["t0"]
        _GC["n"] += 1


def run_once(templates: list[Any], hosts: int, ticks: int, warm: int, variant: str,
             profile: cProfile.Profile | None = None) -> dict[str, float]:
    """One recording of ``hosts`` × ``ticks``: the writer's CPU per item after ``warm``."""
    from standin_server import restamp

    from probes.store import columns

    rows_fit = getattr(columns, "_ROWS_FIT", None)
    root = Path(tempfile.mkdtemp(prefix="rw-writer-"))
    names = [f"gpu-node-{h:04d}" for h in range(hosts)]
    readers = [MessageReader() for _ in range(hosts)]
    clock = [0.0]
    try:
        rec = recording.Recorder(root / "r.sqlite3", "bench", names, flush_interval_s=3600.0,
                                 tiers=None)
        rec._packer._clock = lambda: clock[0]
        patch = VARIANTS[variant]
        if patch is not None:
            patch(rec)
        for h, reader in enumerate(readers):
            tpl = templates[h % len(templates)]
            for line in tpl.preamble:
                for msg in reader.feed(line + b"\n"):
                    rec.record(names[h], float(getattr(msg, "ts", 0.0) or T0), msg)
        rec._flush()
        cpu0 = items0 = gc0 = 0.0
        held: list[Any] = []
        gc_in_flush = 0.0
        for t in range(ticks):
            if t == warm:
                cpu0, items0 = rec.writer_cpu_s, rec.status.items_written
                gc_in_flush = 0.0
            for h, reader in enumerate(readers):
                tpl = templates[h % len(templates)]
                lines = tpl.samples[t % len(tpl.samples)]
                ts = T0 + t + h / hosts
                for k, line in enumerate(lines):
                    raw = restamp(line, t + 1, ts) if k == 0 else line + b"\n"
                    for msg in reader.feed(raw):
                        rec.record(names[h], float(getattr(msg, "ts", 0.0) or ts), msg)
                        if variant == "no-free":
                            held.append(msg)
            clock[0] += 1.0
            gc0 = _GC["s"]
            if profile is not None and t >= warm:
                profile.enable()
                rec._flush()
                profile.disable()
            else:
                rec._flush()
            gc_in_flush += _GC["s"] - gc0
            held.clear()  # after the timed flush: the items are freed outside it
        cpu = rec.writer_cpu_s - cpu0
        items = rec.status.items_written - items0
        rec.close()
        size = (root / "r.sqlite3").stat().st_size
        return {"us_per_item": round(1e6 * cpu / max(items, 1), 2), "items": items,
                "gc_us_per_item": round(1e6 * gc_in_flush / max(items, 1), 2),
                "cpu_s": round(cpu, 3), "file_mb": round(size / 1e6, 2)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if rows_fit is not None:
            columns._ROWS_FIT = rows_fit


def setup_gc(args: argparse.Namespace) -> None:
    """The console's collector settings (unless ``--default-gc``), timed."""
    if not args.default_gc:
        from tui.gc_policy import tune_for_streaming

        tune_for_streaming()
    gc.callbacks.append(_gc_timer)


def child(args: argparse.Namespace) -> int:
    setup_gc(args)
    templates = load_templates(args.templates, args.count)
    out: dict[str, list[float]] = {v: [] for v in args.variants}
    for _ in range(args.repeat):
        for v in args.variants:
            out[v].append(run_once(templates, args.hosts, args.ticks, args.warm, v)["us_per_item"])
    print(json.dumps({"tree": str(REPO), "probes": str(Path(recording.__file__).parents[2]),
                      "us_per_item": out}), flush=True)
    return 0


def compare_trees(args: argparse.Namespace) -> dict[str, Any]:
    """``full`` of each tree in turn, ``--repeat`` rounds, each run its own process."""
    runs: dict[str, list[float]] = {t: [] for t in args.trees}
    for _ in range(args.repeat):
        for tree in args.trees:
            env = dict(os.environ, RIGWATCH_TREE=str(Path(tree).resolve()))
            got = subprocess.run(
                [sys.executable, __file__, "--child", "--hosts", str(args.hosts), "--ticks",
                 str(args.ticks), "--warm", str(args.warm), "--templates", str(args.templates),
                 "--count", str(args.count), "--variants", "full", "--repeat", "1"],
                env=env, capture_output=True, text=True, check=True)
            runs[tree] += json.loads(got.stdout.splitlines()[-1])["us_per_item"]["full"]
    base = statistics.median(runs[args.trees[0]])
    return {"bench": "writer", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load": os.getloadavg()[0], "runs": runs,
            "median_us": {t: statistics.median(v) for t, v in runs.items()},
            "ratio_to_first": {t: round(statistics.median(v) / base, 3) for t, v in runs.items()}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--ticks", type=int, default=150)
    p.add_argument("--warm", type=int, default=60, help="ticks before the measured ones")
    p.add_argument("--templates", type=int, default=16)
    p.add_argument("--count", type=int, default=120, help="samples per template")
    p.add_argument("--variants", type=lambda s: s.split(","), default=["full"])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--profile", action="store_true", help="cProfile the measured flushes")
    p.add_argument("--trees", nargs="+", help="source trees to compare (full variant)")
    p.add_argument("--default-gc", action="store_true",
                   help="CPython's collector thresholds, not the console's")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    if args.trees:
        print(json.dumps(compare_trees(args)))
        return 0
    templates = load_templates(args.templates, args.count)
    setup_gc(args)
    if args.profile:
        prof = cProfile.Profile()
        got = run_once(templates, args.hosts, args.ticks, args.warm, "full", prof)
        print(json.dumps(got))
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        return 0
    runs: dict[str, list[float]] = {v: [] for v in args.variants}
    gcs: dict[str, list[float]] = {v: [] for v in args.variants}
    for _ in range(args.repeat):
        for v in args.variants:
            got = run_once(templates, args.hosts, args.ticks, args.warm, v)
            runs[v].append(got["us_per_item"])
            gcs[v].append(got["gc_us_per_item"])
    med = {v: statistics.median(r) for v, r in runs.items()}
    base = med.get("full") or next(iter(med.values()))
    out = {"bench": "writer", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "hosts": args.hosts, "ticks": args.ticks, "warm": args.warm,
           "load": os.getloadavg()[0], "runs": runs, "gc_us_per_item": gcs, "median_us": med,
           "ratio_to_full": {v: round(m / base, 3) for v, m in med.items()}}
    print(json.dumps(out))
    print("writer: " + ", ".join(f"{v} {m:.1f} us/item ({out['ratio_to_full'][v]}x)"
                                 for v, m in med.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
