"""What one fleet-table line costs to build (issue 38, the UI): ms per line, per screen.

A mounted ``FleetTable`` (the app's stylesheet, 200x48, headless) holds N streaming hosts.
Each pass asks the table for a screen of 46 data lines that it has not built before, timed
(``perf_counter``) around the line renders alone, not the compositor:

* ``tick``: the rows on screen with a new power figure each (what the 1 Hz redraw brings:
  every other cell as it was drawn);
* ``page``: rows never drawn before (what a page key shows), cell caches warm from other rows.

Reported: the median over ``--reps`` passes, per screen and per line, and the fastest pass.

    python tests/bench/bench_table_line.py [--hosts 1024] [--reps 30] [--mode tick|page]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.bench_table_paint import PaintApp, line
from widgets.fleet_table import FleetLine, FleetTable

SCREEN = 46


async def run(n: int, reps: int, mode: str) -> list[float]:
    app = PaintApp()
    async with app.run_test(size=(200, 48)) as pilot:
        table = app.query_one(FleetTable)
        table.hosts = tuple(line(i, 5000.0 + i % 1000) for i in range(n))
        await pilot.pause()
        await pilot.pause(0.3)
        base, width = table.rich_style, table.size.width
        rows = list(range(SCREEN))
        bump = [0]
        out: list[float] = []
        for rep in range(reps + 3):
            await pilot.pause()
            if mode == "page":
                start = SCREEN * (rep % (n // SCREEN - 1) + 1)
                rows = list(range(start, start + SCREEN))
            else:
                lines = list(table.hosts)
                for i in rows:
                    bump[0] += 1
                    power = 6000.0 + bump[0] % 40000
                    lines[i] = FleetLine(replace(lines[i].row, power_w=power))
                table.hosts = tuple(lines)
            t = time.perf_counter()
            for r in rows:
                table._render_line(r + 1, 0, width, base)
            if rep >= 3:  # the first passes warm the caches
                out.append(time.perf_counter() - t)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--reps", type=int, default=18)
    p.add_argument("--mode", choices=("tick", "page"), default="tick")
    args = p.parse_args()
    if args.mode == "page":
        args.reps = min(args.reps, args.hosts // SCREEN - 2)  # each row drawn once
    times = asyncio.run(run(args.hosts, args.reps, args.mode))
    screen = 1000 * statistics.median(times)
    print(json.dumps({"bench": "table_line", "hosts": args.hosts, "mode": args.mode,
                      "reps": len(times), "screen_ms_median": round(screen, 2),
                      "line_ms_median": round(screen / SCREEN, 3),
                      "screen_ms_min": round(1000 * min(times), 2)}))


if __name__ == "__main__":
    main()
