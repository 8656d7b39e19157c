"""The agent's deeper probes: per-GPU watchdog, memory health, processes, sysfs PCIe chains,
NICs, NUMA, dataset devices, and iostat figures checked by hand on this machine's disks."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.agent.pci import block_device_of, link_speed_gts
from probes.agent.proc import disk_rates, parse_diskstats
from tests.agent.test_agent import by_type, run_agent
from tests.conftest import REPO

FAKE_NVML = str(REPO / "tests" / "data" / "fake_pynvml")


def _nvml(flags: str, args: list[str]) -> list[dict]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": FAKE_NVML, "FAKE_NVML": flags}
    lines, _, _ = run_agent(args, env=env, isolated=False)
    return lines


class TestNvmlDepth:
    def test_one_hung_gpu_is_unresponsive_and_the_others_still_report(self) -> None:
        lines = _nvml("hangutil1", ["--interval", "0.3", "--count", "4", "--gpu-deadline", "0.5"])
        samples = by_type(lines, "sample")
        assert len(samples) == 4
        for s in samples:
            states = [g["state"] for g in s["gpus"]]
            assert states[0] == states[2] == states[3] == "ok"
            assert states[1] == "unresponsive"
            assert s["gpus"][0]["mem_used_mib"] == 1000.0
            assert s["host"]["cpu_pct"] is not None
        errors = [e["message"] for e in by_type(lines, "error")]
        assert any(m.startswith("GPU 1: GPU probe timed out") for m in errors)

    def test_memory_health_fields_and_absent_is_none(self) -> None:
        gpus = by_type(_nvml("memtrouble1", ["--once"]), "sample")[0]["gpus"]
        bad, good = gpus[1], gpus[0]
        assert bad["ecc_uncorrected_volatile"] == 3 and bad["ecc_corrected_aggregate"] == 12
        assert bad["remap_uncorrectable"] == 2 and bad["remap_failure"] is True
        assert bad["retired_pages_pending"] is True
        assert good["retired_pages_pending"] is None  # NotSupported on this GPU: absent
        assert good["remap_failure"] is False
        assert good["pcie_replay"] == 7 and good["pcie_tx_kbs"] == 1200
        assert gpus[2]["nvlink_up"] == 17 and gpus[2]["nvlink_links"] == 18
        assert good["pstate"] == "P0" and good["persistence"] is True

    def test_processes_are_named_from_proc(self) -> None:
        gpus = by_type(_nvml("", ["--once"]), "sample")[0]["gpus"]
        procs = gpus[0]["processes"]
        assert len(procs) == 1 and procs[0]["used_mib"] == 900.0
        assert procs[0]["name"] and procs[0]["user"]  # the agent's own pid, visible in /proc
        assert gpus[1]["processes"] == []

    def test_thresholds_are_static_facts_in_the_hello(self) -> None:
        hello = by_type(_nvml("", ["--once"]), "hello")[0]
        g = hello["gpus"][0]
        assert (g["temp_slowdown_c"], g["temp_shutdown_c"], g["pcie_gen_max_gpu"]) == (89, 92, 5)

    def test_lost_gpu_mid_run_keeps_the_rest(self) -> None:
        gpus = by_type(_nvml("lost2,memtrouble1", ["--once"]), "sample")[0]["gpus"]
        assert [g["state"] for g in gpus] == ["ok", "ok", "lost", "ok"]
        assert gpus[1]["remap_failure"] is True


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _function(path: Path, speed: str, width: int, max_speed: str, max_width: int,
              numa: int) -> None:
    _write(path / "current_link_speed", speed)
    _write(path / "current_link_width", str(width))
    _write(path / "max_link_speed", max_speed)
    _write(path / "max_link_width", str(max_width))
    _write(path / "numa_node", str(numa))
    _write(path / "local_cpulist", "0-23,48-71" if numa == 0 else "24-47,72-95")


@pytest.fixture
def fake_sys(tmp_path: Path) -> Path:
    """A /sys with GPU 0000:18:00.0 behind a switch (trained x8) and a root port, an HCA,
    an Ethernet NIC, a virtual interface and two NUMA nodes."""
    root = tmp_path / "sys"
    top = root / "devices" / "pci0000:00"
    port = top / "0000:00:01.0"
    up = port / "0000:16:00.0"
    down = up / "0000:17:00.0"
    gpu = down / "0000:18:00.0"
    _function(port, "32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16, 0)
    _function(up, "32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16, 0)
    _function(down, "16.0 GT/s PCIe", 8, "32.0 GT/s PCIe", 16, 0)
    _function(gpu, "16.0 GT/s PCIe", 8, "32.0 GT/s PCIe", 16, 0)
    hca = top / "0000:00:02.0" / "0000:29:00.0"
    _function(hca, "32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16, 1)
    eth = top / "0000:00:03.0" / "0000:2a:00.0"
    _function(eth, "8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8, -1)
    devices = root / "bus" / "pci" / "devices"
    devices.mkdir(parents=True)
    for fn in (port, up, down, gpu, hca, eth):
        (devices / fn.name).symlink_to(fn)
    ib = root / "class" / "infiniband" / "mlx5_0"
    ib.mkdir(parents=True)
    (ib / "device").symlink_to(hca)
    _write(ib / "ports" / "1" / "state", "4: ACTIVE")
    _write(ib / "ports" / "1" / "rate", "400 Gb/sec (4X NDR)")
    _write(ib / "ports" / "1" / "link_layer", "InfiniBand")
    net = root / "class" / "net"
    (net / "eth0").mkdir(parents=True)
    (net / "eth0" / "device").symlink_to(eth)
    _write(net / "eth0" / "operstate", "up")
    _write(net / "eth0" / "speed", "25000")
    (net / "lo").mkdir()
    _write(net / "lo" / "operstate", "unknown")
    for n in ("node0", "node1", "possible"):
        (root / "devices" / "system" / "node" / n).mkdir(parents=True)
    return root


class TestSysfs:
    def test_gpu_chain_nics_and_numa_from_sysfs(self, fake_sys: Path) -> None:
        hello = by_type(_nvml("", ["--once", "--sys-root", str(fake_sys)]), "hello")[0]
        chain = hello["pcie"]["0000:18:00.0"]
        assert [c["address"] for c in chain] == [
            "0000:18:00.0", "0000:17:00.0", "0000:16:00.0", "0000:00:01.0"]
        assert (chain[0]["speed_gts"], chain[0]["width"]) == (16.0, 8)
        assert (chain[0]["max_speed_gts"], chain[0]["max_width"]) == (32.0, 16)
        assert chain[0]["numa_node"] == 0 and chain[0]["local_cpulist"] == "0-23,48-71"
        assert hello["pcie"]["0000:19:00.0"] == []  # fake NVML GPU 1 has no sysfs entry
        nics = {n["name"]: n for n in hello["nics"]}
        assert set(nics) == {"mlx5_0", "eth0"}  # lo is virtual: no PCI device
        assert nics["mlx5_0"]["numa_node"] == 1 and nics["mlx5_0"]["address"] == "0000:29:00.0"
        assert nics["mlx5_0"]["ports"][0]["state"] == "4: ACTIVE"
        assert nics["eth0"]["numa_node"] is None and nics["eth0"]["speed_mbps"] == 25000
        assert hello["host"]["numa_nodes"] == 2

    def test_dataset_path_maps_to_its_whole_disk(self, fake_sys: Path, tmp_path: Path) -> None:
        data = tmp_path / "dataset"
        data.mkdir()
        st = os.stat(data)
        disk = fake_sys / "devices" / "virtual" / "block" / "nvme3n1"
        part = disk / "nvme3n1p2"
        _write(part / "partition", "2")
        link = fake_sys / "dev" / "block" / f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        link.parent.mkdir(parents=True)
        link.symlink_to(part)
        assert block_device_of(str(fake_sys), str(data)) == "nvme3n1"
        assert block_device_of(str(fake_sys), str(tmp_path / "missing")) is None

    def test_link_speed_text(self) -> None:
        assert link_speed_gts("2.5 GT/s PCIe") == 2.5
        assert link_speed_gts("8.0 GT/s") == 8.0
        assert link_speed_gts("Unknown") is None
        assert link_speed_gts(None) is None


DISKSTATS_FIELDS = ("reads", "reads_merged", "sectors_read", "ms_reading", "writes",
                    "writes_merged", "sectors_written", "ms_writing", "in_flight",
                    "io_ticks", "time_in_queue")


def _by_hand(text: str) -> dict[str, dict[str, int]]:
    """/proc/diskstats read as Documentation/admin-guide/iostats.rst numbers its fields."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        out[parts[2]] = dict(zip(DISKSTATS_FIELDS, (int(x) for x in parts[3:14]), strict=True))
    return out


