"""The simulator: deterministic for a seed, and each scenario shows its trouble."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from probes.agent import LEAK_MIB_PER_H, SIM_BUS_IDS, Simulator, parse_scenarios
from tests.conftest import AGENT_SOURCE


def stream(args: list[str]) -> list[dict]:
    proc = subprocess.run([sys.executable, "-I", "-", *args], input=AGENT_SOURCE,
                          capture_output=True, check=True, timeout=60)
    return [json.loads(x) for x in proc.stdout.decode().splitlines()]


def strip_ts(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "ts"} for m in lines]


def run_sim(scenarios: str, seconds: float, step: float = 30.0, seed: int = 1) -> list[tuple]:
    """In-process: [(t, gpus, host, disks, events)] every ``step`` simulated seconds."""
    sim = Simulator(parse_scenarios(scenarios), seed, "h")
    out = []
    for i in range(int(seconds / step) + 1):
        t = i * step
        events = sim.events(t)
        gpus, host, disks = sim.sample(t)
        out.append((t, gpus, host, disks, events))
    return out


def test_same_seed_same_stream_other_seed_differs() -> None:
    args = ["--simulate", "leak,throttle,xid79@300", "--interval", "60", "--fast",
            "--count", "20"]
    a = strip_ts(stream([*args, "--seed", "7"]))
    b = strip_ts(stream([*args, "--seed", "7"]))
    c = strip_ts(stream([*args, "--seed", "8"]))
    assert a == b
    assert a != c
    assert len([m for m in a if m["type"] == "sample"]) == 20


def test_leak_grows_on_one_gpu_only() -> None:
    ticks = run_sim("leak:3", seconds=6 * 3600, step=60)
    first, last = ticks[0][1], ticks[-1][1]
    grown = last[3]["mem_used_mib"] - first[3]["mem_used_mib"]
    assert grown == pytest.approx(6 * LEAK_MIB_PER_H, abs=2.0)
    # a leak that fills an 80 GB card in about a day and a half: what a soak must catch
    assert 256 <= LEAK_MIB_PER_H <= 2000
    for i in (0, 1, 2, 4, 5, 6, 7):
        assert last[i]["mem_used_mib"] == first[i]["mem_used_mib"]
    series = [t[1][3]["mem_used_mib"] for t in ticks]
    assert series == sorted(series)


def test_leak_stops_at_full() -> None:
    ticks = run_sim("leak:0", seconds=1000 * 3600, step=3600)
    g = ticks[-1][1][0]
    assert g["mem_total_mib"] - 4 <= g["mem_used_mib"] < g["mem_total_mib"]


def test_xid79_gpu_disappears_and_kernel_line_appears_once() -> None:
    ticks = run_sim("xid79:6@120", seconds=600, step=30)
    before = [t for t in ticks if t[0] < 120]
    after = [t for t in ticks if t[0] >= 120]
    assert all(len(t[1]) == 8 for t in before)
    assert all(len(t[1]) == 7 and 6 not in [g["index"] for g in t[1]] for t in after)
    lines = [line for t in ticks for src, line in t[4] if src == "kernel"]
    xid = [x for x in lines if "Xid" in x]
    assert len(xid) == 1
    assert ": 79," in xid[0] and SIM_BUS_IDS[6][:-2] in xid[0]


def test_throttle_heats_slows_and_names_the_reason() -> None:
    ticks = run_sim("throttle:5", seconds=3600, step=60)
    start, end = ticks[0][1][5], ticks[-1][1][5]
    assert start["clock_reasons"] == [] and start["sm_clock_mhz"] == start["sm_clock_max_mhz"]
    assert end["temp_c"] >= 85
    assert "sw_thermal_slowdown" in end["clock_reasons"]
    assert end["sm_clock_mhz"] < 0.8 * end["sm_clock_max_mhz"]
    assert ticks[-1][1][4]["clock_reasons"] == []


def test_nccl_timeout_writes_a_watchdog_line_to_a_job_log() -> None:
    ticks = run_sim("nccl-timeout@300", seconds=600, step=60)
    events = [(t[0], src, line) for t in ticks for src, line in t[4]]
    assert len(events) == 1
    t, src, line = events[0]
    assert t == 300 and src.startswith("job:")
    assert "Watchdog caught collective operation timeout" in line and "Timeout(ms)=600000" in line


def test_disk_saturated_and_gpus_starve_in_a_sawtooth() -> None:
    ticks = run_sim("disk-saturated", seconds=150, step=1)
    assert all(t[3]["nvme0n1"]["util"] >= 95 for t in ticks)
    assert all(t[3]["nvme0n1"]["aqu_sz"] > 10 for t in ticks)
    utils = [t[1][0]["util_pct"] for t in ticks]
    assert min(utils) < 10 and max(utils) > 90
    assert sum(1 for u in utils if u < 10) >= 55  # 60 s of every 150
    # sampled as the demo samples (every 60 simulated seconds), 2 of every 5 wait
    coarse = [t[1][0]["util_pct"] for t in run_sim("disk-saturated", seconds=600, step=60)]
    assert sum(1 for u in coarse if u < 10) >= 4, coarse


def test_link_downgrade_trains_one_gpu_at_x8() -> None:
    gpus = run_sim("link-downgrade:2", seconds=0)[0][1]
    assert [g["pcie_width"] for g in gpus] == [16, 16, 8, 16, 16, 16, 16, 16]
    assert all(g["pcie_width_max"] == 16 for g in gpus)


def test_ib_port_down_takes_the_port_beside_its_gpu_down_at_once() -> None:
    lines = stream(["--simulate", "ib-port-down:5@600", "--interval", "60", "--fast",
                    "--count", "15"])
    fabric = [m for m in lines if m["type"] == "fabric"]
    assert [p["state"] for p in fabric[0]["ports"]] == ["ACTIVE"] * 8
    assert len(fabric[0]["nvlink"]) == 8 and len(fabric[0]["nvlink"][0]["links"]) == 18
    seq_before = [m["seq"] for m in lines if m["type"] == "sample"]
    at = lines.index(fabric[1])
    assert lines[at + 1]["type"] == "sample" and lines[at + 1]["seq"] == 10  # t = 600 s
    down = fabric[1]["ports"][5]
    assert (down["hca"], down["state"], down["phys_state"], down["errors"]) == (
        "mlx5_5", "DOWN", "Polling", {"link_downed": 1})
    assert len(fabric) == 2 and seq_before[-1] == 14  # no change after: nothing more


def test_healthy_host_has_h100_like_numbers() -> None:
    gpus, host, disks = run_sim("healthy", seconds=0)[0][1:4]
    assert len(gpus) == 8
    for g in gpus:
        assert 80000 < g["mem_total_mib"] < 82000
        assert g["mem_used_mib"] < g["mem_total_mib"]
        assert 85 <= g["util_pct"] <= 100
        assert 300 < g["power_w"] <= g["power_limit_w"] == 700
        assert g["clock_reasons"] == []
    assert host["mem_used_bytes"] < host["mem_total_bytes"]
    assert disks["nvme0n1"]["util"] < 50


@pytest.mark.parametrize("bad", ["leek", "leak:9", "xid79@soon", "leak:-1"])
def test_bad_scenarios_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="scenario"):
        parse_scenarios(bad)


def test_sim_history_sends_the_run_so_far_at_once_ending_now() -> None:
    import time

    before = time.time()
    msgs = stream(["--simulate", "xid79:6@600", "--speed", "60", "--sim-history", "2700",
                   "--fast", "--count", "2"])
    samples = [m for m in msgs if m["type"] == "sample"]
    # 45 simulated minutes at 60 s per sample, then the 2 live ones
    assert len(samples) == 45 + 2
    assert [m["seq"] for m in samples] == list(range(47))
    assert samples[1]["ts"] - samples[0]["ts"] == pytest.approx(60.0)
    # the backlog's clock ends at the start time, so the live samples carry on from now
    assert samples[45]["ts"] == pytest.approx(before, abs=5.0)
    # the Xid of the scenario fell inside the history: already in the stream
    xid = [m for m in msgs if m["type"] == "event" and "Xid" in m["line"]]
    assert len(xid) == 1 and xid[0]["ts"] < before
    assert len(samples[-1]["gpus"]) == 7


def test_sim_history_needs_the_simulator() -> None:
    proc = subprocess.run([sys.executable, "-I", "-", "--once", "--sim-history", "60"],
                          input=AGENT_SOURCE, capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"--sim-history needs --simulate" in proc.stderr
