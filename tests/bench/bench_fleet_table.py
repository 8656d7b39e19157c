"""What one pass of the fleet table costs at N rows, the table now against DataTable's own
column measure (the table before issue 38 item 3), in the same run.

Each pass is timed on a mounted table (160x48, headless) from handing it the new rows until
it has settled (its deferred work on idle and the repaint included): CPU seconds
(``process_time``), and the cell widths taken (DataTable's ``measure`` and the table's own
``cell_width``, a count that does not depend on the machine).  The passes, in order:

* ``fill``: N hosts appear, connecting, each with its reason (widths vary);
* ``narrower``: every host streams and its last column gets a shorter text of its own width
  (what a connect storm does to the table; DataTable re-measured the whole column for each);
* ``tick``: every host's numbers change (fixed-width columns only);
* ``filter``: all but one host in 25 are hidden; ``unfilter``: all come back.

Then storms through the real console (``bench_ui``'s simulated hosts, in-process, 32 at a
time as the connect gate lets them, 50 ms apart): every host connects, every host's stream
drops (each with a reason of its own width), every host reconnects.  For each: seconds and
CPU until every row says so, and the redraws that took (``RigwatchApp.redraws``; the console
draws at most 4 times a second, a host's news waits for the next).

    python tests/bench/bench_fleet_table.py [--quick] [--hosts 256,1024] [--no-storm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import textual.widgets._data_table as data_table
from bench_ui import CONNECT_PER_STEP, SIZE, SimFleetBackend
from textual.app import App, ComposeResult
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey, ColumnKey, RowKey

import tui.screens.fleet as fleet_screen
import widgets._styled_table as styled_table
from probes.analysis.alerts import AlertPolicy
from probes.fleet_state import FleetRow, HostStatus
from probes.wire.events import Connected, Disconnected, Emit
from tests.support.tui_fakes import FrozenClock
from tui.app import make_app
from tui.console_options import ConsoleOptions
from tui.gc_policy import tune_for_streaming
from widgets._styled_table import ColumnSpec, KeyedRow
from widgets.fleet_table import FleetLine, FleetTable
from widgets.fleet_wall import FleetWall


class DataTableWidths(FleetTable):
    """The fleet table as it was before: every changed cell of an auto-width column queued
    for DataTable's re-measure, every new row measured on idle, rows removed one by one."""

    def _write_cell(self, key: str, col: ColumnSpec, text: Any) -> None:
        super()._write_cell(key, col, text)
        if col.width is None:
            self._updated_cells.add(CellKey(RowKey(key), ColumnKey(col.key)))
            self._require_update_dimensions = True

    def _fit_auto_widths(self, rows: Sequence[KeyedRow]) -> None:
        pass

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        DataTable._update_dimensions(self, new_rows)

    def _remove_rows(self, keys: list[str]) -> None:
        for key in keys:
            self.remove_row(key)
            self._cells.pop(key, None)


TABLES: dict[str, type[FleetTable]] = {"before": DataTableWidths, "now": FleetTable}


def line(i: int, status: HostStatus, why: str, temp: float) -> FleetLine:
    return FleetLine(FleetRow(
        name=f"gpu{i:04d}", tags=(f"rack-{i // 32:02d}",), status=status, stale_s=None,
        gpus_ok=8, gpus_expected=8, max_temp_c=temp, mem_used_pct=40.0 + i % 50,
        mean_util_pct=97.0, power_w=5600.0, findings=1 if why else 0, worst=None,
        worst_summary=why or None, simulated=False))


def passes(n: int) -> list[tuple[str, tuple[FleetLine, ...]]]:
    connecting = tuple(line(i, HostStatus.CONNECTING,
                            f"connecting: ssh handshake {'·' * (i % 40)}", 0.0)
                       for i in range(n))
    narrower = tuple(line(i, HostStatus.STREAMING, f"GPU{i % 8} {'x' * (i % 23)}", 60.0)
                     for i in range(n))
    tick = tuple(line(i, HostStatus.STREAMING, f"GPU{i % 8} {'x' * (i % 23)}", 61.0 + i % 9)
                 for i in range(n))
    return [("fill", connecting), ("narrower", narrower), ("tick", tick),
            ("filter", tick[::25]), ("unfilter", tick)]


@contextmanager
def counting(owners: list[tuple[Any, str]]) -> Iterator[list[int]]:
    """Count calls of each ``(module, function)`` while the block runs."""
    calls = [0]
    saved = [(owner, name, getattr(owner, name)) for owner, name in owners]
    for owner, name, plain in saved:
        def counted(*a: Any, _plain: Callable[..., Any] = plain, **k: Any) -> Any:
            calls[0] += 1
            return _plain(*a, **k)
        setattr(owner, name, counted)
    try:
        yield calls
    finally:
        for owner, name, plain in saved:
            setattr(owner, name, plain)


class TableApp(App[None]):
    def __init__(self, table: type[FleetTable]) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table(id="fleet-table")


async def table_passes(n: int, table: type[FleetTable]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    app = TableApp(table)
    async with app.run_test(size=SIZE) as pilot:
        widget = app.query_one(FleetTable)
        for name, hosts in passes(n):
            with counting([(data_table, "measure"), (styled_table, "cell_width")]) as calls:
                cpu, wall = time.process_time(), time.perf_counter()
                widget.hosts = hosts
                await pilot.pause()
                await pilot.pause()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            assert widget.row_count == len(hosts)
            out[name] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "measures": calls[0]}
    return out


