"""Preflight checks: on the real agent's simulated hosts, on facts changed one at a time, on
this machine's own /proc and sysfs, and through ``rigwatch preflight``."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from probes.analysis.preflight import (
    CheckResult,
    CheckVerdict,
    HostInput,
    PreflightLimits,
    check_fleet,
    check_host,
    exit_status,
)
from probes.config.fleet import HostSpec, demo_fleet
from probes.transport.session import OnceResult, collect_once
from probes.wire.samples import DatasetDevice, Hello, HostSample, IbPortSample, Nic, NicPort
from tui.cli import main
from tui.settings import SettingsError, load_settings

P, W, F, S = CheckVerdict.PASS, CheckVerdict.WARN, CheckVerdict.FAIL, CheckVerdict.SKIP


def _once(*scenarios: str, name: str = "h1") -> OnceResult:
    spec = HostSpec(name=name, simulate=scenarios, seed=1)
    result = asyncio.run(collect_once(spec))
    assert result.hello is not None and result.sample is not None, result.failure
    return result


@pytest.fixture(scope="module")
def healthy() -> OnceResult:
    return _once("healthy")


def _inp(r: OnceResult, hello: Hello | None = None, sample: HostSample | None = None,
         expect: int | None = 8) -> HostInput:
    return HostInput(r.spec.name, hello or r.hello, sample or r.sample, expect_gpus=expect)


def _by_check(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


def _facts(r: OnceResult, **kw: object) -> Hello:
    assert r.hello is not None
    return replace(r.hello, facts=replace(r.hello.facts, **kw))  # type: ignore[arg-type]


def _gpus(r: OnceResult, index: int, **kw: object) -> Hello:
    assert r.hello is not None
    gpus = tuple(replace(g, **kw) if g.index == index else g  # type: ignore[arg-type]
                 for g in r.hello.facts.gpus)
    return _facts(r, gpus=gpus)


def test_a_healthy_simulated_host_passes_everything(healthy: OnceResult) -> None:
    results = check_host(_inp(healthy))
    checks = _by_check(results)
    # the simulator's Fabric Manager is judged against its driver like any host's
    # (tests/analysis/test_preflight_now.py); every other check passes
    fm = checks.pop("fabric-manager")
    assert fm.verdict is (P if fm.value == healthy.hello.facts.driver_version else F)  # type: ignore[union-attr]
    bad = [r for r in checks.values() if r.verdict in (W, F)]
    assert bad == []
    assert checks["system-memory"].value == pytest.approx(2 * 1024**4 / (8 * 81559 * 1024**2),
                                                          abs=0.01)
    assert checks["cpu-cores-per-gpu"].value == 14.0
    assert checks["gpu-model"].detail == "8 × NVIDIA H100 80GB HBM3"
    assert checks["pcie-link"].value == 8
    assert checks["ib-ports"].verdict is P and "Active at 400 Gb/s" in checks["ib-ports"].detail
    assert checks["nvme"].value == ["nvme0n1", "nvme1n1"]
    assert checks["dataset-device"].value == "nvme0n1"
    assert exit_status([r for r in results if r is not fm]) == 0


def test_a_link_trained_at_x8_fails_and_names_the_gpu() -> None:
    r = _once("link-downgrade:2")
    link = _by_check(check_host(_inp(r)))["pcie-link"]
    assert link.verdict is F
    assert link.value == [f"GPU2 ({r.hello.facts.gpus[2].bus_id}) x8 (capable x16)"]  # type: ignore[union-attr]


def test_a_narrow_bridge_above_a_full_width_gpu_is_named(healthy: OnceResult) -> None:
    assert healthy.hello is not None
    bus = healthy.hello.facts.gpus[5].bus_id
    assert bus is not None
    chain = healthy.hello.pcie[bus]
    narrowed = (chain[0], replace(chain[1], width=8), *chain[2:])
    hello = replace(healthy.hello, pcie={**healthy.hello.pcie, bus: narrowed})
    link = _by_check(check_host(_inp(healthy, hello)))["pcie-link"]
    assert link.verdict is F
    assert f"bridge {chain[1].address} above it at Gen5 x8 (capable Gen5 x16)" in link.detail


@pytest.mark.parametrize(("ram_gib", "verdict"), [(2048, P), (1200, W), (760, F)])
def test_system_memory_against_gpu_memory(healthy: OnceResult, ram_gib: int,
                                          verdict: CheckVerdict) -> None:
    hello = _facts(healthy, mem_total_bytes=ram_gib * 1024**3)
    assert _by_check(check_host(_inp(healthy, hello)))["system-memory"].verdict is verdict


@pytest.mark.parametrize(("cores", "verdict"), [(112, P), (48, W), (192, W), (None, S)])
def test_physical_cores_per_gpu(healthy: OnceResult, cores: int | None,
                                verdict: CheckVerdict) -> None:
    hello = _facts(healthy, cpu_cores_physical=cores)
    assert _by_check(check_host(_inp(healthy, hello)))["cpu-cores-per-gpu"].verdict is verdict


def test_swap_in_use_or_missing(healthy: OnceResult) -> None:
    used = _by_check(check_host(_inp(healthy, _facts(healthy, swap_used_bytes=2 * 1024**3))))
    assert used["swap"].verdict is W and "2.0 GiB of swap in use" in used["swap"].detail
    none = _facts(healthy, swap_total_bytes=0, swap_used_bytes=0)
    assert _by_check(check_host(_inp(healthy, none)))["swap"].verdict is W
    relaxed = PreflightLimits(require_swap=False)
    assert _by_check(check_host(_inp(healthy, none), relaxed))["swap"].verdict is P


def test_gpu_settings_name_the_odd_gpu(healthy: OnceResult) -> None:
    checks = _by_check(check_host(_inp(healthy, _gpus(healthy, 3, persistence_mode=False))))
    assert checks["persistence-mode"].verdict is W
    assert checks["persistence-mode"].detail.startswith("off on GPU3:")
    checks = _by_check(check_host(_inp(healthy, _gpus(healthy, 1, ecc_mode=False,
                                                      ecc_mode_pending=True))))
    assert checks["ecc-mode"].verdict is W and "GPU1" in checks["ecc-mode"].detail
    assert checks["ecc-pending"].value == ["GPU1"]
    checks = _by_check(check_host(_inp(healthy, _gpus(healthy, 7, mig_mode=True))))
    assert checks["mig-mode"].verdict is W and "on on GPU7" in checks["mig-mode"].detail
    unknown = _facts(healthy, gpus=tuple(replace(g, ecc_mode=None)
                                         for g in healthy.hello.facts.gpus))  # type: ignore[union-attr]
    assert _by_check(check_host(_inp(healthy, unknown)))["ecc-mode"].verdict is S


def test_gpu_count_model_and_memory(healthy: OnceResult) -> None:
    assert healthy.hello is not None
    assert healthy.sample is not None
    seven = _facts(healthy, gpus=healthy.hello.facts.gpus[:7])
    seven_now = replace(healthy.sample, gpus=healthy.sample.gpus[:7])
    count = _by_check(check_host(_inp(healthy, seven, seven_now)))["gpu-count"]
    assert (count.verdict, count.detail) == (F, "7 GPUs answer now, 8 expected")
    mixed = _gpus(healthy, 4, name="NVIDIA A100-SXM4-80GB", mem_total_mib=81920.0)
    checks = _by_check(check_host(_inp(healthy, mixed)))
    assert checks["gpu-model"].verdict is F and "GPU4" in checks["gpu-model"].detail
    assert checks["gpu-memory"].verdict is W
    wanted = PreflightLimits(expect_gpu_model="B200")
    assert _by_check(check_host(_inp(healthy), wanted))["gpu-model"].verdict is F


def test_nics_numa_and_network(healthy: OnceResult) -> None:
    assert healthy.hello is not None
    socket0 = tuple(replace(n, numa_node=0) for n in healthy.hello.nics)
    checks = _by_check(check_host(_inp(healthy, replace(healthy.hello, nics=socket0))))
    assert checks["gpu-nic-numa"].verdict is W
    assert checks["gpu-nic-numa"].value == [f"GPU{i} (NUMA 1)" for i in range(4, 8)]
    down = (replace(healthy.hello.nics[0], ports=(NicPort(1, "1: DOWN", None, "InfiniBand"),)),
            *healthy.hello.nics[1:])
    ib = _by_check(check_host(_inp(healthy, replace(healthy.hello, nics=down))))["ib-ports"]
    assert ib.verdict is F and ib.detail.startswith("not active: mlx5_0/1 DOWN; 7 of 8 ports")
    eth_only = (Nic("eth0", "net", "0000:01:00.0", 0, "up", 10_000),)
    checks = _by_check(check_host(_inp(healthy, replace(healthy.hello, nics=eth_only))))
    assert checks["ib-ports"].verdict is W and checks["ethernet"].verdict is W
    single = PreflightLimits(require_ib=False, ethernet_min_mbps=10_000)
    checks = _by_check(check_host(_inp(healthy, replace(healthy.hello, nics=eth_only)), single))
    assert checks["ib-ports"].verdict is P and checks["ethernet"].verdict is P


def test_storage_nvme_dataset_device_and_free_space(healthy: OnceResult) -> None:
    assert healthy.hello is not None
    no_nvme = _facts(healthy, block_devices=tuple(d for d in healthy.hello.facts.block_devices
                                                  if not d.name.startswith("nvme")))
    assert _by_check(check_host(_inp(healthy, no_nvme)))["nvme"].verdict is W
    tb = 4 * 1024**4
    for free_pct, verdict in ((50, P), (5, W), (1, F)):
        ds = (DatasetDevice("/data", "sda", tb * free_pct // 100, tb),)
        checks = _by_check(check_host(_inp(healthy, replace(healthy.hello, datasets=ds))))
        assert checks["dataset-free"].verdict is verdict
        assert checks["dataset-device"].verdict is W  # on SATA, not NVMe


def test_power_pinned_or_lowered(healthy: OnceResult) -> None:
    assert healthy.sample is not None
    pinned = replace(healthy.sample, gpus=tuple(replace(g, power_w=699.0) if g.index == 2 else g
                                                for g in healthy.sample.gpus))
    power = _by_check(check_host(_inp(healthy, sample=pinned)))["power-headroom"]
    assert power.verdict is W and power.value == ["GPU2 699/700 W"]
    lowered = replace(healthy.sample, gpus=tuple(replace(g, power_limit_w=500.0, power_w=300.0)
                                                 for g in healthy.sample.gpus))
    power = _by_check(check_host(_inp(healthy, sample=lowered)))["power-headroom"]
    assert power.verdict is W and "GPU0 500 W (default 700 W)" in power.detail


def test_the_odd_one_out_across_the_fleet(healthy: OnceResult) -> None:
    hosts = [replace(_inp(healthy), name=f"n{i}") for i in range(4)]
    hosts[2] = replace(hosts[2], hello=_facts(healthy, driver_version="535.183.01",
                                              kernel="5.15.0-105-generic"))
    results = [r for r in check_fleet(hosts) if r.check.startswith("consistent-")]
    assert {(r.host, r.check, r.verdict) for r in results} == {
        ("n2", "consistent-driver", F), ("n2", "consistent-kernel", W)}
    driver = next(r for r in results if r.check == "consistent-driver")
    assert driver.threshold == "= 550.90.07 (the fleet's)"
    assert "on 3 of 4 hosts" in driver.detail


def test_an_unreachable_host_fails_and_says_why() -> None:
    (r,) = check_host(HostInput("gone", None, failure="connection refused"))
    assert (r.check, r.verdict) == ("reachable", F) and "connection refused" in r.detail
    assert exit_status([r]) == 2


def test_exit_status_is_0_1_2() -> None:
    def one(v: CheckVerdict) -> CheckResult:
        return CheckResult("h", "c", v, None, "", "")
    assert exit_status([one(P), one(S)]) == 0
    assert exit_status([one(P), one(W)]) == 1
    assert exit_status([one(W), one(F)]) == 2


def test_this_machines_real_proc_and_sysfs() -> None:
    """No simulator: the checks read what this machine's agent found."""
    result = asyncio.run(collect_once(HostSpec(name="here")))
    assert result.hello is not None, result.failure
    checks = _by_check(check_host(HostInput("here", result.hello, result.sample)))
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    swap_total = int(meminfo["SwapTotal"].split()[0]) * 1024
    assert result.hello.facts.swap_total_bytes == swap_total
    assert checks["swap"].verdict is (W if swap_total == 0 else checks["swap"].verdict)
    disks = sorted(d for d in os.listdir("/sys/block")
                   if not d.startswith(("loop", "ram", "zram")))
    assert sorted(d.name for d in result.hello.facts.block_devices if d.name in disks)
    has_nvme = any(d.startswith("nvme") for d in disks)
    assert checks["nvme"].verdict is (P if has_nvme else W)
    if not result.hello.facts.gpus:
        assert checks["gpu-count"].verdict is S
        assert checks["system-memory"].verdict is S
    assert checks["software"].value.get("kernel") == os.uname().release  # type: ignore[union-attr]


