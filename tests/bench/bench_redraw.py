"""The 1 Hz redraw and Textual's compositor at N busy hosts, per second, no keys.

The real console (``make_app``, ``run_test`` at 160x48) is fed by ``bench_ui``'s simulated
fleet (every host a new sample every second, in 10 batches).  Over a window of
``--seconds`` on the fleet table it reports, per second of wall time: the redraw
(``refresh_view``: wall ms, and its parts ``FleetRows.rows`` and ``FleetTable.watch_hosts``),
the compositor (``Screen._compositor_refresh``: how many, ms), the layouts
(``Screen._refresh_layout``: full reflows and scroll-only ones), which widgets were
refreshed (the dirty set each compositor refresh drew, by widget id or class) and the
whole process's CPU (the fold included).  ``--sort`` picks the order (``worst`` sorts by
findings, ``temp`` by a number every row's sample moves).

``--tree DIR`` runs another checkout's product code with this script (its ``probes``,
``tui``, ``widgets`` and ``themes`` first on the path): before/after pairs in turns.

    python tests/bench/bench_redraw.py [--hosts 1024] [--seconds 20] [--sort inventory]
        [--tree DIR] [--profile FILE] [--detail] [--wall [--metric mem|temp|util|status]]
"""

from __future__ import annotations

import argparse
import faulthandler
import signal
import sys
from pathlib import Path


def _path() -> None:
    here = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(here))
    if "--tree" in sys.argv:
        sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()))


_path()

import asyncio  # noqa: E402
import collections  # noqa: E402
import cProfile  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from textual.screen import Screen  # noqa: E402

from probes.analysis.alerts import AlertPolicy  # noqa: E402
from probes.fleet_state import FleetState  # noqa: E402
from tests.bench.bench_ui import SIZE, SimFleetBackend  # noqa: E402
from tui.app import make_app  # noqa: E402
from tui.console_options import ConsoleOptions  # noqa: E402
from tui.gc_policy import tune_for_streaming  # noqa: E402
from tui.screens.fleet import FleetScreen  # noqa: E402
from tui.views.fleet_rows import FleetRows  # noqa: E402
from widgets._table_paint import PaintedTable  # noqa: E402
from widgets.fleet_table import FleetTable  # noqa: E402


def _label(widget: Any) -> str:
    return f"#{widget.id}" if widget.id else type(widget).__name__


class Spy:
    """Times and counts the redraw, its parts, the compositor and the layouts."""

    def __init__(self, detail: bool = False) -> None:
        self.on = False
        self.detail = detail
        self.t: dict[str, float] = collections.defaultdict(float)
        """Wall seconds by part."""
        self.c: dict[str, float] = collections.defaultdict(float)
        """The UI thread's CPU seconds by part (``thread_time``: less moved by the other
        processes on a shared machine than the wall time)."""
        self.n: dict[str, int] = collections.defaultdict(int)
        self.dirty: collections.Counter[str] = collections.Counter()
        self.tick_ms: list[float] = []
        self.paint_in_tick_s = 0.0

    def wrap(self, owner: Any, name: str, key: str, after: Any = None) -> None:
        plain = getattr(owner, name)
        spy = self

        @functools.wraps(plain)  # Textual counts a watcher's parameters
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not spy.on:
                return plain(*args, **kwargs)
            if after is not None:
                after(args)
            t, c = time.perf_counter(), time.thread_time()
            try:
                return plain(*args, **kwargs)
            finally:
                spy.t[key] += time.perf_counter() - t
                spy.c[key] += time.thread_time() - c
                spy.n[key] += 1

        setattr(owner, name, timed)

    def install(self, app: Any) -> None:
        self.wrap(FleetRows, "rows", "rows")
        self.wrap(FleetTable, "watch_hosts", "watch_hosts")
        self.wrap(PaintedTable, "render_lines", "table_render_lines")
        self.wrap(FleetState, "tick", "fleet_tick")
        self.wrap(FleetScreen, "_lines_of", "screen_lines_of")
        if self.detail:  # per line and per row: their own timing weighs on what they time
            self.wrap(PaintedTable, "_render_line", "table_render_line")
            self.wrap(PaintedTable, "_build_line", "table_build_line")
            self.wrap(FleetRows, "row", "rows_row")
        self.wrap(FleetScreen, "_draw", "screen_draw")

        def dirty(args: tuple[Any, ...]) -> None:
            screen = args[0]
            if screen._layout_required:
                return
            for w in screen._dirty_widgets:
                self.dirty[_label(w)] += 1

        self.wrap(Screen, "_compositor_refresh", "compositor")
        self.wrap(Screen, "_on_timer_update", "timer_update", after=dirty)

        def layout_kind(args: tuple[Any, ...]) -> None:
            screen = args[0]
            if not self.on:
                return
            scroll_only = screen._scroll_required and not screen._layout_required
            self.n["layout_scroll" if scroll_only else "layout_full"] += 1

        self.wrap(Screen, "_refresh_layout", "layout", after=layout_kind)
        redraw = app.refresh_view
        spy = self

        def timed_redraw() -> None:
            if not spy.on:
                redraw()
                return
            t, c = time.perf_counter(), time.thread_time()
            try:
                redraw()
            finally:
                d = time.perf_counter() - t
                spy.t["redraw"] += d
                spy.c["redraw"] += time.thread_time() - c
                spy.n["redraw"] += 1
                spy.tick_ms.append(d * 1000)

        app.refresh_view = timed_redraw


