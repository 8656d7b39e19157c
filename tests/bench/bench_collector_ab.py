"""Two (or more) versions of a collector's code, alternating inside ONE collector process.

``bench_collector_cpu`` compares whole collector processes one after another; on a shared
2-core VM a window moves ±10-15 % with the neighbours' load, more than most changes to a
collector's per-tick path.  Here one collector (real asyncssh sessions against
``standin_server.py``, the job frame the console sends, its frames read and dropped as by a
console that keeps up) runs with a wrapper that can swap its code while it runs: the
variants file (``--variants FILE``) defines ``VARIANTS``, a list of ``(name, install)``
where ``install()`` patches the modules (class attributes: every live reader and relay
takes the patch at its next call) and returns the function that undoes it.  The bench
switches variant every ``--slice`` seconds (SIGUSR2 to the collector), cycling through
them, and at each switch reads the collector's CPU time from ``/proc/PID/schedstat``
(nanoseconds, user+sys of the whole process) and the samples the server sent.  The same
connections, the same streams, the same neighbours' load, seconds apart: each cycle is one
pair (or tuple), and the report gives each variant's CPU per host-sample over all its
slices, each cycle's ratio to the first variant, and in how many cycles it was lower.

Slices are whole seconds of a stream that ticks at 1 Hz, so each holds about the same
ticks; the server's count per slice normalises what is left.  The first slice after each
switch is measured too (a patch takes effect at once).

    python tests/bench/bench_collector_ab.py --variants tests/bench/ab_relay_s11.py
        [--hosts 256] [--slice 2] [--cycles 20]
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
from tests.bench.bench_fleet import Child, write_fleet  # noqa: E402
from tests.support.sshd import free_port, keygen  # noqa: E402

HERE = Path(__file__).resolve().parent

WRAPPER = r"""
import importlib.util, os, signal, sys
spec = importlib.util.spec_from_file_location("ab_variants", os.environ["RW_AB_VARIANTS"])
variants = importlib.util.module_from_spec(spec)
spec.loader.exec_module(variants)
state = {"at": 0, "undo": None}
def switch(*_):
    if state["undo"] is not None:
        state["undo"]()
    state["at"] = (state["at"] + 1) % len(variants.VARIANTS)
    state["undo"] = variants.VARIANTS[state["at"]][1]()
state["undo"] = variants.VARIANTS[0][1]()
signal.signal(signal.SIGUSR2, switch)
sys.argv = ["collector_worker", *sys.argv[1:]]
from probes.transport.collector_worker import main
main()
"""


class ABCollector(Collector):
    """``Collector`` started under the switching wrapper."""

    def __init__(self, specs: list[Any], env: dict[str, str]) -> None:
        import subprocess

        from probes.sources.collectors import FLUSH_S
        from probes.transport.collector_wire import CollectorJob, frame
        from probes.transport.sessions import MAX_CONCURRENT_CONNECTS
        self.proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(os.getpid())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     cwd=REPO)
        self.spawned = time.monotonic()
        self.job = CollectorJob(tuple(specs), MAX_CONCURRENT_CONNECTS, FLUSH_S, "collector 1")
        self._frame = frame
        self.buf = b""
        self.streaming: set[int] = set()


def cpu_ns(pid: int) -> int:
    """The process's time on a CPU so far, in nanoseconds (all its threads)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total


def _sent(server: Child) -> int:
    server.say("stat")
    return int(server.read(10)["sent"])


def variant_names(path: str) -> list[str]:
    import importlib.util
    spec = importlib.util.spec_from_file_location("ab_variants", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [name for name, _ in mod.VARIANTS]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from probes.config.inventory import load_inventory
    from probes.transport.bootstrap import bootstrap_argv
    names = variant_names(args.variants)
    root = Path(tempfile.mkdtemp(prefix="rw-colab-"))
    client, host_key = root / "client", root / "host_ed25519"
    keygen(client)
    keygen(host_key)
    ports = [free_port() for _ in range(min(args.ports, args.hosts))]
    inv = write_fleet(root, args.hosts, ports, host_key, client)
    specs = list(load_inventory(inv).hosts)
    argv = bootstrap_argv("python3", specs[0].agent_args())
    agent_args = argv[argv.index("--stdin-eof-exit") + 1:]
    server = Child([sys.executable, str(HERE / "standin_server.py"), "--ports",
                    ",".join(map(str, ports)), "--host-key", str(host_key), "--client-pub",
                    f"{client}.pub", "--templates", "16", "--count", "120",
                    "--args-json", json.dumps(agent_args),
                    *(["--spread"] if args.spread else [])])
    env = dict(os.environ, HOME=str(root), PYTHONPATH=str(REPO),
               RW_AB_VARIANTS=str(Path(args.variants).resolve()))
    slices: list[tuple[str, int, int]] = []
    try:
        server.read(300)
        col = ABCollector(specs, env)
        try:
            col.start()
            while len(col.streaming) < len(specs):
                if time.monotonic() - col.spawned > args.start_timeout:
                    raise TimeoutError(f"{len(col.streaming)} of {len(specs)} hosts streaming")
                col.pump(0.5)
            col.pump(args.settle)
            pid = col.proc.pid
            # the wrapper starts in variant 0; each switch moves to the next
            at = 0
            sent0, cpu0 = _sent(server), cpu_ns(pid)
            for _ in range(args.cycles * len(names)):
                col.pump(args.slice)
                sent1, cpu1 = _sent(server), cpu_ns(pid)
                slices.append((names[at], sent1 - sent0, cpu1 - cpu0))
                os.kill(pid, 12)  # SIGUSR2: the next variant
                at = (at + 1) % len(names)
                sent0, cpu0 = _sent(server), cpu_ns(pid)
        finally:
            col.stop()
    finally:
        server.stop()
    return report(args, names, slices)


def report(args: argparse.Namespace, names: list[str],
           slices: list[tuple[str, int, int]]) -> dict[str, Any]:
    per = {n: [(hs, ns) for v, hs, ns in slices if v == n] for n in names}
    out: dict[str, Any] = {
        "bench": "collector_ab", "hosts": args.hosts, "slice_s": args.slice,
        "spread": args.spread,
        "cycles": args.cycles, "load1": round(os.getloadavg()[0], 2),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "us_per_hs": {n: round(sum(ns for _, ns in v) / 1e3 / max(1, sum(hs for hs, _ in v)), 2)
                      for n, v in per.items()}}
    base = names[0]
    cycle_us = {n: [ns / 1e3 / max(hs, 1) for hs, ns in v] for n, v in per.items()}
    for n in names[1:]:
        ratios = [b / a for a, b in zip(cycle_us[base], cycle_us[n], strict=False)]
        out[f"{n}_vs_{base}"] = {
            "median_ratio": round(statistics.median(ratios), 3),
            "lower_in": f"{sum(r < 1 for r in ratios)} of {len(ratios)}"}
    out["cycles_us_per_hs"] = {n: [round(x, 1) for x in v] for n, v in cycle_us.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", required=True, help="a file defining VARIANTS")
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--slice", type=float, default=2.0)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--spread", action="store_true",
                    help="the hosts tick at evenly spread points of the second (as a fleet "
                         "that connected over seconds does), not clustered as they connected")
    ap.add_argument("--start-timeout", type=float, default=180)
    print(json.dumps(run(ap.parse_args())))


if __name__ == "__main__":
    main()
