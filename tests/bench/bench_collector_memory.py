"""Where a collector process's memory goes at N hosts (issue 38: the tree's RSS target).

Starts ``standin_server.py`` with N fake hosts, then one collector process
(``python -m probes.transport.collector_worker``) given all N as its shard, exactly as the
console's ``CollectorBackend`` starts one (the same job frame), and reads and drops its
frames as a console that keeps up would.  Prints one JSON line: the collector's ``VmRSS``
after its imports (before the job), when every host streams, and ``--seconds`` later;
``RssAnon``/``RssFile`` at the end; how long until all hosts streamed.

``--trace N`` runs the collector under ``tracemalloc`` (a wrapper that dumps the N largest
sites, by file and line, to stderr at the end: slower, so RSS is then not comparable);
``--modules`` lists the top-level packages the collector has imported (same wrapper).

    python tests/bench/bench_collector_memory.py --hosts 1024 [--seconds 30] [--trace 30]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_fleet import Child, write_fleet  # noqa: E402
from tests.support.sshd import free_port, keygen  # noqa: E402

HERE = Path(__file__).resolve().parent

WRAPPER = r"""
import os, signal, sys, tracemalloc
trace = int(os.environ.get("RW_TRACE", "0"))
if trace:
    tracemalloc.start(int(os.environ.get("RW_TRACE_FRAMES", "1")))
