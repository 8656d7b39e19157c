"""UI under load: the real console, headless, with N simulated hosts at 1 Hz.

Prints one JSON object and one summary line.  For each host count the app (``make_app``,
``run_test`` at 160x48) is fed by an in-process backend that emits one re-stamped
sample per host per second, spread over the second in batches as real sessions would
arrive.  Samples come from a pool built by the agent's simulator through JSON and the
console's decoder, so the app sees real ``HostSample`` objects; a few hosts run the
``throttle``, ``leak`` and ``link-downgrade`` scenarios so there are findings to show.

Measured per screen (the fleet table, then one host's screen), over the same window:

* console CPU: ``process_time`` / wall, in % of one core.  It includes the bench's own
  emitting (re-stamping a sample is a ``dataclasses.replace``) but not JSON decoding or
  SSH, which ``bench_ssh_fanout.py`` measures (add ~0.9 ms per host-sample for those).
* startup: seconds (and CPU seconds) from the app's start until every host's row on the
  table says ``streaming``, with hosts saying hello ``CONNECT_PER_STEP`` at a time, and the
  redraws that took (a connect storm must be drawn a few times, not once per host).
* key-to-repaint latency: a key is sent the way the terminal driver sends it (a ``Key``
  event posted to the app), the bench waits until the widgets reflect it, then until the
  next compositor refresh that starts after that has finished.  Fleet: ``s`` (next sort)
  and ``w`` (wall toggle); host: ``3``-``6`` (show / hide a panel).

A headless driver writes nothing, so the terminal write is emulated: every screen update
is rendered to its escape sequences as a real driver would (``render_segments``).

The baseline, in the same run: the same app with one host that said hello, sent one
sample and went quiet (0 hosts streaming).

    python tests/bench/bench_ui.py [--quick] [--hosts 256,1024] [--seconds 60]
        [--profile DIR]

``--quick``: 64 and 256 hosts, a few seconds per screen (about half a minute in all).
``--profile DIR``: also write a cProfile of each loaded window to DIR (slower).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# first on the path, unless a bench's ``--tree`` put another checkout before it already
sys.path.insert(sys.path.index(_ROOT) if (_ROOT := str(Path(__file__).resolve().parents[2]))
                in sys.path else 0, _ROOT)

from textual import events
from textual._compositor import CompositorUpdate
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from probes import agent
from probes.analysis.alerts import AlertPolicy
from probes.config.fleet import HostSpec
from probes.sources.base import BackendBase
from probes.wire.events import Connected, Emit
from probes.wire.protocol import decode_line
from probes.wire.samples import Hello, HostSample, LogSourceState
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.gc_policy import tune_for_streaming
from tui.messages import HostChosen
from tui.screens.fleet import FleetScreen
from tui.screens.host import HostScreen
from tui.views.fleet_view import SORT_KEYS
from widgets.fleet_table import FleetTable
from widgets.fleet_wall import FleetWall

T0 = 1_800_000_000.0
SIZE = (160, 48)
POOL = 90
"""Distinct samples per scenario; longer than a window, so a leak only grows."""
SCENARIO_EVERY = 16
"""One host in this many runs a trouble scenario (throttle, leak, link-downgrade in turn)."""
TROUBLE = ("throttle:5", "leak:3", "link-downgrade:2")
SIM_START_S = 3600.0
CONNECT_PER_STEP = 32
"""Hosts that say hello between two turns of the loop at start (the connect gate's width)."""
CONNECT_GAP_S = 0.005
"""The pause between two groups of hellos (a handshake's worth of waiting)."""
"""Simulated time of the pool's first sample: an hour in, the throttling GPU is hot."""


@dataclass(frozen=True)
class HostPool:
    """One scenario's hello, log-source line and distinct samples."""

    hello: Hello
    logsource: LogSourceState
    samples: tuple[HostSample, ...]


def host_pool(scenario: str, seed: int, n: int = POOL) -> HostPool:
    """``n`` distinct samples of one simulated host, through JSON and the console's decoder."""
    sim = agent.Simulator(agent.parse_scenarios(scenario), seed, f"sim-{seed}")
    facts, gpus = sim.facts()
    msg: dict[str, Any] = {"type": "hello", "v": 1, "agent": "bench", "ts": T0, "host": facts,
                           "gpus": gpus, "probes": {}, "simulated": [scenario]}
    msg.update(sim.topology())
    hello = decode_line(json.dumps(msg))
    src = decode_line(json.dumps({"type": "logsource", "v": 1, "ts": T0, "source": "kernel",
                                  "state": "simulated", "via": None,
                                  "detail": "simulated kernel events", "fix": None}))
    assert isinstance(hello, Hello) and isinstance(src, LogSourceState)
    out = []
    for i in range(n):
        t = SIM_START_S + i
        g, host, disks = sim.sample(t)
        line: dict[str, Any] = {"type": "sample", "v": 1, "seq": i, "ts": T0 + i, "gpus": g,
                                "host": host, "disks": disks}
        if i % 30 == 29:
            line["pcie"] = sim.pcie(t)
        s = decode_line(json.dumps(line))
        assert isinstance(s, HostSample)
        out.append(s)
    return HostPool(hello, src, tuple(out))


@functools.cache
def scenario_pool(scenario: str) -> HostPool:
    """One pool per scenario, shared by its hosts (each starts at a different sample)."""
    return host_pool(scenario, 1 + SIM_SCENARIO_SEEDS.index(scenario))


SIM_SCENARIO_SEEDS = ("healthy", *TROUBLE)


def scenario_of(i: int) -> str:
    if i % SCENARIO_EVERY == 1:
        return TROUBLE[(i // SCENARIO_EVERY) % len(TROUBLE)]
    return "healthy"


class SimFleetBackend(BackendBase):
    """``hosts`` simulated hosts streaming at 1 Hz in ``batches`` per second, in-process.

    With ``quiet`` every host sends its hello and one sample and then nothing (the
    baseline: an app with no host streaming).
    """

    def __init__(self, hosts: int, batches: int = 10, quiet: bool = False,
                 connect_per_step: int = CONNECT_PER_STEP) -> None:
        self.specs = [HostSpec(name=f"gpu{i:04d}", simulate=(scenario_of(i),), seed=i + 1,
                               tags=(f"rack-{i // 32:02d}",), expect_gpus=8)
                      for i in range(hosts)]
        self.batches = batches
        self.quiet = quiet
        self.pools = [scenario_pool(s.simulate[0]) for s in self.specs]
        self.emitted = 0
        self.connect_per_step = connect_per_step

    async def run(self, emit: Emit) -> None:
        """Connect every host (a group at a time, as the connect gate lets real sessions
        through), then stream until cancelled."""
        now = time.time()
        for i, (spec, pool) in enumerate(zip(self.specs, self.pools, strict=True)):
            emit(spec.name, Connected(now))
            emit(spec.name, pool.hello)
            emit(spec.name, pool.logsource)
            if i % self.connect_per_step == self.connect_per_step - 1:
                await asyncio.sleep(CONNECT_GAP_S)
        seq = 0
        loop = asyncio.get_running_loop()
        start = loop.time()
        n = len(self.specs)
        while True:
            for b in range(self.batches):
                ts = time.time()
                for i in range(b * n // self.batches, (b + 1) * n // self.batches):
                    samples = self.pools[i].samples
                    s = samples[(seq + i) % len(samples)]
                    emit(self.specs[i].name, replace(s, ts=ts, seq=seq))
                    self.emitted += 1
                await asyncio.sleep(max(0.0, start + seq + (b + 1) / self.batches - loop.time()))
            seq += 1
            if self.quiet:
                await asyncio.Event().wait()


@dataclass
class Repaints:
    """Compositor refreshes as (start, end) ``perf_counter`` times; emulates the terminal.

    While a key is being timed, ``probe`` says whether the widgets show its effect with no
    repaint of theirs still pending; ``hit`` is the end of the first refresh that started
    in that state, the moment the change is on the screen.
    """

    spans: list[tuple[float, float]] = field(default_factory=list)
    terminal_bytes: int = 0
    probe: Callable[[], bool] | None = None
    hit: float | None = None


def instrument(app: RigwatchApp, paints: Repaints) -> None:
    """Time every compositor refresh and render each update as a real driver would."""
    original = Screen._compositor_refresh

    def timed(screen: Screen[Any]) -> None:
        t = time.perf_counter()
        armed = paints.hit is None and paints.probe is not None and paints.probe()
        original(screen)
        end = time.perf_counter()
        paints.spans.append((t, end))
        if armed:
            paints.hit = end

    Screen._compositor_refresh = timed  # type: ignore[method-assign,assignment]
    display = app._display

    def write(screen: Screen[Any], renderable: Any) -> None:
        display(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            paints.terminal_bytes += len(renderable.render_segments(app.console))

    app._display = write  # type: ignore[method-assign]


def settled(*widgets: Widget) -> bool:
    """No repaint or layout of these widgets is still to be asked of their screen.

    (Once asked, the screen's next refresh includes it, give or take one frame when the
    screen's timer event was queued ahead of the request.)
    """
    return not any(w._repaint_required or w._layout_required for w in widgets)


async def press(app: RigwatchApp, paints: Repaints, key: str,
                shown: Callable[[], bool], timeout: float = 10.0) -> float:
    """Seconds from sending ``key`` (as the terminal driver does) until it is on screen."""
    assert app._driver is not None
    paints.hit = None
    paints.probe = shown
    t0 = time.perf_counter()
    app._driver.send_message(events.Key(key, key))
    try:
        while paints.hit is None:
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"key {key!r} not on screen within {timeout} s")
            await asyncio.sleep(0.002)
        return paints.hit - t0
    finally:
        paints.probe = None


def fleet_keys(app: RigwatchApp) -> list[tuple[str, Callable[[], bool]]]:
    """The fleet screen's key cycle: next sort ×3, the wall on and off again.

    Sorting is pressed on the table only: on the wall a new order may look the same.
    """
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    steps: list[tuple[str, Callable[[], bool]]] = []
    sort, wall = screen.sort_key, screen.wall
    for key in ("s", "s", "s", "w", "w") * 7:
        if key == "s":
            sort = SORT_KEYS[(SORT_KEYS.index(sort) + 1) % len(SORT_KEYS)]
            title = None if sort == "inventory" else f"sorted by {sort}"

            def sorted_(want: str = sort, t: str | None = title) -> bool:
                table = screen.query_one(FleetTable)
                crumb = screen.query_one("#fleet-crumb", Static)  # says how rows are chosen
                says = str(crumb.render()) if crumb.display else None
                return (screen.sort_key == want
                        and (says is None if t is None else t in (says or ""))
                        and settled(table, crumb))
            steps.append(("s", sorted_))
        else:
            wall = not wall

            def walled(want: bool = wall) -> bool:
                w, table = screen.query_one(FleetWall), screen.query_one(FleetTable)
                return (screen.wall == want and w.display is want
                        and settled(w, table))
            steps.append(("w", walled))
    return steps


def host_keys(app: RigwatchApp) -> list[tuple[str, Callable[[], bool]]]:
    """The host screen's key cycle: show then hide panels 3 to 6."""
    screen = app.screen
    assert isinstance(screen, HostScreen)
    steps: list[tuple[str, Callable[[], bool]]] = []
    for n, name in ((3, "topology"), (4, "iostat"), (5, "processes"), (6, "host")):
        for on in (True, False):
            def toggled(p: str = name, want: bool = on) -> bool:
                panel = screen.query_one(f"#panel-{p}")
                return panel.display is want and settled(panel)
            steps.append((str(n), toggled))
    return steps


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


async def window(app: RigwatchApp, paints: Repaints, seconds: float, presses: int,
                 keys: list[tuple[str, Callable[[], bool]]],
                 profile: cProfile.Profile | None) -> dict[str, Any]:
    """Run ``seconds`` with ``presses`` key presses spread evenly; CPU and latencies."""
    latencies: list[float] = []
    pressed: list[str] = []
    by_key: dict[str, list[float]] = {}
    backend = app.backend
    assert isinstance(backend, SimFleetBackend)
    emitted0, paints0, bytes0 = backend.emitted, len(paints.spans), paints.terminal_bytes
    rows_of = getattr(app, "fleet_rows", app.fleet)  # the row cache (the fold's, before #37)
    builds0 = getattr(rows_of, "row_builds", None)
    gap = seconds / presses
    if profile is not None:
        profile.enable()
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    for i in range(presses):
        target = t_wall + gap * (i + 0.5)
        await asyncio.sleep(max(0.0, target - time.perf_counter()))
        key, shown = keys[i % len(keys)]
        lat = await press(app, paints, key, shown)
        latencies.append(lat)
        pressed.append(key)
        by_key.setdefault(key, []).append(lat)
    await asyncio.sleep(max(0.0, t_wall + seconds - time.perf_counter()))
    cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    if profile is not None:
        profile.disable()
    spans = paints.spans[paints0:]
    ms = [x * 1000 for x in latencies]
    return {
        "seconds": round(wall, 2),
        "cpu_pct": round(100 * cpu / wall, 1),
        "presses": len(ms),
        "latency_ms_p50": round(statistics.median(ms), 1),
        "latency_ms_p95": round(pct(ms, 0.95), 1),
        "latency_ms_max": round(max(ms), 1),
        "latency_ms_p50_by_key": {k: round(statistics.median(v) * 1000, 1)
                                  for k, v in by_key.items()},
        "slowest": [[k, round(x, 1)]
                    for x, k in sorted(zip(ms, pressed, strict=True), reverse=True)[:3]],
        "host_samples_per_s": round((backend.emitted - emitted0) / wall, 1),
        "repaints_per_s": round(len(spans) / wall, 1),
        "repaint_ms_mean": round(1000 * sum(e - s for s, e in spans) / max(1, len(spans)), 2),
        "terminal_kb_per_s": round((paints.terminal_bytes - bytes0) / wall / 1024, 1),
        "row_builds_per_s": None if builds0 is None
        else round((getattr(rows_of, "row_builds", 0) - builds0) / wall, 1),
    }


async def run_case(hosts: int, seconds: float, presses: int, quiet: bool,
                   profile_dir: Path | None, settle: float) -> dict[str, Any]:
    """One app: warm up, the fleet screen's window, then one host's screen's window."""
    backend = SimFleetBackend(hosts, quiet=quiet)
    app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(notify=False, bell=False)))
    paints = Repaints()
    instrument(app, paints)
    out: dict[str, Any] = {"hosts": hosts, "streaming": not quiet}
    gc.collect()
    async with app.run_test(size=SIZE) as pilot:
        t, cpu0 = time.perf_counter(), time.process_time()
        redraws0 = getattr(app, "redraws", 0)
        table = app.screen.query_one(FleetTable)

        def all_streaming() -> bool:
            """Every host's row on the table says it streams (what the operator waits for)."""
            if table.row_count != hosts:
                return False
            return all(table.get_cell(s.name, "status").plain == "streaming"
                       for s in backend.specs)

        while not all_streaming():
            await asyncio.sleep(0.02)
        out["all_streaming_s"] = round(time.perf_counter() - t, 2)
        out["all_streaming_cpu_s"] = round(time.process_time() - cpu0, 2)
        if hasattr(app, "redraws"):
            out["startup_redraws"] = app.redraws - redraws0
        while any(h.last is None for h in app.fleet.hosts.values()):
            await asyncio.sleep(0.05)
        await pilot.pause(settle)
        out["startup_s"] = round(time.perf_counter() - t, 2)
        assert table.row_count == hosts, (table.row_count, hosts)
        found = sum(len(h.findings()) for h in app.fleet.hosts.values())
        out["findings"] = found
        prof = cProfile.Profile() if profile_dir is not None and not quiet else None
        print(f"  {hosts} hosts: fleet screen {seconds:.0f} s", file=sys.stderr)
        out["fleet"] = await window(app, paints, seconds, presses, fleet_keys(app), prof)
        if prof is not None and profile_dir is not None:
            prof.dump_stats(profile_dir / f"ui_{hosts}_fleet.prof")
        trouble = next((s.name for s in backend.specs if s.simulate[0].startswith("throttle")),
                       backend.specs[0].name)
        app.post_message(HostChosen(trouble))
        while not isinstance(app.screen, HostScreen):
            await asyncio.sleep(0.01)
        await pilot.pause(settle)
        prof = cProfile.Profile() if profile_dir is not None and not quiet else None
        print(f"  {hosts} hosts: host screen {seconds:.0f} s", file=sys.stderr)
        out["host"] = await window(app, paints, seconds, presses, host_keys(app), prof)
        if prof is not None and profile_dir is not None:
            prof.dump_stats(profile_dir / f"ui_{hosts}_host.prof")
        await app.action_quit()
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    hosts = [int(h) for h in args.hosts.split(",")]
    seconds = args.seconds
    presses = args.presses
    base_s = max(1.5, seconds / 2)
    settle = 0.5 if args.quick else 2.0
    print("baseline (one quiet host)", file=sys.stderr)
    cases = {"baseline": await run_case(1, base_s, max(5, presses // 2), True, None,
                                         settle)}
    for n in hosts:
        cases[f"hosts_{n}"] = await run_case(n, seconds, presses, False, args.profile,
                                              settle)
    base = cases["baseline"]
    for n in hosts:
        c = cases[f"hosts_{n}"]
        for screen in ("fleet", "host"):
            w, b = c[screen], base[screen]
            w["cpu_over_baseline"] = round(w["cpu_pct"] / max(b["cpu_pct"], 0.1), 1)
            w["p95_over_baseline"] = round(w["latency_ms_p95"] / max(b["latency_ms_p95"], 0.1),
                                           1)
    return cases


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="64 and 256 hosts, short windows")
    p.add_argument("--hosts", default=None, help="comma-separated host counts")
    p.add_argument("--seconds", type=float, default=None, help="window per screen")
    p.add_argument("--presses", type=int, default=None, help="key presses per window")
    p.add_argument("--profile", type=Path, default=None, help="write cProfile stats here")
    args = p.parse_args()
    args.hosts = args.hosts or ("64,256" if args.quick else "256,1024")
    args.seconds = args.seconds or (2.5 if args.quick else 60.0)
    args.presses = args.presses or (6 if args.quick else 30)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    tune_for_streaming()  # as ``rigwatch`` does before it runs the app
    cases = asyncio.run(main_async(args))
    out = {"bench": "ui", "python": sys.version.split()[0], "machine": platform.machine(),
           "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "quick": args.quick,
           "size": list(SIZE), "seconds_per_screen": args.seconds, "presses": args.presses,
           "hz": 1, "batches_per_s": 10, "gpus_per_host": 8, "gc": list(gc.get_threshold()),
           "total_s": round(time.perf_counter() - t, 1), "results": cases}
    print(json.dumps(out))
    parts = []
    for name, c in cases.items():
        label = "idle" if name == "baseline" else f"{c['hosts']} hosts"
        f, h = c["fleet"], c["host"]
        parts.append(f"{label}: all streaming {c['all_streaming_s']} s, "
                     f"fleet {f['cpu_pct']}% CPU p95 {f['latency_ms_p95']} ms, "
                     f"host {h['cpu_pct']}% p95 {h['latency_ms_p95']} ms")
    print("ui: " + "; ".join(parts))


if __name__ == "__main__":
    main()