async def run(hosts: int, seconds: float, sort: str, profile: Path | None,
              detail: bool = False, wall: bool = False, metric: str = "mem") -> dict[str, Any]:
    backend = SimFleetBackend(hosts)
    app = make_app(backend, ConsoleOptions(demo=True,
                                           alerts=AlertPolicy(notify=False, bell=False)))
    spy = Spy(detail)
    spy.install(app)
    gc.collect()
    async with app.run_test(size=SIZE) as pilot:
        while any(h.last is None for h in app.fleet.hosts.values()):
            await asyncio.sleep(0.05)
        screen = app.screen
        if sort != "inventory":
            while getattr(screen, "sort_key", sort) != sort:
                await pilot.press("s")
        table = screen.query_one(FleetTable)
        table.focus()
        if wall:
            await pilot.press("w")
            while screen.metric != metric:
                await pilot.press("m")
        await pilot.pause(3.0)
        prof = cProfile.Profile() if profile is not None else None
        spy.on = True
        if prof is not None:
            prof.enable()
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        builds0 = app.fleet_rows.row_builds
        wall_widget = screen.query_one("#fleet-wall")
        lines0 = getattr(wall_widget, "lines_refreshed", 0)
        await asyncio.sleep(seconds)
        builds = app.fleet_rows.row_builds - builds0
        wall_lines = getattr(wall_widget, "lines_refreshed", None)
        wall_lines = None if wall_lines is None else wall_lines - lines0
        elapsed, cpu = time.perf_counter() - t_wall, time.process_time() - t_cpu
        spy.on = False
        if prof is not None:
            prof.disable()
            assert profile is not None
            prof.dump_stats(profile)
        await app.action_quit()
    on_wall = wall
    wall = elapsed
    per_s = {k: round(1000 * v / wall, 2) for k, v in spy.t.items()}
    cpu_s = {k: round(1000 * v / wall, 2) for k, v in spy.c.items()}
    counts = {k: round(v / wall, 2) for k, v in spy.n.items()}
    return {
        "hosts": hosts, "sort": sort, "seconds": round(wall, 1), "on_wall": on_wall,
        "metric": metric if on_wall else None,
        "cpu_pct": round(100 * cpu / wall, 1),
        "ms_per_s": per_s,
        "redraw_plus_compositor_ms_per_s": round(per_s.get("redraw", 0.0)
                                                 + per_s.get("compositor", 0.0), 2),
        "cpu_ms_per_s": cpu_s,
        "redraw_plus_compositor_cpu_ms_per_s": round(cpu_s.get("redraw", 0.0)
                                                     + cpu_s.get("compositor", 0.0), 2),
        "calls_per_s": counts,
        "row_builds_per_s": round(builds / wall, 1),
        "wall_lines_refreshed_per_s": (None if wall_lines is None
                                       else round(wall_lines / wall, 1)),
        "tick_ms_p50": round(statistics.median(spy.tick_ms), 2) if spy.tick_ms else None,
        "dirty_per_s": {k: round(v / wall, 2) for k, v in spy.dirty.most_common(12)},
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--sort", default="inventory")
    p.add_argument("--tree", type=Path, default=None,
                   help="another checkout whose product code runs (before/after pairs)")
    p.add_argument("--profile", type=Path, default=None, help="cProfile of the window")
    p.add_argument("--label", default="")
    p.add_argument("--wall", action="store_true", help="the window on the wall (w)")
    p.add_argument("--metric", default="mem", help="the wall's metric (m): mem, temp, util, status")
    p.add_argument("--detail", action="store_true",
                   help="also time each table line's render and each row's build")
    args = p.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    tune_for_streaming()
    out = asyncio.run(run(args.hosts, args.seconds, args.sort, args.profile, args.detail,
                         args.wall, args.metric))
    out["label"] = args.label or (str(args.tree) if args.tree else "here")
    # which checkout's product code ran (bench_ui once put this one first whatever --tree)
    out["product"] = str(Path(sys.modules[make_app.__module__].__file__ or "").parents[1])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