def dump(*_):
    old, sys.stderr = sys.stderr, open(os.environ["RW_DUMP"], "w")
    mods = sorted({m.split(".")[0] for m in sys.modules})
    import ctypes
    class MI(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MI
        mi = libc.mallinfo2()
        print(f"MALLINFO heap={mi.arena / 2**20:.1f} mmap={mi.hblkhd / 2**20:.1f} "
              f"used={mi.uordblks / 2**20:.1f} free={mi.fordblks / 2**20:.1f} "
              f"blocks={sys.getallocatedblocks()}", file=sys.stderr, flush=True)
    except (OSError, AttributeError):
        pass
    if os.environ.get("RW_CENSUS"):
        import gc, collections
        n, b = collections.Counter(), collections.Counter()
        for o in gc.get_objects():
            t = type(o)
            k = f"{t.__module__}.{t.__qualname__}"
            n[k] += 1
            b[k] += sys.getsizeof(o)
        for k, v in b.most_common(int(os.environ["RW_CENSUS"])):
            print(f"CENSUS {v / 2**20:7.2f} MB {n[k]:8d} {k}", file=sys.stderr, flush=True)
    if os.environ.get("RW_MALLOCSTATS"):
        sys._debugmallocstats()  # to the process's stderr (fd 2)
    print("MODULES " + " ".join(mods), file=sys.stderr, flush=True)
    if trace:
        snap = tracemalloc.take_snapshot()
        stats = snap.statistics("lineno")
        print(f"TRACED {sum(s.size for s in stats) / 2**20:.1f} MB", file=sys.stderr)
        for s in stats[:trace]:
            f = s.traceback[0]
            print(f"TRACE {s.size / 2**20:7.2f} MB {s.count:8d} "
                  f"{f.filename.rsplit('/', 3)[-1]}:{f.lineno}", file=sys.stderr, flush=True)
        if tracemalloc.get_traceback_limit() > 1:
            focus = os.environ.get("RW_FOCUS", "")
            for s in [s for s in snap.statistics("traceback")
                      if not focus or f"{s.traceback[-1].filename.rsplit('/', 1)[-1]}:"
                      f"{s.traceback[-1].lineno}" in focus.split(",")][:trace // 3]:
                where = " < ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}"
                                   for f in s.traceback)
                print(f"TRACE {s.size / 2**20:7.2f} MB {s.count:8d} {where}",
                      file=sys.stderr, flush=True)
    print("END", file=sys.stderr, flush=True)
    sys.stderr.close()
    sys.stderr = old
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["collector_worker", *sys.argv[1:]]
from probes.transport.collector_worker import main
main()
"""


def status(pid: int) -> dict[str, float]:
    """``VmRSS``, ``RssAnon``, ``RssFile`` of ``pid`` in MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = round(int(rest.split()[0]) / 1024, 1)
    return out


class Collector:
    """One collector process fed its job; its frames read and counted, never kept."""

    def __init__(self, specs: list[Any], env: dict[str, str], wrapped: bool) -> None:
        from probes.sources.collectors import FLUSH_S
        from probes.transport.collector_wire import CollectorJob, frame
        from probes.transport.sessions import MAX_CONCURRENT_CONNECTS
        argv = [sys.executable, "-c", WRAPPER, str(os.getpid())] if wrapped else \
            [sys.executable, "-m", "probes.transport.collector_worker", str(os.getpid())]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, cwd=REPO)
        self.spawned = time.monotonic()
        self.job = CollectorJob(tuple(specs), MAX_CONCURRENT_CONNECTS, FLUSH_S, "collector 1")
        self._frame = frame
        self.buf = b""
        self.streaming: set[int] = set()

    def start(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(self._frame(self.job))
        self.proc.stdin.flush()

    def pump(self, seconds: float) -> None:
        """Read (and drop) frames for ``seconds``, noting which hosts sent data."""
        from probes.transport.collector_wire import frame_length, unframe
        out = self.proc.stdout
        assert out is not None
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if select.select([out], [], [], left)[0]:
                chunk = os.read(out.fileno(), 1 << 20)
                if not chunk:
                    raise RuntimeError(f"the collector exited ({self.proc.wait()})")
                self.buf += chunk
            while len(self.buf) >= 4:
                n = frame_length(self.buf[:4])
                if len(self.buf) < 4 + n:
                    break
                batch = unframe(self.buf[4:4 + n])
                self.buf = self.buf[4 + n:]
                assert isinstance(batch, list)
                self.streaming.update(i for i, e in batch if isinstance(e, bytes))

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from probes.config.inventory import load_inventory
    from probes.transport.bootstrap import bootstrap_argv
    root = Path(tempfile.mkdtemp(prefix="rw-colmem-"))
    client, host_key = root / "client", root / "host_ed25519"
    keygen(client)
    keygen(host_key)
    ports = [free_port() for _ in range(args.ports)]
    inv = write_fleet(root, args.hosts, ports, host_key, client)
    specs = list(load_inventory(inv).hosts)
    argv = bootstrap_argv("python3", specs[0].agent_args())
    agent_args = argv[argv.index("--stdin-eof-exit") + 1:]
    server = Child([sys.executable, str(HERE / "standin_server.py"), "--ports",
                    ",".join(map(str, ports)), "--host-key", str(host_key), "--client-pub",
                    f"{client}.pub", "--templates", "16", "--count", "120",
                    "--args-json", json.dumps(agent_args)])
    env = dict(os.environ, HOME=str(root), PYTHONPATH=str(REPO), RW_DUMP=str(root / "dump"))
    if args.trace:
        env["RW_TRACE"] = str(args.trace)
        env["RW_TRACE_FRAMES"] = str(args.frames)
    out: dict[str, Any] = {"bench": "collector_memory", "hosts": args.hosts,
                           "seconds": args.seconds, "load": os.getloadavg()[0],
                           "env": {k: v for k, v in os.environ.items()
                                   if k.startswith(("MALLOC_", "RIGWATCH_"))}}
    col = None
    err = ""
    try:
        server.read(300)
        col = Collector(specs, env, bool(args.trace or args.modules))
        time.sleep(args.settle_imports)
        out["rss_imports_mb"] = status(col.proc.pid)["VmRSS"]
        col.start()
        while len(col.streaming) < args.hosts:
            if time.monotonic() - col.spawned > args.start_timeout:
                break
            col.pump(0.5)
        out["all_streaming_s"] = round(time.monotonic() - col.spawned, 2)
        out["hosts_streaming"] = len(col.streaming)
        out["rss_streaming_mb"] = status(col.proc.pid)["VmRSS"]
        col.pump(args.seconds)
        end = status(col.proc.pid)
        out["rss_mb"] = end["VmRSS"]
        out["rss_anon_mb"] = end.get("RssAnon")
        out["rss_file_mb"] = end.get("RssFile")
        out["kb_per_host"] = round(1024 * (end["VmRSS"] - out["rss_imports_mb"]) / args.hosts, 1)
        if args.trace or args.modules:
            os.kill(col.proc.pid, 10)  # SIGUSR1: the wrapper dumps
            while not (root / "dump").exists() or \
                    not (root / "dump").read_text().endswith("END\n"):
                col.pump(1)
            err = (root / "dump").read_text()
    finally:
        try:
            if col is not None:
                col.stop()
        finally:
            server.stop()
    for line in err.splitlines():
        if line.startswith("MODULES "):
            out["modules"] = line.split()[1:]
        elif line.startswith("MALLINFO "):
            out["mallinfo"] = line[9:]
        elif line.startswith("TRACED "):
            out["traced_mb"] = float(line.split()[1])
    out["trace"] = [line[6:] for line in err.splitlines() if line.startswith(("TRACE ", "CENSUS"))]
    out["load_end"] = os.getloadavg()[0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--trace", type=int, default=0)
    ap.add_argument("--frames", type=int, default=1, help="tracemalloc frames (--trace)")
    ap.add_argument("--modules", action="store_true")
    ap.add_argument("--settle-imports", type=float, default=4.0)
    ap.add_argument("--start-timeout", type=float, default=180)
    args = ap.parse_args()
    out = run(args)
    trace = out.pop("trace", [])
    print(json.dumps(out))
    for line in trace:
        print(line)


if __name__ == "__main__":
    main()
