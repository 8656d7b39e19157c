"""Fixed, realistic fleet data and a fake backend for the console's Pilot and snapshot tests.

Not a conftest: the TUI tests import it explicitly, so shared fixtures added to
``conftest.py`` by the core's tests stay independent of it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from probes.agent import AGENT_VERSION, PROTOCOL_VERSION, Simulator, parse_scenarios
from probes.config.fleet import HostSpec
from probes.sources.base import BackendBase
from probes.wire.events import Connected, Emit, SessionItem
from probes.wire.protocol import decode_line
from probes.wire.samples import (
    GpuInfo,
    GpuSample,
    Hello,
    HostFacts,
    HostSample,
    HostStats,
    LogEvent,
)
from tui.app import RigwatchApp
from tui.screens.fleet import FleetScreen
from widgets.fleet_table import FleetTable

T0 = 1_700_000_000.0
"""Agent timestamp of the first fake sample (2023-11-14 22:13:20 UTC)."""
NOW = T0 + 60.0
"""The frozen console clock while the fake items are applied."""
H100_MIB = 81559.0
SAMPLES = 30
HOSTS = ("gpu-t01", "gpu-t02", "gpu-t03")


class FrozenClock:
    """A wall clock that only moves when a test moves it."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeBackend(BackendBase):
    """Emits a fixed list of items, then keeps the stream open so tests can push more."""

    def __init__(self, specs: list[HostSpec], items: list[tuple[str, SessionItem]]) -> None:
        self.specs = specs
        self.items = items
        self.emit: Emit | None = None
        self.started = asyncio.Event()

    async def run(self, emit: Emit) -> None:
        """Play the items, then wait until the app cancels the worker."""
        self.emit = emit
        for host, item in self.items:
            emit(host, item)
        self.started.set()
        await asyncio.Event().wait()

    def push(self, host: str, item: SessionItem) -> None:
        """Emit one more item, as a live session would."""
        assert self.emit is not None, "backend not running yet"
        self.emit(host, item)


def hello(host: str, gpus: int = 8) -> Hello:
    """An 8× H100 SXM host as its agent would introduce it."""
    facts = HostFacts(
        hostname=host, kernel="5.15.0-105-generic", os_name="Ubuntu 22.04.4 LTS",
        python="3.10.12", driver_version="550.54.15", cuda_version="12.4",
        cpu_model="AMD EPYC 9454 48-Core Processor", cpu_cores_logical=192,
        cpu_cores_physical=96, mem_total_bytes=2 * 2**40, swap_total_bytes=0,
        gpus=tuple(GpuInfo(i, f"GPU-{host}-{i:02d}", f"00000000:{0x18 + 0x10 * i:02X}:00.0",
                           "NVIDIA H100 80GB HBM3", H100_MIB) for i in range(gpus)),
    )
    return Hello(ts=T0, protocol=1, agent_version="0.1.0", facts=facts)


def gpu(index: int, step: int, *, trouble: bool = False, leak_mib_s: float = 0.0) -> GpuSample:
    """A busy training GPU; ``trouble`` makes it hot, throttled and on a narrowed link."""
    return GpuSample(
        index=index, uuid=f"GPU-{index:02d}",
        mem_used_mib=60_000.0 + 512.0 * index + leak_mib_s * step,
        mem_total_mib=H100_MIB,
        util_pct=97.0 - index, mem_util_pct=41.0, temp_c=88.0 if trouble else 61.0 + index,
        power_w=640.0 - 5 * index, power_limit_w=700.0,
        sm_clock_mhz=1_275.0 if trouble else 1_980.0, sm_clock_max_mhz=1_980.0,
        clock_reasons=("sw_thermal_slowdown",) if trouble else (),
        pcie_gen=5, pcie_gen_max=5, pcie_width=8 if trouble else 16, pcie_width_max=16,
    )


def sample(host: str, step: int, *, trouble_gpu: int | None = None,
           leak_gpu: int | None = None) -> HostSample:
    """One tick of one host."""
    gpus = tuple(gpu(i, step, trouble=i == trouble_gpu, leak_mib_s=40.0 if i == leak_gpu else 0.0)
                 for i in range(8))
    stats = HostStats(cpu_pct=35.0, load1=40.1, load5=38.0, load15=37.5,
                      mem_used_bytes=600 * 2**30, mem_total_bytes=2 * 2**40)
    return HostSample(ts=T0 + step, seq=step, gpus=gpus, host=stats)


def fleet_items() -> list[tuple[str, SessionItem]]:
    """Three hosts: healthy, one troubled GPU plus an Xid, and one leaking GPU."""
    items: list[tuple[str, SessionItem]] = []
    for host in HOSTS:
        items += [(host, Connected(T0)), (host, hello(host))]
    for step in range(SAMPLES):
        items.append(("gpu-t01", sample("gpu-t01", step)))
        items.append(("gpu-t02", sample("gpu-t02", step, trouble_gpu=3)))
        items.append(("gpu-t03", sample("gpu-t03", step, leak_gpu=5)))
    items.append(("gpu-t02", LogEvent(
        T0 + 20, "kernel",
        "NVRM: Xid (PCI:0000:48:00): 79, pid=0, GPU has fallen off the bus.")))
    return items


