"""A 24-hour soak of the demo fleet, time-compressed: the real agent's simulator at 10 s
ticks, on the compact wire the console's sessions ask for, through the console's fleet
state (history, detectors, findings).

It must find the leak, the throttling, the drop-out and the starvation on their hosts and
nothing from the soak detectors anywhere else, with the console's memory bounded.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from probes.config.fleet import HostSpec, demo_fleet
from probes.fleet_state import FleetState
from probes.transport.bootstrap import WIRE_ARGS
from probes.wire.protocol import MessageReader
from tests.conftest import AGENT_SOURCE

SOAK_S = 24 * 3600
INTERVAL_S = 10
DETECTOR_CODES = frozenset({
    "memory-leak", "throttled-while-busy", "gpu-dropout", "link-downgrade-appeared",
    "temp-near-slowdown", "power-pinned", "ecc-increasing", "remap-increasing",
    "data-starvation", "swap-activity"})
EXPECTED = {
    "gpu-a01": set(),
    "gpu-a02": {("memory-leak", 3)},
    "gpu-a03": {("throttled-while-busy", 5), ("temp-near-slowdown", 5)},
    "gpu-a04": set(),  # x8 from boot: a layout finding, not a soak one
    "gpu-b01": {("data-starvation", None)},
    "gpu-b02": {("gpu-dropout", 6)},
    "gpu-b03": set(),  # its collective hangs: an NCCL finding, the GPUs are fine
    "gpu-b04": set(),
}


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


pytestmark = pytest.mark.xdist_group("soak")  # one worker builds the soaked fleet, not each


def _soak_streams(specs: list[HostSpec], into: Path) -> dict[str, Path]:
    """Each host's day of agent output, written by all the agents at once (they are
    independent processes: a 2-core machine runs two), asking for the compact wire the
    console's sessions ask for (``WIRE_ARGS``)."""
    procs: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []
    paths = {}
    for spec in specs:
        args = [sys.executable, "-I", "-", "--simulate", ",".join(spec.simulate), "--seed",
                str(spec.seed), "--hostname", spec.name, "--fast", "--interval",
                str(INTERVAL_S), "--count", str(SOAK_S // INTERVAL_S), *WIRE_ARGS]
        paths[spec.name] = into / f"{spec.name}.out"
        out = paths[spec.name].open("wb")
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out)
        assert proc.stdin is not None
        proc.stdin.write(AGENT_SOURCE)
        proc.stdin.close()
        procs.append((proc, out))
    for proc, out in procs:
        assert proc.wait(timeout=300) == 0
        out.close()
    return paths


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetState, dict[str, float]]:
    specs = demo_fleet(speed=1.0)
    streams = _soak_streams(specs, tmp_path_factory.mktemp("soak"))
    fleet = FleetState(specs)
    figures: dict[str, float] = {}
    rss0 = _rss_mib()
    t0 = time.process_time()
    samples = 0
    for spec in specs:
        reader = MessageReader()
        with streams[spec.name].open("rb") as stream:
            while chunk := stream.read(1 << 16):
                for msg in reader.feed(chunk):
                    fleet.apply(spec.name, msg, 0.0)
                    samples += 1
        assert reader.stats.garbled == 0
        assert reader.compact is not None  # the compact wire, as the console reads it
    figures["console_cpu_s"] = time.process_time() - t0
    figures["items"] = samples
    figures["rss_growth_mib"] = _rss_mib() - rss0
    print(f"\n24 h soak of 8 hosts at {INTERVAL_S} s: {samples} items, "
          f"{figures['console_cpu_s']:.1f} s console CPU "
          f"({1e6 * figures['console_cpu_s'] / samples:.0f} µs per item), RSS grew "
          f"{figures['rss_growth_mib']:.1f} MiB")
    return fleet, figures


@pytest.mark.parametrize("host", sorted(EXPECTED))
def test_the_soak_finds_exactly_what_each_host_has(
        soaked: tuple[FleetState, dict[str, float]], host: str) -> None:
    fleet, _ = soaked
    found = {(f.code, f.gpu) for f in fleet.hosts[host].findings() if f.code in DETECTOR_CODES}
    assert found == EXPECTED[host]


def test_the_leak_is_measured_and_projected(soaked: tuple[FleetState, dict[str, float]]) -> None:
    fleet, _ = soaked
    (leak,) = [f for f in fleet.hosts["gpu-a02"].findings() if f.code == "memory-leak"]
    from probes.agent import LEAK_MIB_PER_H

    assert leak.extra["slope_mib_h"] == pytest.approx(LEAK_MIB_PER_H, rel=0.2)
    assert "GPU3" in leak.summary and "MiB/h" in leak.summary


def test_memory_stays_bounded(soaked: tuple[FleetState, dict[str, float]]) -> None:
    _, figures = soaked
    # 8 hosts × 8 GPUs × 24 h: history is bounded by its tiers, not by the run's length
    # (about 4 MB of columns per host-day at 1 s; at 10 s the raw tier holds less)
    assert figures["rss_growth_mib"] < 64