# --- settings --------------------------------------------------------------------------------

def test_settings_file_sets_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("preflight:\n  mem_ratio_warn: 3\n  require_ib: false\n"
                    "  consistent: [driver, kernel]\n  expect_gpu_model: H100\n")
    limits = load_settings(path).preflight
    assert (limits.mem_ratio_warn, limits.require_ib, limits.consistent,
            limits.expect_gpu_model) == (3.0, False, ("driver", "kernel"), "H100")


def test_settings_alerts_section(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("alerts:\n  hook: [/usr/local/bin/page, --team, gpu]\n"
                    "  min_severity: critical\n  clear_after_s: 300\n  bell: false\n")
    alerts = load_settings(path).alerts
    assert alerts.hook == ("/usr/local/bin/page", "--team", "gpu")
    assert alerts.min_severity.value == "critical" and alerts.clear_after_s == 300.0
    assert alerts.bell is False
    path.write_text("alerts:\n  min_severity: loud\n  hook: /bin/page --all\n")
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    assert str(err.value).splitlines() == [
        f"'min_severity' must be one of critical, warning, info, got 'loud' at {path}:2:17",
        f"'hook' must be a list of strings, got '/bin/page --all' at {path}:3:9"]


def test_settings_bound_the_hooks_at_once(tmp_path: Path) -> None:
    """Security review 2026-12-06, F2: ``hook_at_once: 100000000`` was accepted."""
    path = tmp_path / "settings.yaml"
    path.write_text("alerts:\n  hook_at_once: 64\n  hook_waiting: 0\n")
    assert load_settings(path).alerts.hook_at_once == 64
    path.write_text("alerts:\n  hook_at_once: 100000000\n  hook_waiting: 99999999\n")
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    assert str(err.value).splitlines() == [
        f"'hook_at_once' must be an integer from 1 to 64, got 100000000 at {path}:2:17",
        f"'hook_waiting' must be an integer from 0 to 4096, got 99999999 at {path}:3:17"]


def test_settings_problems_name_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("preflight:\n  mem_ratio_wran: 3\n  require_ib: maybe\n  cores_per_gpu_min: x\n"
                    "alert: {}\n")
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    lines = str(err.value).splitlines()
    assert lines == [
        f"unknown preflight setting 'mem_ratio_wran' at {path}:2:3 — did you mean "
        "'mem_ratio_warn'?",
        f"'require_ib' must be true or false, got 'maybe' at {path}:3:15",
        f"'cores_per_gpu_min' must be a number ≥ 0, got 'x' at {path}:4:22",
        f"unknown section 'alert' at {path}:5:1 — did you mean 'alerts'?",
    ]


# --- the command -----------------------------------------------------------------------------

DEMO_FAILING = {"gpu-a03", "gpu-a04", "gpu-b01", "gpu-b02", "gpu-b04"}
"""A GPU in thermal slowdown, a downgraded link, a different driver, a GPU off the bus, too
little RAM (see ``demo_fleet``).  Fabric Manager equals the driver on every demo host (the
skewed one's too), so no host fails on it."""


def test_preflight_demo_json_flags_exactly_the_hosts_that_should_fail(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "--demo", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert [h["name"] for h in doc["hosts"]] == [s.name for s in demo_fleet()]
    why = {h["name"]: {c["check"] for c in h["checks"] if c["verdict"] == "fail"}
           for h in doc["hosts"]}
    assert {name for name, checks in why.items() if checks} == DEMO_FAILING
    assert why["gpu-a03"] == {"gpu-temperature", "gpu-throttle"}
    assert why["gpu-a04"] == {"pcie-link"}
    assert why["gpu-b02"] == {"gpu-count"}
    assert why["gpu-b04"] == {"system-memory"}
    assert why["gpu-b01"] == {"consistent-driver", "consistent-cuda"}
    for h in doc["hosts"]:
        for c in h["checks"]:
            assert set(c) == {"host", "check", "verdict", "value", "threshold", "detail"}


def test_preflight_text_and_a_bad_settings_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("preflight: [1]\n")
    assert main(["preflight", "--demo", "--settings", str(bad)]) == 2
    assert f"'preflight' must be a mapping of setting: value at {bad}:1:12" in \
        capsys.readouterr().err


def test_settings_detector_thresholds_and_recording_retention(tmp_path: Path) -> None:
    from probes.config.fleet import HostSpec
    from probes.fleet_state import FleetState

    path = tmp_path / "settings.yaml"
    path.write_text("detectors:\n  leak_min_mib_h: 64\n  starve_window_s: 900\n"
                    "recording:\n  max_age_days: 7\n  max_size_gib: 2.5\n")
    s = load_settings(path)
    assert (s.detectors.leak_min_mib_h, s.detectors.starve_window_s) == (64.0, 900.0)
    assert (s.recording.max_age_days, s.recording.max_size_gib) == (7.0, 2.5)
    fleet = FleetState([HostSpec("h")], s.detectors)
    assert fleet.hosts["h"].detectors.limits.leak_min_mib_h == 64.0
    path.write_text("detectors:\n  leak_min_mibh: 64\n")
    with pytest.raises(SettingsError, match="did you mean 'leak_min_mib_h'"):
        load_settings(path)


def test_every_compute_port_active_at_the_expected_rate(healthy: OnceResult) -> None:
    """The ports as the console judges them: a port trained low warns, below the operator's
    expected rate fails; the newest fabric message wins over the hello."""
    assert healthy.hello is not None
    slow = (replace(healthy.hello.nics[3], ports=(
        NicPort(1, "4: ACTIVE", "200 Gb/sec (4X HDR)", "InfiniBand", "5: LinkUp"),)),)
    nics = healthy.hello.nics[:3] + slow + healthy.hello.nics[4:]
    ib = _by_check(check_host(_inp(healthy, replace(healthy.hello, nics=nics))))["ib-ports"]
    assert (ib.verdict, ib.detail) == (W, "below the expected rate: mlx5_3/1 at 200 Gb/s")
    assert ib.threshold == "every compute port Active at 400 Gb/s"
    ndr = PreflightLimits(ib_rate_gbs=800.0)
    ib = _by_check(check_host(_inp(healthy), ndr))["ib-ports"]
    assert ib.verdict is F and "mlx5_0/1 at 400 Gb/s" in ib.detail
    now = tuple(IbPortSample(f"mlx5_{i}", 1, "DOWN" if i == 5 else "ACTIVE",
                             "Polling" if i == 5 else "LinkUp", 400.0, "InfiniBand")
                for i in range(8))
    ib = _by_check(check_host(replace(_inp(healthy), ports=now)))["ib-ports"]
    assert ib.verdict is F and ib.detail.startswith("not active: mlx5_5/1 DOWN/Polling")