def fleet_specs() -> list[HostSpec]:
    """The inventory of the three fake hosts."""
    return [HostSpec(name=h, tags=("rack-t",), expect_gpus=8) for h in HOSTS]


def fake_fleet() -> tuple[FakeBackend, FrozenClock]:
    """A fresh backend and clock for one app."""
    return FakeBackend(fleet_specs(), fleet_items()), FrozenClock()



TALL = [f"gpu-{i:03d}" for i in range(60)]
"""Sixty hosts: more rows than a 120x30 fleet screen shows, so some are off screen."""


def tall_fleet(first: Callable[[str], SessionItem] | None = None,
               ) -> tuple[FakeBackend, FrozenClock]:
    """``TALL``'s hosts connected, each with a hello and its first sample (``first(host)``;
    default ``sample(host, 0)``), the clock a second after."""
    items: list[tuple[str, SessionItem]] = []
    for h in TALL:
        items += [(h, Connected(T0)), (h, hello(h)), (h, first(h) if first else sample(h, 0))]
    return FakeBackend([HostSpec(name=h, expect_gpus=8) for h in TALL], items), FrozenClock(T0 + 1)


async def wait_until(pilot: Pilot[None], cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Let the app run until ``cond`` holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout_s} s")
        await pilot.pause(0.02)


async def settled(pilot: Pilot[None], backend: FakeBackend) -> None:
    """Wait until the fake items are applied and every host is on the fleet table."""
    app = pilot.app
    assert isinstance(app, RigwatchApp)
    await backend.started.wait()
    await wait_until(pilot, lambda: all(
        h.last is not None and h.last.seq == SAMPLES - 1 for h in app.fleet.hosts.values()))
    app.refresh_view()
    await wait_until(pilot, lambda: app.screen.query_one(FleetTable).row_count == len(HOSTS))



async def tall_fleet_shown(pilot: Pilot[None], backend: FakeBackend) -> FleetScreen:
    """Wait until ``tall_fleet``'s hosts are all rows of the fleet screen; that screen."""
    app = pilot.app
    await backend.started.wait()
    await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen)
                     and app.screen.query_one(FleetTable).row_count == len(TALL))
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return screen


SIM_STEP_S = 60.0
"""Simulated seconds between samples of ``sim_items``: the demo's one minute per tick."""


def sim_items(host: str, scenarios: str, *, seed: int, minutes: int) -> list[SessionItem]:
    """A fixed simulated stream: the agent's own simulator, through the wire format.

    Messages are built as the agent builds them (hello with topology, then events and
    samples), with timestamps from ``T0`` instead of the wall clock, and decoded by the
    console's decoder, so every panel gets real-shaped data that is the same on every run.
    """
    sim = Simulator(parse_scenarios(scenarios), seed, host)
    facts, gpus = sim.facts()
    hello_msg: dict[str, object] = {
        "type": "hello", "v": PROTOCOL_VERSION, "agent": AGENT_VERSION, "ts": T0,
        "host": facts, "gpus": gpus, "probes": {"simulator": {"available": True}},
        "simulated": [s["name"] for s in sim.scen], "clock": sim.clock(1.0)}
    hello_msg.update(sim.topology())
    messages: list[dict[str, object]] = [hello_msg]
    for seq in range(minutes + 1):
        t = seq * SIM_STEP_S
        sim.timestamp(T0, t)  # as the agent does before asking for the tick's events
        messages += [{"type": "event", "v": PROTOCOL_VERSION, "ts": T0 + t, "source": source,
                      "line": line} for source, line in sim.events(t)]
        g, h, disks = sim.sample(t)
        fabric = sim.fabric(t)
        if fabric is not None:  # as the agent sends it: just before the tick's sample
            messages.append({"type": "fabric", "v": PROTOCOL_VERSION, "ts": T0 + t, **fabric})
        messages.append({"type": "sample", "v": PROTOCOL_VERSION, "seq": seq, "ts": T0 + t,
                         "gpus": g, "host": h, "disks": disks})
    items: list[SessionItem] = [Connected(T0)]
    for m in messages:
        item = decode_line(json.dumps(m))
        assert item is not None, m
        items.append(item)
    return items


def sim_fleet(specs: list[tuple[str, str]], minutes: int = 45) -> tuple[FakeBackend, FrozenClock]:
    """A backend playing ``sim_items`` for each (host, scenarios), and a clock frozen at
    the last sample."""
    items = [(host, item) for i, (host, scen) in enumerate(specs)
             for item in sim_items(host, scen, seed=i + 1, minutes=minutes)]
    hosts = [HostSpec(name=h, tags=("rack-s",), expect_gpus=8) for h, _ in specs]
    return FakeBackend(hosts, items), FrozenClock(T0 + minutes * SIM_STEP_S + 1.0)
