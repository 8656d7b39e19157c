"""A collector process's CPU per host-sample against the SSH+parse floor, in one run
(issue 38: the console's tree at 1024 hosts is ~2x the floor in its collectors alone).

Starts ``standin_server.py`` with N fake hosts, then, alternately, one collector process
(``python -m probes.transport.collector_worker``, the job frame the console sends, all N
hosts as its shard) and ``bench_fleet``'s floor (a bare asyncssh client: one exec session a
host, ``orjson.loads`` of each line).  Each measures, after every host streams and
``--settle`` seconds, its own CPU (user+sys from ``/proc``) over ``--seconds`` and the
samples the server sent meanwhile.  The bench reads the collector's frames as a console
that keeps up would (unpickled and dropped, in this process, not counted).

``--code DIR[,DIR...]`` runs the collector from each of these checkouts in turn (say a
worktree of main, then this one): the pairs alternate, so old and new code share the
machine's noise; the figures are per run and the median per checkout, each as a ratio to
the floor measured in the same round.

``--profile FILE`` runs the (first checkout's) collector under cProfile over one measured
window (enabled by SIGUSR2, dumped by SIGUSR1 from a wrapper: nothing in the product) and
writes its pstats to FILE; CPU figures of that run are then inflated and not reported.

    python tests/bench/bench_collector_cpu.py --hosts 256 [--seconds 20] [--rounds 3]
        [--code A,B] [--profile FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_collector_memory import Collector  # noqa: E402
from tests.bench.bench_fleet import Child, tree_cpu, write_fleet  # noqa: E402
from tests.support.sshd import free_port, keygen  # noqa: E402

HERE = Path(__file__).resolve().parent

PROFILER = r"""
import cProfile, os, signal, sys
prof = cProfile.Profile()
def start(*_):
    prof.enable()
def dump(*_):
    prof.disable()
    prof.dump_stats(os.environ["RW_PROFILE"])
    open(os.environ["RW_PROFILE"] + ".done", "w").close()
signal.signal(signal.SIGUSR2, start)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["collector_worker", *sys.argv[1:]]
from probes.transport.collector_worker import main
main()
"""


class CodeCollector(Collector):
    """``Collector`` started from another checkout (or under the profiler)."""

    def __init__(self, specs: list[Any], env: dict[str, str], code: Path,
                 profile: str | None) -> None:
        import subprocess

        from probes.sources.collectors import FLUSH_S
        from probes.transport.collector_wire import CollectorJob, frame
        from probes.transport.sessions import MAX_CONCURRENT_CONNECTS
        env = dict(env, PYTHONPATH=str(code))
        argv = [sys.executable, "-m", "probes.transport.collector_worker", str(os.getpid())]
        if profile:
            env["RW_PROFILE"] = profile
            argv = [sys.executable, "-c", PROFILER, str(os.getpid())]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, cwd=code)
        self.spawned = time.monotonic()
        self.job = CollectorJob(tuple(specs), MAX_CONCURRENT_CONNECTS, FLUSH_S, "collector 1")
        self._frame = frame
        self.buf = b""
        self.streaming: set[int] = set()


def _spy(args: argparse.Namespace, pid: int, name: str) -> Any:
    """py-spy (if ``--spy DIR``) sampling ``pid`` over the window, without pausing it: its
    collapsed stacks (``-f raw``) in ``DIR/name.txt``."""
    if not args.spy:
        return None
    import shutil
    import subprocess
    Path(args.spy).mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen([spy, "record", "--nonblocking", "-r", "500", "-d",
                             str(int(args.seconds)), "-f", "raw", "-o",
                             str(Path(args.spy) / f"{name}.txt"), "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _sys(pid: int) -> float:
    """CPU seconds in the kernel (sys) of ``pid`` alone: pipe writes, socket reads, epoll."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return int(f[12]) / os.sysconf("SC_CLK_TCK")


def _sent(server: Child) -> int:
    server.say("stat")
    return int(server.read(10)["sent"])


def collector_window(args: argparse.Namespace, specs: list[Any], env: dict[str, str],
                     server: Child, code: Path, profile: str | None) -> dict[str, Any]:
    col = CodeCollector(specs, env, code, profile)
    server0 = tree_cpu(server.pid)
    try:
        col.start()
        while len(col.streaming) < len(specs):
            if time.monotonic() - col.spawned > args.start_timeout:
                raise TimeoutError(f"{len(col.streaming)} of {len(specs)} hosts streaming")
            col.pump(0.5)
        streaming_s = time.monotonic() - col.spawned
        # Start-up in CPU seconds (less noisy than its wall time on a shared machine): the
        # collector's until every host streamed, and the stand-in server's meanwhile.
        start_cpu = {"collector": round(tree_cpu(col.proc.pid), 2),
                     "server": round(tree_cpu(server.pid) - server0, 2)}
        col.pump(args.settle)
        if profile:
            os.kill(col.proc.pid, 12)  # SIGUSR2: start profiling
        sent0, cpu0, t0 = _sent(server), tree_cpu(col.proc.pid), time.monotonic()
        sys0 = _sys(col.proc.pid)
        spy = _spy(args, col.proc.pid, f"collector-{code.name}-{time.time():.0f}")
        col.pump(args.seconds)
        cpu, wall = tree_cpu(col.proc.pid) - cpu0, time.monotonic() - t0
        sys_s = _sys(col.proc.pid) - sys0
        samples = _sent(server) - sent0
        if spy is not None:
            spy.wait()
        if profile:
            os.kill(col.proc.pid, 10)  # SIGUSR1: dump
            while not Path(profile + ".done").exists():
                col.pump(0.5)
    finally:
        col.stop()
    return {"code": code.name, "all_streaming_s": round(streaming_s, 2),
            "start_cpu_s": start_cpu,
            "cpu_pct": round(100 * cpu / wall, 2), "host_samples": samples,
            "us_per_hs": round(1e6 * cpu / max(samples, 1), 1),
            "sys_us_per_hs": round(1e6 * sys_s / max(samples, 1), 1)}


