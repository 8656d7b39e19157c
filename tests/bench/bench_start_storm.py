"""The UI's share of a connect storm, in process (issue 38 item 5: start-up at 1024 hosts).

``bench_fleet`` may run at most 256 real hosts on the dev VM; this replays what its console's
UI process folds and draws while 1024 hosts connect: the real console (``make_app``,
``run_test`` at 160x48), fed by ``bench_ui``'s simulated hosts paced as the collector's
connect gate lets them through (``--per-step`` hosts every ``--gap`` seconds: 32 per 0.16 s is
~200 hosts a second, the rate of the lead's 1024-host runs).  Each host says ``Connected``,
its hello, its log source and its first sample at once (the stand-in hosts send their first
tick right after the preamble); hosts already streaming tick at 1 Hz meanwhile.

Measured from the app's mount until every host has a sample: the UI thread's CPU, the
redraws (``refresh_view``), the compositor refreshes and the screen layouts; the wall time is
the pacing's, so CPU is the figure.  ``--runs`` runs alternate the variants named by
``--variants`` in one process (``base``: as the console is; others as this file defines).

    python tests/bench/bench_start_storm.py [--hosts 1024] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from probes.wire.events import Connected, Emit
from tests.bench.bench_ui import SIZE, SimFleetBackend


class StormBackend(SimFleetBackend):
    """Hosts connect ``per_step`` at a time, each with its first sample; the connected
    ones tick at 1 Hz meanwhile; then all of them stream at 1 Hz."""

    def __init__(self, hosts: int, per_step: int, gap_s: float) -> None:
        super().__init__(hosts)
        self.per_step, self.gap_s = per_step, gap_s

    async def run(self, emit: Emit) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        seq = [0] * len(self.specs)
        due = [0.0] * len(self.specs)
        n = len(self.specs)

        def sample(i: int) -> None:
            pool = self.pools[i].samples
            emit(self.specs[i].name, replace(pool[(seq[i] + i) % len(pool)], ts=time.time(),
                                             seq=seq[i]))
            seq[i] += 1
            due[i] = loop.time() + 1.0

        for first in range(0, n, self.per_step):
            now = loop.time()
            for i in range(first):
                if due[i] <= now:
                    sample(i)
            for i in range(first, min(n, first + self.per_step)):
                spec, pool = self.specs[i], self.pools[i]
                emit(spec.name, Connected(time.time()))
                emit(spec.name, pool.hello)
                emit(spec.name, pool.logsource)
                sample(i)
            await asyncio.sleep(max(0.0, start + (first // self.per_step + 1) * self.gap_s
                                    - loop.time()))
        while True:
            now = loop.time()
            for i in range(n):
                if due[i] <= now:
                    sample(i)
            await asyncio.sleep(0.05)


def _redraw_1s() -> Any:
    import tui.app

    old = tui.app.REDRAW_MIN_S
    tui.app.REDRAW_MIN_S = 1.0

    def undo() -> None:
        tui.app.REDRAW_MIN_S = old
    return undo


VARIANTS: dict[str, Any] = {"base": None, "redraw1s": _redraw_1s}


async def one(hosts: int, per_step: int, gap_s: float, variant: str) -> dict[str, Any]:
    from textual.screen import Screen

    from probes.analysis.alerts import AlertPolicy
    from tui.app import make_app
    from tui.console_options import ConsoleOptions

    undo = VARIANTS[variant]() if VARIANTS[variant] else None
    counts = {"compositor": 0, "layouts": 0}
    comp, lay = Screen._compositor_refresh, Screen._refresh_layout

    def c(self: Any, *a: Any, **kw: Any) -> Any:
        counts["compositor"] += 1
        return comp(self, *a, **kw)

    def la(self: Any, *a: Any, **kw: Any) -> Any:
        counts["layouts"] += 1
        return lay(self, *a, **kw)

    Screen._compositor_refresh = c  # type: ignore[method-assign]
    Screen._refresh_layout = la  # type: ignore[method-assign]
    try:
        backend = StormBackend(hosts, per_step, gap_s)
        app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(
            notify=False, bell=False)))
        async with app.run_test(size=SIZE):
            cpu0, wall0, r0 = time.thread_time(), time.perf_counter(), app.redraws
            counts.update(compositor=0, layouts=0)
            while any(h.last is None for h in app.fleet.hosts.values()):
                await asyncio.sleep(0.01)
            out = {"variant": variant, "ui_cpu_s": round(time.thread_time() - cpu0, 3),
                   "wall_s": round(time.perf_counter() - wall0, 2),
                   "redraws": app.redraws - r0, **counts}
            await app.action_quit()
    finally:
        Screen._compositor_refresh, Screen._refresh_layout = comp, lay  # type: ignore
        if undo is not None:
            undo()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--per-step", type=int, default=32)
    ap.add_argument("--gap", type=float, default=0.16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--variants", default="base")
    args = ap.parse_args()
    names = args.variants.split(",")
    runs = []
    for r in range(args.runs):
        for v in (names if r % 2 == 0 else names[::-1]):
            got = asyncio.run(one(args.hosts, args.per_step, args.gap, v))
            got["load1"] = round(os.getloadavg()[0], 1)
            print(json.dumps(got), file=sys.stderr, flush=True)
            runs.append(got)
    print(json.dumps({"hosts": args.hosts, "runs": runs, "median_ui_cpu_s": {
        v: statistics.median(r["ui_cpu_s"] for r in runs if r["variant"] == v)
        for v in names}}))


if __name__ == "__main__":
    main()
