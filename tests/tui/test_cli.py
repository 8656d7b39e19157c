"""The command line as scripts use it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

V1_GPU_FIELDS = {"index", "uuid", "state", "mem_used_mib", "mem_total_mib", "util_pct",
                 "mem_util_pct", "temp_c", "power_w", "power_limit_w", "sm_clock_mhz",
                 "sm_clock_max_mhz", "clock_reasons", "pcie_gen", "pcie_gen_max", "pcie_width",
                 "pcie_width_max"}
V1_HOST_FIELDS = {"cpu_pct", "load1", "load5", "load15", "mem_used_bytes", "mem_total_bytes",
                  "swap_used_bytes", "swap_total_bytes", "swap_in_pages_s", "swap_out_pages_s"}
V1_DISK_FIELDS = {"r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz", "util"}


def rigwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_snapshot_demo_json_has_every_v1_field() -> None:
    proc = rigwatch("snapshot", "--demo", "--json")
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert snap["version"] == 1 and snap["demo"] is True
    hosts = snap["hosts"]
    assert len(hosts) >= 6
    assert len({h["name"] for h in hosts}) == len(hosts)
    for h in hosts:
        assert h["ok"], h["error"]
        facts = h["hello"]["facts"]
        for key in ("hostname", "kernel", "driver_version", "cuda_version", "cpu_model",
                    "cpu_cores_logical", "mem_total_bytes"):
            assert facts[key] is not None, key
        assert len(facts["gpus"]) == 8
        assert all(g["uuid"] and g["bus_id"] and g["name"] and g["mem_total_mib"]
                   for g in facts["gpus"])
        sample = h["sample"]
        # taken after the simulated history: gpu-b02's GPU 6 has fallen off the bus
        assert len(sample["gpus"]) == (7 if h["name"] == "gpu-b02" else 8)
        for g in sample["gpus"]:
            assert set(g) >= V1_GPU_FIELDS
            assert all(g[k] is not None for k in V1_GPU_FIELDS - {"clock_reasons"})
        assert set(sample["host"]) == V1_HOST_FIELDS
        assert sample["disks"] and all(set(d) >= V1_DISK_FIELDS for d in sample["disks"])
    by_name = {h["name"]: h for h in hosts}
    assert {f["code"] for f in by_name["gpu-a04"]["findings"]} == {"pcie-link-downgraded"}
    # the detectors run on the host's lived history as the console's do (test_soak's gpu-b01)
    assert {f["code"] for f in by_name["gpu-b01"]["findings"]} == {"disk-saturated",
                                                                   "data-starvation"}
    assert {(f["code"], f["gpu"]) for f in by_name["gpu-b02"]["findings"]} >= {
        ("gpu-lost", 6), ("xid", 6)}
    # judged as the console judges: the job's throughput drop sits beside the throttling
    # and its soak detectors' findings as test_soak's console finds them
    assert {f["code"] for f in by_name["gpu-a03"]["findings"]} == {
        "clocks-throttled", "throughput-drop", "throttled-while-busy", "temp-near-slowdown"}
    assert ("memory-leak", 3) in {(f["code"], f["gpu"]) for f in by_name["gpu-a02"]["findings"]}
    assert snap["first_failure"]["code"] == "xid" and snap["first_failure"]["host"] == "gpu-b02"
    assert snap["do_now"] == "drain gpu-b02, reboot it; RMA GPU6 if it recurs"


def test_snapshot_text_lists_hosts_and_never_says_ok_beside_a_finding() -> None:
    proc = rigwatch("snapshot", "--demo")
    assert proc.returncode == 0
    lines = {line.split()[0]: line for line in proc.stdout.splitlines()}
    assert len(lines) == 8
    assert lines["gpu-a01"].split()[1:] == ["8", "GPUs", "0", "findings", "ok"]
    b02 = lines["gpu-b02"].split()
    assert b02[1:5] == ["7/8", "GPUs", "4", "findings"] and b02[5] == "critical:"
    # throttled, its throughput drop, and the two soak detectors on its history
    assert " 4 findings  warning: GPU 5 throttled" in lines["gpu-a03"]
    assert not any(line.endswith(" ok") and " 0 findings " not in line
                   for line in lines.values())


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback() -> None:
    for args in (["snapshot", "--demo", "--json", "--pretty"], ["snapshot", "--demo", "--json"]):
        proc = subprocess.Popen([sys.executable, "-m", "tui.cli", *args], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()  # what ``head -1`` reads, then it goes away
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) in (0, 141), err
        assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_bad_speed_is_a_usage_error() -> None:
    proc = rigwatch("--demo", "--speed", "0")
    assert proc.returncode == 2
    assert "--speed must be > 0" in proc.stderr


def test_agent_subcommand_passes_through() -> None:
    proc = rigwatch("agent", "--simulate", "healthy", "--once")
    assert proc.returncode == 0
    assert [json.loads(x)["type"] for x in proc.stdout.splitlines()] == [
        "hello", "fabric", "sample"]


def test_unknown_theme_is_a_usage_error() -> None:
    proc = rigwatch("--demo", "--theme", "no-such-theme")
    assert proc.returncode == 2
    assert "unknown theme 'no-such-theme'" in proc.stderr
    assert "rigwatch-high-contrast" in proc.stderr


def test_replay_without_a_file_lists_each_recording_with_its_span() -> None:
    """Start, end, length and hosts per recording, newest first; a damaged file is one line
    naming it, and the listing goes on."""
    from probes.config.fleet import HostSpec
    from probes.store.recording import Recorder, default_directory
    from probes.wire.events import Connected, Disconnected

    day = 1_764_720_000.0  # 2025-12-03 00:00:00 UTC
    folder = default_directory()
    folder.mkdir(parents=True, exist_ok=True)
    with Recorder(folder / "night.sqlite3", "k", ["gpu-a", "gpu-b"]) as rec:
        rec.describe_hosts([HostSpec("gpu-a"), HostSpec("gpu-b")])
        rec.record("gpu-a", day, Connected(day))
        rec.record("gpu-b", day + 3600, Disconnected(day + 3600, "agent exited"))
    (folder / "bad.sqlite3").write_bytes(b"not a database, a truncated copy")
    proc = rigwatch("replay")
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "night.sqlite3" in x)
    assert "2025-12-03 00:00:00" in line and "2025-12-03 01:00:00" in line, line
    assert " 1 h " in f" {line} " and " 2 " in f" {line} ", line
    assert "bad.sqlite3" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