def floor_window(args: argparse.Namespace, inv: Path, server: Child) -> dict[str, Any]:
    floor = Child([sys.executable, str(HERE / "bench_fleet.py"), "--inventory", str(inv),
                   "--floor-child"])
    server0 = tree_cpu(server.pid)
    try:
        ev = floor.read(args.start_timeout)
        start = {"all_streaming_s": round(ev["t"] - floor.spawned, 2),
                 "start_cpu_s": {"floor": round(tree_cpu(floor.pid), 2),
                                 "server": round(tree_cpu(server.pid) - server0, 2)}}
        time.sleep(args.settle)
        sent0, cpu0, t0 = _sent(server), tree_cpu(floor.pid), time.monotonic()
        sys0 = _sys(floor.pid)
        spy = _spy(args, floor.pid, f"floor-{time.time():.0f}")
        time.sleep(args.seconds)
        cpu, wall = tree_cpu(floor.pid) - cpu0, time.monotonic() - t0
        sys_s = _sys(floor.pid) - sys0
        samples = _sent(server) - sent0
        if spy is not None:
            spy.wait()
    finally:
        floor.stop()
    return {"cpu_pct": round(100 * cpu / wall, 2), "host_samples": samples,
            "us_per_hs": round(1e6 * cpu / max(samples, 1), 1),
            "sys_us_per_hs": round(1e6 * sys_s / max(samples, 1), 1), **start}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from probes.config.inventory import load_inventory
    from probes.transport.bootstrap import bootstrap_argv
    root = Path(tempfile.mkdtemp(prefix="rw-colcpu-"))
    client, host_key = root / "client", root / "host_ed25519"
    keygen(client)
    keygen(host_key)
    ports = [free_port() for _ in range(min(args.ports, args.hosts))]
    inv = write_fleet(root, args.hosts, ports, host_key, client, args.known_hosts_lines)
    specs = list(load_inventory(inv).hosts)
    argv = bootstrap_argv("python3", specs[0].agent_args())
    agent_args = argv[argv.index("--stdin-eof-exit") + 1:]
    server = Child([sys.executable, str(HERE / "standin_server.py"), "--ports",
                    ",".join(map(str, ports)), "--host-key", str(host_key), "--client-pub",
                    f"{client}.pub", "--templates", "16", "--count", "120",
                    "--args-json", json.dumps(agent_args)])
    env = dict(os.environ, HOME=str(root))
    codes = [Path(c).resolve() for c in args.code.split(",")] if args.code else [REPO]
    out: dict[str, Any] = {"bench": "collector_cpu", "hosts": args.hosts,
                           "seconds": args.seconds, "codes": [c.name for c in codes],
                           "load_start": round(os.getloadavg()[0], 2), "runs": []}
    try:
        server.read(300)
        if args.profile:
            out["profile"] = collector_window(args, specs, env, server, codes[0],
                                              args.profile)
        for r in range(args.rounds):
            order = codes if r % 2 == 0 else codes[::-1]
            floor = floor_window(args, inv, server)
            for code in order:
                got = collector_window(args, specs, env, server, code, None)
                got["ratio_to_floor"] = round(got["us_per_hs"] / floor["us_per_hs"], 2)
                got["floor_us_per_hs"] = floor["us_per_hs"]
                got["floor_cpu_pct"] = floor["cpu_pct"]
                got["floor_sys_us_per_hs"] = floor["sys_us_per_hs"]
                got["floor_start"] = {k: floor[k] for k in ("all_streaming_s", "start_cpu_s")}
                got["load"] = round(os.getloadavg()[0], 2)
                out["runs"].append(got)
                print(json.dumps(got), file=sys.stderr, flush=True)
    finally:
        server.stop()
    out["median"] = {
        c.name: {k: statistics.median(r[k] for r in out["runs"] if r["code"] == c.name)
                 for k in ("us_per_hs", "cpu_pct", "ratio_to_floor", "floor_us_per_hs")}
        for c in codes}
    out["load_end"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--code", help="checkouts to alternate, comma-separated")
    ap.add_argument("--profile", help="pstats file of one profiled window (first checkout)")
    ap.add_argument("--spy", help="a folder: py-spy's collapsed stacks of each window")
    ap.add_argument("--start-timeout", type=float, default=180)
    ap.add_argument("--known-hosts-lines", type=int, default=0,
                    help="pad known_hosts to this many lines (a real fleet's: one a host)")
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
