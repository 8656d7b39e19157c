"""Where a key's latency goes at N hosts, with the fold running beside it.

The real console (``make_app``, ``run_test`` at 160x48) is fed by ``bench_ui``'s simulated
fleet (one sample per host per second in 10 batches), folded the way the collector
backend folds a relayed frame: in slices that give the loop a turn once a slice has taken
``FOLD_SLICE_S`` (``FoldSlices``).  Keys are sent as the terminal driver sends them, at
random moments (a fixed seed), and each is timed until the screen shows it (as in
``bench_ui``: the first compositor refresh that starts once the widgets show the key's
effect with nothing left to repaint).  Key kinds: cursor ``down``, ``pagedown``/``pageup``,
``s`` (next sort) and a filter typed (``/``, then ``7`` and ``backspace``, timed as
``type``; ``escape`` closes the line).  ``--cycle fleet`` presses ``bench_fleet``'s cycle
instead (``bench_ui.fleet_keys``: ``s`` three times, then ``w`` to show the wall and ``w``
to hide it, timed as ``w-on`` and ``w-off``), with its probes.

``--cycle host`` opens a throttling host's screen and presses ``HOST_CYCLE`` there: every
panel shown and hidden (``1``-``7``, timed as ``on`` and ``off``), the body scrolled
(``down``/``up``/``pagedown``/``pageup``, timed as ``scroll``: on screen once the body has
moved) and ``tab`` (the next shown panel): the host screen's keys with the fold of N hosts
beside it, without bench_fleet's sshd stand-ins.

Each press's latency is split by what the loop was running between the key and its
repaint: ``fold`` (fold slices), ``tick`` (the 1 Hz redraw, ``refresh_view``), ``layout``
(the compositor's reflows: where widgets go), ``paint`` (compositor refreshes: the key's
own and any other), ``gc`` (collections) and ``own`` (the rest: the key's dispatch and
handler); ``cpu``: the loop thread's CPU time over the same span (the rest of the latency
is waiting: for a core on a loaded machine, or for the screen's next refresh).  Also
reported: the 1 Hz redraw's ``FleetTable.watch_hosts`` per tick (ms, rows
formatted), the redraw's own length and the five slowest presses.

    python tests/bench/bench_fleet_keys.py [--hosts 1024] [--seconds 30] [--presses 60]
        [--cycle keys|fleet|host] [--profile DIR] [--tree DIR] [--label TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
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
# ``--tree DIR``: another checkout's product code first (before/after pairs in turns)
sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve())
                if "--tree" in sys.argv else sys.path[0])

from textual import events
from textual._compositor import Compositor
from textual.screen import Screen
from textual.widgets import Input, Static

from probes.analysis.alerts import AlertPolicy
from probes.sources.collectors import FoldSlices
from probes.wire.events import Connected, Emit
from tests.bench.bench_ui import (
    CONNECT_GAP_S,
    SIZE,
    Repaints,
    SimFleetBackend,
    fleet_keys,
    instrument,
    pct,
    settled,
)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.gc_policy import tune_for_streaming
from tui.messages import HostChosen
from tui.screens.fleet import FleetScreen
from tui.screens.host import PANELS as HOST_PANEL_IDS
from tui.screens.host import HostScreen
from tui.views.fleet_view import SORT_KEYS, filter_rows
from widgets.fleet_table import FleetDetail, FleetTable

Span = tuple[float, float]
KINDS = ("fold", "tick", "layout", "paint", "gc")
CYCLE = ("down", "down", "pagedown", "s", "up", "slash", "7", "backspace", "escape",
         "pageup", "s", "up")
EDGE = {("down", False): "up", ("pagedown", False): "pageup", ("up", True): "down",
        ("pageup", True): "pagedown"}
"""A move the cursor cannot make at the last row (False) or the first (True), and the one
pressed instead."""
HOST_CYCLE = ("3", "down", "3", "4", "pagedown", "4", "5", "tab", "up", "5", "6", "pageup",
              "6", "1", "down", "1", "2", "tab", "2", "7", "pagedown", "7", "tab", "up")
"""The host screen's keys: each panel on and off again (memory and thermals, shown at
start, off and on), scrolls between them and ``tab``; every panel ends as it started."""
SCROLLS = {"down": 1, "up": -1, "pagedown": 1, "pageup": -1}


class SlicedFleetBackend(SimFleetBackend):
    """``bench_ui``'s fleet, each batch folded in slices as a collector's frame is."""

    def __init__(self, hosts: int, spans: dict[str, list[Span]]) -> None:
        super().__init__(hosts)
        self.spans = spans

    async def run(self, emit: Emit) -> None:
        now = time.time()
        for i, (spec, pool) in enumerate(zip(self.specs, self.pools, strict=True)):
            emit(spec.name, Connected(now))
            emit(spec.name, pool.hello)
            emit(spec.name, pool.logsource)
            if i % self.connect_per_step == self.connect_per_step - 1:
                await asyncio.sleep(CONNECT_GAP_S)
        seq, n = 0, len(self.specs)
        loop = asyncio.get_running_loop()
        start = loop.time()
        folds = self.spans["fold"]
        while True:
            for b in range(self.batches):
                ts = time.time()
                slices = FoldSlices()
                t = time.perf_counter()
                for i in range(b * n // self.batches, (b + 1) * n // self.batches):
                    samples = self.pools[i].samples
                    emit(self.specs[i].name,
                         replace(samples[(seq + i) % len(samples)], ts=ts, seq=seq))
                    self.emitted += 1
                    if slices.due():
                        folds.append((t, time.perf_counter()))
                        await slices.turn()
                        t = time.perf_counter()
                folds.append((t, time.perf_counter()))
                await asyncio.sleep(max(0.0, start + seq + (b + 1) / self.batches - loop.time()))
            seq += 1


async def press(app: RigwatchApp, paints: Repaints, key: str,
                shown: Callable[[], bool], timeout: float = 10.0) -> float:
    """Seconds from sending ``key`` as the terminal driver does (a printable key with its
    character, a named one without) until it is on screen (``bench_ui.press``)."""
    assert app._driver is not None
    paints.hit = None
    paints.probe = shown
    t0 = time.perf_counter()
    char = {"slash": "/"}.get(key, key if len(key) == 1 else None)
    app._driver.send_message(events.Key(key, char))
    try:
        while paints.hit is None:
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"key {key!r} not on screen within {timeout} s")
            await asyncio.sleep(0.002)
        return paints.hit - t0
    finally:
        paints.probe = None


MOVES = {"down": "action_cursor_down", "up": "action_cursor_up",
         "pagedown": "action_page_down", "pageup": "action_page_up"}
MOVED = dict.fromkeys(MOVES, 0)
"""Cursor moves handled by the table, by key (``count_moves``)."""


def count_moves() -> None:
    for key, name in MOVES.items():
        plain = getattr(FleetTable, name)

        def counted(table: FleetTable, _plain: Any = plain, _key: str = key) -> None:
            _plain(table)
            MOVED[_key] += 1

        setattr(FleetTable, name, counted)


def overlap(spans: list[Span], a: float, b: float) -> float:
    return sum(max(0.0, min(e, b) - max(s, a)) for s, e in spans if e > a and s < b)


def spy(app: RigwatchApp, spans: dict[str, list[Span]],
        ticks: list[tuple[float, float, int]]) -> None:
    """Record the 1 Hz redraws, the compositor's reflows and refreshes, collections and each tick's
    ``watch_hosts`` (ms, rows formatted)."""
    redraw = app.refresh_view
    in_tick = [False]

    def timed_redraw() -> None:
        t = time.perf_counter()
        in_tick[0] = True
        try:
            redraw()
        finally:
            in_tick[0] = False
            spans["tick"].append((t, time.perf_counter()))

    app.refresh_view = timed_redraw  # type: ignore[method-assign]
    watch = FleetTable.watch_hosts

    def timed_watch(table: FleetTable) -> None:
        t, n = time.perf_counter(), table.cells_formatted
        watch(table)
        if in_tick[0]:
            ticks.append((t, time.perf_counter() - t, table.cells_formatted - n))

    FleetTable.watch_hosts = timed_watch  # type: ignore[method-assign,assignment]
    composite = Screen._compositor_refresh

    def timed_paint(screen: Screen[Any]) -> None:
        t = time.perf_counter()
        composite(screen)
        spans["paint"].append((t, time.perf_counter()))

    Screen._compositor_refresh = timed_paint  # type: ignore[method-assign,assignment]
    for name in ("reflow", "reflow_visible"):
        plain = getattr(Compositor, name)

        def timed_reflow(compositor: Compositor, *args: Any, _plain: Any = plain) -> Any:
            t = time.perf_counter()
            try:
                return _plain(compositor, *args)
            finally:
                spans["layout"].append((t, time.perf_counter()))

        setattr(Compositor, name, timed_reflow)
    gc_start = [0.0]

    def collected(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            spans["gc"].append((gc_start[0], time.perf_counter()))

    gc.callbacks.append(collected)


def screen_of(app: RigwatchApp) -> FleetScreen:
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return screen


def probe(app: RigwatchApp, key: str) -> Callable[[], bool]:
    """Whether the screen's widgets show ``key``'s effect (read before it is sent)."""
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    table, detail = screen.query_one(FleetTable), screen.query_one(FleetDetail)
    crumb = screen.query_one("#fleet-crumb", Static)
    box = screen.query_one("#fleet-filter", Input)
    if key in MOVES:
        # counted by the table's action: a tick may move the cursor's row meanwhile (in a
        # sort order by a figure, the cursor's host moves as its figure does)
        done = MOVED[key]
        return lambda: MOVED[key] > done and settled(table, detail)
    if key == "s":
        sort = SORT_KEYS[(SORT_KEYS.index(screen.sort_key) + 1) % len(SORT_KEYS)]
        return lambda: screen.sort_key == sort and settled(table, crumb)
    if key == "slash":
        return lambda: box.has_focus and settled(box)
    if key == "escape":
        return lambda: table.has_focus and not screen.query_text and settled(table, box)
    text = box.value + key if key != "backspace" else box.value[:-1]
    # the screen's kept words (``RowWords``, equal to ``words``): the probe runs inside the
    # timed compositor refresh, and each row's words afresh (~7 ms at 1024 rows, once or
    # twice a key) were counted as the key's paint
    return lambda: (screen.query_text == text
                    and table.row_count == len(filter_rows(screen._rows, text, screen._words))
                    and settled(table, crumb))


TABS = [0]
"""``tab`` presses handled by the host screen (``count_tabs``)."""


def count_tabs() -> None:
    plain = HostScreen.action_next_panel

    def counted(screen: HostScreen) -> None:
        plain(screen)
        TABS[0] += 1

    HostScreen.action_next_panel = counted  # type: ignore[method-assign,assignment]


def host_probe(app: RigwatchApp, key: str) -> tuple[str, str, Callable[[], bool]] | None:
    """The key pressed (a scroll the body cannot make swapped for its opposite), its kind,
    and whether the host screen shows its effect (read before it is sent); None when the
    key would change nothing on screen (a scroll or tab with all of the body in view)."""
    screen = app.screen
    assert isinstance(screen, HostScreen)
    body = screen.query_one("#host-body")
    y = body.scroll_y
    if key == "tab":
        shown = [p for p in HOST_PANEL_IDS if p in screen.shown]
        ys = [screen.query_one(f"#panel-{p}").virtual_region.y for p in shown]
        to = next((t for t in ys if t > y + 1), ys[0] if ys else y)
        if min(to, body.max_scroll_y) != y:
            done = TABS[0]
            return key, "tab", lambda: TABS[0] > done and body.scroll_y != y and settled(body)
        # the body is where tab would take it: nothing would change on screen
        key = "pageup" if y > 0 else "pagedown"
    if key in SCROLLS:
        if body.max_scroll_y <= 0:
            return None
        if (SCROLLS[key] > 0 and y >= body.max_scroll_y) or (SCROLLS[key] < 0 and y <= 0):
            key = {"down": "up", "up": "down", "pagedown": "pageup", "pageup": "pagedown"}[key]
        step = SCROLLS[key]
        # on screen once the body has moved its way (a page scroll may be animated: its
        # first frame is the key's answer)
        return key, "scroll", lambda: (body.scroll_y - y) * step > 0 and settled(body)
    name = screen.query_one(f"#panel-{HOST_PANEL_IDS[int(key) - 1]}")
    want = not name.display
    hint = screen.query_one("#panel-keys")
    return key, "on" if want else "off", \
        lambda: name.display is want and settled(name, hint, body)


async def run(hosts: int, seconds: float, presses: int, seed: int,
              cycle: str = "keys",
              profiles: dict[str, cProfile.Profile] | None = None) -> dict[str, Any]:
    spans: dict[str, list[Span]] = {k: [] for k in KINDS}
    ticks: list[tuple[float, float, int]] = []
    backend = SlicedFleetBackend(hosts, spans)
    app = make_app(backend, ConsoleOptions(demo=True,
                                           alerts=AlertPolicy(notify=False, bell=False)))
    paints = Repaints()
    instrument(app, paints)
    spy(app, spans, ticks)
    count_moves()
    count_tabs()
    rng = random.Random(seed)
    out: dict[str, Any] = {"hosts": hosts}
    async with app.run_test(size=SIZE) as pilot:
        t0 = time.perf_counter()
        while any(h.last is None for h in app.fleet.hosts.values()):
            await asyncio.sleep(0.05)
        await pilot.pause(2.0)
        out["startup_s"] = round(time.perf_counter() - t0, 1)
        table = app.screen.query_one(FleetTable)
        table.focus()
        if cycle == "host":
            # a throttling host (as bench_ui's host window): its panels have something to say
            trouble = next((s.name for s in backend.specs
                            if s.simulate[0].startswith("throttle")), backend.specs[0].name)
            app.post_message(HostChosen(trouble))
            while not isinstance(app.screen, HostScreen):
                await asyncio.sleep(0.01)
            await pilot.pause(1.0)
        await pilot.pause(0.2)
        presses_out: list[dict[str, Any]] = []
        tick0 = len(ticks)
        t_cpu, t_wall = time.process_time(), time.perf_counter()
        gap = seconds / presses
        steps: list[tuple[str, Callable[[], bool]]] = []
        turn = 0  # the host cycle's place (keys that would change nothing are passed over)
        for i in range(presses):
            await asyncio.sleep(gap * rng.uniform(0.5, 1.5))
            if cycle == "fleet":
                # bench_fleet's cycle (``bench_ui.fleet_keys``): s ×3, the wall on, off;
                # its probes expect the orders from the state they were made in
                if not steps or i % len(steps) == 0:
                    steps = fleet_keys(app)
                key, shown = steps[i % len(steps)]
                kind = key if key != "w" else ("w-on" if not screen_of(app).wall else "w-off")
            elif cycle == "host":
                while (step := host_probe(app, HOST_CYCLE[turn % len(HOST_CYCLE)])) is None:
                    turn += 1
                turn += 1
                key, kind, shown = step
            else:
                key = CYCLE[i % len(CYCLE)]
                if table.cursor_row >= table.row_count - 1 or table.cursor_row == 0:
                    key = EDGE.get((key, table.cursor_row == 0), key)
                shown = probe(app, key)
                kind = "type" if key in ("7", "backspace") else key
            prof = profiles.setdefault(kind, cProfile.Profile()) if profiles is not None else None
            if prof is not None:
                prof.enable()
            a, a_cpu = time.perf_counter(), time.thread_time()
            lat = await press(app, paints, key, shown)
            # the loop thread's CPU from the key until the probe saw it on screen (to a 2 ms
            # poll): against the latency, how much of it the process ran, not waited for
            # a core (the 2-core VM's other loads)
            key_cpu = time.thread_time() - a_cpu
            if prof is not None:
                prof.disable()
            b = a + lat
            split = {k: overlap(spans[k], a, b) for k in KINDS}
            split["own"] = max(0.0, lat - sum(split[k] for k in KINDS))
            presses_out.append({"key": kind,
                                "ms": lat * 1000,
                                **{k: v * 1000 for k, v in split.items()},
                                "cpu": key_cpu * 1000})
        cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
        window = ticks[tick0:]
        await app.action_quit()
    out["cpu_pct"] = round(100 * cpu / wall, 1)
    out["slowest"] = [{k: round(v, 1) if isinstance(v, float) else v for k, v in p.items()}
                      for p in sorted(presses_out, key=lambda p: -p["ms"])[:5]]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for p in presses_out:
        by_kind.setdefault(p["key"], []).append(p)
    out["keys"] = {}
    for kind, ps in [("all", presses_out), *by_kind.items()]:
        ms = [p["ms"] for p in ps]
        out["keys"][kind] = {
            "n": len(ms), "p50": round(statistics.median(ms), 1),
            "p95": round(pct(ms, 0.95), 1), "max": round(max(ms), 1),
            **{f"{k}_mean": round(statistics.fmean(p[k] for p in ps), 1)
               for k in (*KINDS, "own", "cpu")}}
    out["watch_hosts_per_tick"] = {
        "ticks": len(window),
        "ms_p50": round(statistics.median(d for _, d, _ in window) * 1000, 2) if window else None,
        "ms_mean": round(statistics.fmean(d for _, d, _ in window) * 1000, 2) if window else None,
        "rows_formatted_mean": round(statistics.fmean(n for _, _, n in window), 1)
        if window else None}
    tick_ms = [(e - s) * 1000 for s, e in spans["tick"][-len(window) or None:]]
    out["tick_ms_p50"] = round(statistics.median(tick_ms), 1) if tick_ms else None
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--hosts", type=int, default=1024)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--presses", type=int, default=60)
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--cycle", choices=("keys", "fleet", "host"), default="keys",
                   help="keys: cursor, page, sort and filter keys; fleet: bench_fleet's "
                        "cycle (s, s, s, w, w: three sorts, the wall on and off); host: "
                        "a host's screen (panels 1-7 on and off, scrolls, tab)")
    p.add_argument("--profile", type=Path, default=None,
                   help="a folder: cProfile of each key kind's presses (key to screen), "
                        "KIND.prof")
    p.add_argument("--tree", type=Path, default=None,
                   help="another checkout whose product code runs (before/after pairs)")
    p.add_argument("--label", default="")
    args = p.parse_args()
    tune_for_streaming()
    profiles: dict[str, cProfile.Profile] | None = {} if args.profile else None
    out = asyncio.run(run(args.hosts, args.seconds, args.presses, args.seed, args.cycle,
                          profiles))
    if profiles is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        for kind, prof in profiles.items():
            prof.dump_stats(args.profile / f"{kind}.prof")
    out["label"] = args.label or (str(args.tree) if args.tree else "here")
    out["product"] = str(Path(sys.modules[make_app.__module__].__file__ or "").parents[1])
    print(json.dumps(out))
    keys = out["keys"]
    print(f"{args.cycle} keys: " + "; ".join(
        f"{k} p50 {v['p50']} p95 {v['p95']} ms (fold {v['fold_mean']} tick {v['tick_mean']} "
        f"paint {v['paint_mean']} gc {v['gc_mean']} own {v['own_mean']})"
        for k, v in keys.items()) + f"; watch_hosts/tick {out['watch_hosts_per_tick']}")


if __name__ == "__main__":
    main()
