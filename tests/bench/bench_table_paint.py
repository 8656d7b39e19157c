"""What the fleet table's repaint costs when k of its N rows changed (issue 38, the UI).

A mounted ``FleetTable`` and ``FleetDetail`` (160x48, headless, the app's stylesheet) hold N
streaming hosts; each pass hands the table the same hosts with k of them changed (a new
power figure, as a 1 Hz tick brings: one not drawn before, except in the ``k=N`` passes, which
go round 4,000 figures) and waits until the screen has
repainted.  Reported per pass kind, over ``--reps`` passes: median CPU ms (``process_time``
from handing over the rows until the repaint is done), the table lines Textual asked the
table for (dirty lines) and the lines the table built anew (cache misses).  Those two
counts do not depend on the machine.

Pass kinds: ``k=0`` (nothing changed), ``k=1``, ``k=8`` and ``k=all on screen`` (rows on
screen), ``k=N`` (every host), ``sort`` (the rows in a new order, rotated by more than a
screen each time, so no row lands where it was drawn before), ``cursor`` (the cursor one
row down, then up), ``resort`` (a numeric order as a tick moves it: four pairs of rows on
screen a few places apart swap, their cells unchanged), ``resort+8`` (the same and 8 rows on
screen with a new power figure).

``--tree DIR`` runs another checkout's product code (its ``probes``, ``tui``, ``widgets``
and ``themes`` first on the path) with this script: before/after pairs in turns.

    python tests/bench/bench_table_paint.py [--hosts 1024] [--reps 15] [--tree DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
if "--tree" in sys.argv:
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()))

from textual._styles_cache import StylesCache
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from probes.fleet_state import FleetRow, HostStatus
from themes import CSS_PATH, DEFAULT_THEME, THEMES, fallback_variables
from widgets.fleet_table import FleetDetail, FleetLine, FleetTable

SIZE = (160, 48)


def line(i: int, power: float) -> FleetLine:
    return FleetLine(FleetRow(
        name=f"gpu{i:04d}", tags=(f"rack-{i // 32:02d}",), status=HostStatus.STREAMING,
        stale_s=None, gpus_ok=8, gpus_expected=8, max_temp_c=60.0 + i % 9,
        mem_used_pct=40.0 + i % 50, mean_util_pct=90.0 + i % 7, power_w=power, findings=i % 3,
        worst=None, worst_summary=f"GPU{i % 8} {'x' * (i % 23)}" if i % 3 else None,
        simulated=False))


class PaintApp(App[None]):
    """The table and the detail line under it, with the app's stylesheet and theme."""

    CSS_PATH = CSS_PATH

    def __init__(self) -> None:
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return fallback_variables()

    def compose(self) -> ComposeResult:
        yield FleetTable(id="fleet-table")
        yield FleetDetail(id="fleet-detail")


class Counts:
    """Lines Textual asked the table for, and lines the table built: its own count where it
    keeps one (``lines_built``), else DataTable's row renders (the table before)."""

    def __init__(self, table: FleetTable) -> None:
        self.asked = 0
        self.rows_rendered = 0
        self.table = table
        plain_cache = StylesCache.render_line
        plain_row = DataTable._render_line_in_row

        def render_line(cache: StylesCache, *a: Any, **k: Any) -> Any:
            if getattr(a[7], "__self__", None) is table:  # render_content_line
                self.asked += 1
            return plain_cache(cache, *a, **k)

        def render_row(dt: DataTable[Any], *a: Any, **k: Any) -> Any:
            if dt is table and a[0] is not dt._header_row_key:
                self.rows_rendered += 1
            return plain_row(dt, *a, **k)

        StylesCache.render_line = render_line  # type: ignore[method-assign]
        DataTable._render_line_in_row = render_row  # type: ignore[method-assign]

    @property
    def built(self) -> int:
        own = getattr(self.table, "lines_built", None)
        return own if isinstance(own, int) else self.rows_rendered