class StormBackend(SimFleetBackend):
    """``bench_ui``'s fleet, driven by the bench: storms of connects and drops, ``per_step``
    hosts at a time (the connect gate's width) with a handshake's wait between groups."""

    def __init__(self, hosts: int, per_step: int = CONNECT_PER_STEP, gap_s: float = 0.05):
        super().__init__(hosts)
        self.per_step, self.gap_s = per_step, gap_s
        self.emit: Emit | None = None
        self.started = asyncio.Event()
        self.clock = FrozenClock(time.time())
        """The console's clock, held: a host whose one sample ages while a slow table
        catches up must not turn stale."""

    async def run(self, emit: Emit) -> None:
        self.emit = emit
        self.started.set()
        await asyncio.Event().wait()

    async def storm(self, kind: str) -> None:
        """``connect``: each host connects, says hello and sends a sample; ``drop``: each
        host's stream ends with a reason of its own (of many widths)."""
        assert self.emit is not None
        for i, (spec, pool) in enumerate(zip(self.specs, self.pools, strict=True)):
            now = self.clock()
            if kind == "connect":
                self.emit(spec.name, Connected(now))
                self.emit(spec.name, pool.hello)
                self.emit(spec.name, pool.logsource)
                self.emit(spec.name, replace(pool.samples[i % len(pool.samples)], ts=now))
            else:
                self.emit(spec.name, Disconnected(
                    now, f"connection lost: read timed out after {1 + i % 97} s", 30.0))
            if i % self.per_step == self.per_step - 1:
                await asyncio.sleep(self.gap_s)


async def storms(n: int, table: type[FleetTable]) -> dict[str, dict[str, float]]:
    """A connect storm, every host dropping, and the reconnect storm: for each, seconds and
    CPU until every row says so, and the redraws in between."""
    backend = StormBackend(n)
    fleet_screen.FleetTable = table  # type: ignore[misc]
    out: dict[str, dict[str, float]] = {}
    try:
        app = make_app(backend, ConsoleOptions(
            demo=True, alerts=AlertPolicy(notify=False, bell=False)), clock=backend.clock)
        async with app.run_test(size=SIZE) as pilot:
            widget = app.screen.query_one(FleetTable)
            assert isinstance(widget, table) and not app.screen.query_one(FleetWall).display
            await backend.started.wait()
            for kind, word in (("connect", "streaming"), ("drop", "down"),
                               ("reconnect", "streaming")):
                cpu, wall, redraws = time.process_time(), time.perf_counter(), app.redraws
                await backend.storm("drop" if kind == "drop" else "connect")
                while not (widget.row_count == n and all(
                        widget.get_cell(s.name, "status").plain == word
                        for s in backend.specs)):
                    await asyncio.sleep(0.02)
                await pilot.pause()
                out[kind] = {"all_shown_s": round(time.perf_counter() - wall, 2),
                             "cpu_s": round(time.process_time() - cpu, 2),
                             "redraws": app.redraws - redraws}
            await app.action_quit()
    finally:
        fleet_screen.FleetTable = FleetTable  # type: ignore[misc]
    return out


async def main_async(hosts: list[int], with_storm: bool) -> dict[str, Any]:
    await table_passes(32, FleetTable)  # warm: imports, styles, caches
    results: dict[str, Any] = {}
    for n in hosts:
        for kind, table in TABLES.items():
            print(f"  {n} rows, {kind}", file=sys.stderr)
            case = {"passes": await table_passes(n, table)}
            if with_storm:
                case["storms"] = await storms(n, table)
            results[f"{kind}_{n}"] = case
        before, now = results[f"before_{n}"], results[f"now_{n}"]
        now["cpu_before_over_now"] = {
            name: round(before["passes"][name]["cpu_s"] / max(p["cpu_s"], 1e-3), 1)
            for name, p in now["passes"].items()}
    return results


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="64 and 128 rows")
    p.add_argument("--hosts", default=None, help="comma-separated row counts")
    p.add_argument("--no-storm", action="store_true", help="table passes only")
    args = p.parse_args()
    hosts = [int(h) for h in (args.hosts or ("64,128" if args.quick else "256,1024"))
             .split(",")]
    t = time.perf_counter()
    tune_for_streaming()
    results = asyncio.run(main_async(hosts, not args.no_storm))
    out = {"bench": "fleet_table", "python": sys.version.split()[0],
           "machine": platform.machine(), "cores": os.cpu_count(),
           "load": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d"), "quick": args.quick,
           "size": list(SIZE), "total_s": round(time.perf_counter() - t, 1),
           "results": results}
    print(json.dumps(out))
    parts = []
    for n in hosts:
        before, now = results[f"before_{n}"]["passes"], results[f"now_{n}"]["passes"]
        parts.append(f"{n} rows narrower pass {before['narrower']['cpu_s']} s → "
                     f"{now['narrower']['cpu_s']} s CPU")
    print("fleet table: " + "; ".join(parts))


if __name__ == "__main__":
    main()