def test_iostat_from_real_diskstats_matches_a_hand_computation(tmp_path: Path) -> None:
    if not os.path.exists("/proc/diskstats"):
        pytest.skip("no /proc/diskstats")
    t1 = Path("/proc/diskstats").read_text()
    with open(tmp_path / "load", "wb") as fh:
        for _ in range(64):
            fh.write(os.urandom(64 * 1024))
            fh.flush()
            os.fsync(fh.fileno())
    time.sleep(0.2)
    t2 = Path("/proc/diskstats").read_text()
    dt = 1.7
    a, b = _by_hand(t1), _by_hand(t2)
    rates = disk_rates(parse_diskstats(t1, None), parse_diskstats(t2, None), dt)
    assert rates, "no whole disks in /proc/diskstats"
    for name, got in rates.items():
        d = {k: b[name][k] - a[name][k] for k in DISKSTATS_FIELDS}
        assert got["r_s"] == pytest.approx(d["reads"] / dt, abs=0.01)
        assert got["w_s"] == pytest.approx(d["writes"] / dt, abs=0.01)
        assert got["rkb_s"] == pytest.approx(d["sectors_read"] * 512 / 1024 / dt, abs=0.01)
        assert got["wkb_s"] == pytest.approx(d["sectors_written"] * 512 / 1024 / dt, abs=0.01)
        assert got["r_await"] == pytest.approx(
            d["ms_reading"] / d["reads"] if d["reads"] else 0.0, abs=0.01)
        assert got["w_await"] == pytest.approx(
            d["ms_writing"] / d["writes"] if d["writes"] else 0.0, abs=0.01)
        assert got["aqu_sz"] == pytest.approx(d["time_in_queue"] / 1000 / dt, abs=0.01)
        assert got["util"] == pytest.approx(min(100.0, d["io_ticks"] / 10 / dt), abs=0.01)
    assert any(_by_hand(t2)[n]["writes"] > _by_hand(t1)[n]["writes"] for n in rates), \
        "the fsync'd writes reached no whole disk"
    hidden = [n for n in b if n.startswith(("loop", "ram"))]
    assert not set(hidden) & set(rates)


def test_nvidia_smi_fallback_reads_the_same_depth_fields(
        fake_smi: Callable[[str], dict[str, str]]) -> None:
    lines, _, _ = run_agent(["--once"], env=fake_smi("csv"), isolated=False)
    gpu = by_type(lines, "sample")[0]["gpus"][0]
    assert gpu["pstate"] == "P0"
    assert gpu["persistence"] is True
    assert gpu["mem_clock_max_mhz"] is not None
    for key in ("ecc_uncorrected_volatile", "remap_failure", "retired_pages_pending"):
        assert key in gpu  # asked for; None where this capture says N/A
    assert gpu["remap_failure"] in (False, None)