async def run(n: int, reps: int) -> dict[str, Any]:
    app = PaintApp()
    out: dict[str, Any] = {}
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(FleetTable)
        detail = app.query_one(FleetDetail)
        power = [5000.0 + i % 1000 for i in range(n)]
        table.hosts = tuple(line(i, power[i]) for i in range(n))
        await pilot.pause()
        await pilot.pause(0.3)
        counts = Counts(table)
        on_screen = len(table.visible_keys(0)) - 1  # the header line is not a row
        bump = [0]

        def changed(k: int) -> Callable[[], None]:
            def step() -> None:
                lines = list(table.hosts)
                for i in range(k):
                    bump[0] += 1  # 4,000 figures from 6,000 W up: none seen before k=N
                    power_w = 6000.0 + bump[0] % 4000
                    lines[i] = FleetLine(replace(lines[i].row, power_w=power_w))
                table.hosts = tuple(lines)
                detail.line = table.line_at_cursor()
            return step

        flip = [False]
        turn = [0]

        def sort() -> None:
            # a new order every time (each row lands where it was not drawn before)
            turn[0] += on_screen + 1
            hosts = sorted(table.hosts, key=lambda h: h.row.name)
            cut = turn[0] % n
            table.hosts = tuple(hosts[cut:] + hosts[:cut])
            detail.line = table.line_at_cursor()

        rng = random.Random(1)

        def resort(k: int) -> Callable[[], None]:
            def step() -> None:
                lines = list(table.hosts)
                top = int(table.scroll_y)
                for _ in range(4):  # rows a few places apart change places
                    a = top + rng.randrange(0, on_screen - 6)
                    b = a + rng.randrange(1, 6)
                    lines[a], lines[b] = lines[b], lines[a]
                for _ in range(k):
                    at = top + rng.randrange(0, on_screen)
                    bump[0] += 1
                    lines[at] = FleetLine(replace(lines[at].row,
                                                  power_w=6000.0 + bump[0] % 4000))
                table.hosts = tuple(lines)
                detail.line = table.line_at_cursor()
            return step

        def cursor() -> None:
            flip[0] = not flip[0]
            table.move_cursor(row=table.cursor_row + (1 if flip[0] else -1))

        kinds: list[tuple[str, Callable[[], None]]] = [
            ("k=0", changed(0)), ("k=1", changed(1)), ("k=8", changed(8)),
            (f"k={on_screen} (on screen)", changed(on_screen)), (f"k={n}", changed(n)),
            ("sort", sort), ("cursor", cursor), ("resort", resort(0)),
            ("resort+8", resort(8))]
        for name, step in kinds:
            cpu: list[float] = []
            asked0, built0 = counts.asked, counts.built
            for _ in range(reps):
                await pilot.pause()
                t = time.process_time()
                step()
                await pilot.pause()
                await pilot.pause()
                cpu.append(time.process_time() - t)
            out[name] = {"cpu_ms_median": round(1000 * statistics.median(cpu), 2),
                         "cpu_ms_max": round(1000 * max(cpu), 2),
                         "lines_asked": round((counts.asked - asked0) / reps, 1),
                         "lines_built": round((counts.built - built0) / reps, 1)}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--tree", type=Path, default=None,
                   help="another checkout whose product code runs (before/after pairs)")
    p.add_argument("--label", default="")
    args = p.parse_args()
    result = asyncio.run(run(args.hosts, args.reps))
    product = str(Path(sys.modules[FleetTable.__module__].__file__ or "").parents[1])
    print(json.dumps({"bench": "table_paint", "hosts": args.hosts, "reps": args.reps,
                      "size": list(SIZE), "label": args.label, "product": product,
                      "results": result}))
    for name, r in result.items():
        print(f"{name:>22}: {r['cpu_ms_median']:7.2f} ms (max {r['cpu_ms_max']:.1f}), "
              f"lines asked {r['lines_asked']}, built {r['lines_built']}")


if __name__ == "__main__":
    main()
