"""The agent as a host runs it: bare stdlib Python, fake nvidia-smi binaries, lifetime rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.agent.proc import disk_rates
from probes.agent.values import decode_reasons, normalise_bus_id, parse_number
from probes.transport.bootstrap import agent_source, bootstrap_argv, shipped_source
from tests.conftest import AGENT_SOURCE, REPO


def run_agent(args: list[str], *, python: str = sys.executable, env: dict[str, str] | None = None,
              timeout: float = 30.0, isolated: bool = True) -> tuple[list[dict], str, float]:
    """Run ``python3 -I - ARGS < agent.py`` with the source a host running ARGS is sent;
    returns (lines, stderr, seconds)."""
    flags = ["-I"] if isolated else []
    t0 = time.monotonic()
    proc = subprocess.run([python, *flags, "-", *args], input=shipped_source(args),
                          capture_output=True, env=env, timeout=timeout, check=False)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr.decode()
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    return lines, proc.stderr.decode(), elapsed


def _environ(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def by_type(lines: list[dict], kind: str) -> list[dict]:
    return [m for m in lines if m["type"] == kind]


class TestBareHost:
    def test_once_on_stock_python_without_site_packages(self, bare_python: str) -> None:
        """`python3 -I -S - --once < agent.py` works with the standard library alone."""
        proc = subprocess.run([bare_python, "-I", "-S", "-", "--once"],
                              input=agent_source(simulate=False),
                              capture_output=True, timeout=30, check=True)
        lines = [json.loads(x) for x in proc.stdout.decode().splitlines()]
        assert [m["type"] for m in lines] == ["hello", "sample"]
        hello, sample = lines
        assert hello["v"] == 1
        assert hello["host"]["hostname"]
        assert hello["host"]["cpu_cores_logical"] >= 1
        assert hello["host"]["mem_total_bytes"] > 0
        assert hello["probes"]["nvml"] == {"available": False, "reason": "pynvml not importable"}
        assert hello["probes"]["nvidia-smi"]["available"] is False
        assert hello["gpus"] == []
        assert sample["gpus"] == []
        assert 0.0 <= sample["host"]["cpu_pct"] <= 100.0
        assert sample["host"]["mem_used_bytes"] <= sample["host"]["mem_total_bytes"]
        for disk in sample["disks"].values():
            assert set(disk) == {"r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await",
                                 "aqu_sz", "util"}
            assert 0.0 <= disk["util"] <= 100.0
        assert proc.stderr == b""

    def test_runs_as_module(self) -> None:
        proc = subprocess.run([sys.executable, "-m", "probes.agent", "--simulate", "healthy",
                               "--once"], cwd=REPO, capture_output=True, timeout=30, check=True)
        kinds = [json.loads(x)["type"] for x in proc.stdout.decode().splitlines()]
        assert kinds == ["hello", "fabric", "sample"]  # a simulated HGX has HCAs and NVLinks

    def test_bad_scenario_is_a_usage_error(self) -> None:
        proc = subprocess.run([sys.executable, "-I", "-", "--simulate", "leek"],
                              input=AGENT_SOURCE, capture_output=True, timeout=30)
        assert proc.returncode == 2
        assert "unknown scenario 'leek'" in proc.stderr.decode()

    def test_a_real_hosts_agent_refuses_to_simulate(self) -> None:
        """A real host is sent the agent without the simulator: one line says so."""
        proc = subprocess.run([sys.executable, "-I", "-", "--simulate", "healthy", "--once"],
                              input=agent_source(simulate=False), capture_output=True, timeout=30)
        assert (proc.returncode, proc.stdout) == (2, b"")
        assert proc.stderr.decode().splitlines() == [
            "rigwatch-agent: error: this agent was sent without the simulator (--simulate)"]


class TestNvidiaSmiFallback:
    def test_csv_values_from_a_real_capture(
            self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        lines, _, _ = run_agent(["--once"], env=fake_smi("csv"))
        hello = by_type(lines, "hello")[0]
        assert hello["host"]["driver_version"] == "590.48.01"
        assert hello["host"]["cuda_version"] == "13.1"
        assert [g["bus_id"] for g in hello["gpus"]][:2] == ["0000:18:00.0", "0000:2a:00.0"]
        assert hello["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
        gpus = by_type(lines, "sample")[0]["gpus"]
        assert [g["index"] for g in gpus] == list(range(8))
        g = gpus[2]
        assert g["state"] == "ok"
        assert g["mem_used_mib"] == 3000.0
        assert g["mem_total_mib"] == 81559.0
        assert g["util_pct"] == 0.0
        assert g["temp_c"] == 34.0
        assert g["power_w"] == 71.42
        assert g["power_limit_w"] == 700.0
        assert g["sm_clock_mhz"] == 345.0
        assert g["sm_clock_max_mhz"] == 1980.0
        assert g["clock_reasons"] == ["gpu_idle"]
        assert (g["pcie_gen"], g["pcie_gen_max"], g["pcie_width"], g["pcie_width_max"]) == (
            5, 5, 16, 16)
        assert by_type(lines, "error") == []

    def test_processes_join_their_gpu_by_bus_id(
            self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        """``--query-compute-apps`` names GPUs by bus id only, in no set order: each process
        lands on the GPU with that bus id (6, 0), not on a position in the answer; ``[N/A]``
        memory (MIG, containers) stays unknown; the agent's own pid is attributed."""
        env = fake_smi("csv")
        env["FAKE_SMI_APPS"] = (f"00000000:BA:00.0={os.getpid()}:61528,"
                                "00000000:18:00.0=999999:[N/A]")
        lines, _, _ = run_agent(["--once"], env=env)
        gpus = {g["index"]: g for g in by_type(lines, "sample")[0]["gpus"]}
        (p6,) = gpus[6]["processes"]
        assert (p6["pid"], p6["used_mib"]) == (os.getpid(), 61528.0)
        assert p6["environ"] is True  # attribution read this test's own /proc entry
        (p0,) = gpus[0]["processes"]
        assert (p0["pid"], p0["used_mib"], p0["name"]) == (999999, None, None)
        assert all(gpus[i]["processes"] == [] for i in (1, 2, 3, 4, 5, 7))

    def test_older_driver_field_names(self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        """A driver that rejects the new names gets the old ones, and the values still arrive."""
        lines, _, _ = run_agent(["--once"], env=fake_smi("old"))
        g = by_type(lines, "sample")[0]["gpus"][0]
        assert g["clock_reasons"] == ["gpu_idle"]
        assert g["pcie_gen"] == 5

    def test_unable_to_determine_device_handle(
            self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        lines, _, _ = run_agent(["--once"], env=fake_smi("nohandle"))
        gpus = by_type(lines, "sample")[0]["gpus"]
        ok = [g for g in gpus if g["state"] == "ok"]
        lost = [g for g in gpus if g["state"] == "lost"]
        assert len(ok) == 7
        assert [g["bus_id"] for g in lost] == ["0000:8a:00.0"]

    def test_every_gpu_gone(self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        lines, _, _ = run_agent(["--once"], env=fake_smi("allgone"))
        gpus = by_type(lines, "sample")[0]["gpus"]
        assert [(g["state"], g["bus_id"]) for g in gpus] == [("lost", "0000:8a:00.0")]

    def test_hung_nvidia_smi_never_stops_the_stream(
            self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        lines, _, elapsed = run_agent(
            ["--interval", "0.3", "--count", "4", "--gpu-deadline", "0.5"], env=fake_smi("hang"))
        samples = by_type(lines, "sample")
        assert len(samples) == 4
        assert all(s["host"]["cpu_pct"] is not None for s in samples)
        errors = by_type(lines, "error")
        assert errors and errors[0]["probe"] == "nvidia-smi"
        assert "timed out" in errors[0]["message"]
        hello = by_type(lines, "hello")[0]
        assert hello["probes"]["nvidia-smi"]["available"] is False
        assert elapsed < 8.0

    def test_no_nvidia_smi_outlives_the_agent(
            self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        env = fake_smi("hang")
        marker = env["FAKE_SMI_FIXTURE"]
        run_agent(["--interval", "0.2", "--count", "2", "--gpu-deadline", "0.3"], env=env)
        # The agent kills its hung child as it exits; on a loaded machine the kill takes a
        # moment to land, so look for a while (a child that outlives the agent stays).
        deadline = time.monotonic() + 5.0
        while True:
            left = subprocess.run(["pgrep", "-f", "bin/nvidia-smi"], capture_output=True,
                                  text=True)
            ours = [pid for pid in left.stdout.split() if marker in _environ(pid)]
            if not ours or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert ours == []

    def test_hang_after_start_marks_gpus_unresponsive(
            self, fake_smi: Callable[[str], dict[str, str]], tmp_path: Path) -> None:
        mode_file = tmp_path / "mode"
        mode_file.write_text("csv")
        env = fake_smi("csv")
        env["FAKE_SMI_MODE_FILE"] = str(mode_file)
        proc = subprocess.Popen([sys.executable, "-I", "-", "--interval", "0.3",
                                 "--gpu-deadline", "0.5", "--count", "8"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(AGENT_SOURCE)
        proc.stdin.close()
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "hello" and len(first["gpus"]) == 8
        mode_file.write_text("hang")
        rest = [json.loads(x) for x in proc.stdout.read().decode().splitlines()]
        proc.wait(timeout=30)
        states = [tuple(g["state"] for g in s["gpus"]) for s in by_type(rest, "sample")]
        assert len(states) == 8
        assert states[-1] == ("unresponsive",) * 8
        assert all(s["host"]["load1"] is not None for s in by_type(rest, "sample"))


class TestLifetime:
    def _start(self, args: list[str]) -> subprocess.Popen[bytes]:
        source = shipped_source(args)
        proc = subprocess.Popen(bootstrap_argv(sys.executable, args, len(source)),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None
        proc.stdin.write(source)
        proc.stdin.flush()
        return proc

    def test_exits_when_stdin_closes(self) -> None:
        """The bootstrap keeps stdin open; closing it (console gone) ends the agent."""
        proc = self._start(["--simulate", "healthy", "--interval", "30"])
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["type"] == "hello"
        time.sleep(0.3)
        assert proc.poll() is None
        t0 = time.monotonic()
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=5)
        assert time.monotonic() - t0 < 3.0

    def test_exits_when_stdout_closes(self) -> None:
        proc = self._start(["--simulate", "healthy", "--interval", "0.2"])
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()
        proc.wait(timeout=5)
        assert proc.returncode == 0


class TestParsing:
    def test_disk_rates_follow_sysstat_formulas(self) -> None:
        old = {"nvme0n1": [100, 0, 8000, 50, 10, 0, 160, 20, 0, 1000, 3000] + [0] * 6}
        new = {"nvme0n1": [300, 0, 12000, 250, 30, 0, 560, 60, 0, 1900, 7500] + [0] * 6}
        d = disk_rates(old, new, 2.0)["nvme0n1"]
        assert d["r_s"] == 100.0
        assert d["rkb_s"] == 1000.0
        assert d["r_await"] == 1.0
        assert d["w_s"] == 10.0
        assert d["w_await"] == 2.0
        assert d["util"] == 45.0
        assert d["aqu_sz"] == 2.25

    def test_counter_going_backwards_is_not_negative(self) -> None:
        old = {"sda": [500] * 17}
        new = {"sda": [100] * 17}
        d = disk_rates(old, new, 1.0)["sda"]
        assert min(d.values()) == 0.0

    @pytest.mark.parametrize(("text", "value"), [
        ("81559 MiB", 81559.0), ("71.42", 71.42), ("[N/A]", None), ("N/A", None),
        ("[Not Supported]", None), ("[Requested functionality has been deprecated]", None),
        ("", None), ("38 %", 38.0), ("garbage", None),
    ])
    def test_parse_number(self, text: str, value: float | None) -> None:
        assert parse_number(text) == value

    @pytest.mark.parametrize(("raw", "norm"), [
        ("00000000:3B:00.0", "0000:3b:00.0"), ("00008ED0:00:00.0", "8ed0:00:00.0"),
        ("0004:01:00.0", "0004:01:00.0"), ("4e:00.0", "0000:4e:00.0"),
    ])
    def test_bus_ids_in_contract_form(self, raw: str, norm: str) -> None:
        assert normalise_bus_id(raw) == norm

    def test_clock_reason_bits(self) -> None:
        assert decode_reasons(0x61) == ["gpu_idle", "sw_thermal_slowdown",
                                        "hw_thermal_slowdown"]


class TestNvmlPath:
    """The NVML backend against a stand-in ``pynvml`` with nvidia-ml-py's names and errors."""

    FAKE = str(REPO / "tests" / "data" / "fake_pynvml")

    def _run(self, flags: str, args: list[str]) -> list[dict]:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": self.FAKE, "FAKE_NVML": flags}
        lines, _, _ = run_agent(args, env=env, isolated=False)
        return lines

    def test_values_units_and_reasons(self) -> None:
        lines = self._run("nopower1", ["--once"])
        hello = by_type(lines, "hello")[0]
        assert hello["probes"]["nvml"] == {"available": True}
        assert hello["host"]["driver_version"] == "550.90.07"
        assert hello["host"]["cuda_version"] == "12.4"
        assert [g["bus_id"] for g in hello["gpus"]] == [
            "0000:18:00.0", "0000:19:00.0", "0000:1a:00.0", "0000:1b:00.0"]
        gpus = by_type(lines, "sample")[0]["gpus"]
        assert gpus[0]["mem_used_mib"] == 1000.0 and gpus[0]["mem_total_mib"] == 81559.0
        assert gpus[0]["power_w"] == 612.35 and gpus[0]["power_limit_w"] == 700.0
        assert gpus[1]["power_w"] is None  # NotSupported is absent, not zero
        assert gpus[0]["pcie_width"] == 8
        assert gpus[3]["clock_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
        assert gpus[3]["sm_clock_mhz"] == 1410

    def test_a_gpu_process_names_its_job_and_rank_and_nothing_else_of_its_environment(
            self) -> None:
        """The stand-in reports the agent's own pid on GPU 0: the agent reads its cgroup
        and the whitelisted variables, and no other variable reaches the stream."""
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": self.FAKE, "FAKE_NVML": "",
               "SLURM_JOB_ID": "48211", "SLURM_PROCID": "3", "LOCAL_RANK": "3",
               "WORLD_SIZE": "16", "MASTER_ADDR": "gpu-a01", "SECRET_TOKEN": "s3cr3t"}
        lines, _, _ = run_agent(["--once"], env=env, isolated=False)
        proc = by_type(lines, "sample")[0]["gpus"][0]["processes"][0]
        assert proc["environ"] is True and proc["rank"] == 3 and proc["local_rank"] == 3
        assert proc["world_size"] == 16 and proc["master_addr"] == "gpu-a01"
        assert proc["slurm_job"] == "48211"  # no Slurm cgroup here: from the environment
        assert "s3cr3t" not in "".join(json.dumps(line) for line in lines)

    def test_lost_gpu_is_a_state_not_a_crash(self) -> None:
        gpus = by_type(self._run("lost2", ["--once"]), "sample")[0]["gpus"]
        assert [g["state"] for g in gpus] == ["ok", "ok", "lost", "ok"]

    def test_old_binding_falls_back_to_throttle_reasons(self) -> None:
        gpus = by_type(self._run("oldreasons", ["--once"]), "sample")[0]["gpus"]
        assert gpus[3]["clock_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]

    def test_driver_not_loaded_is_explained(self) -> None:
        hello = by_type(self._run("noinit", ["--once"]), "hello")[0]
        assert hello["probes"]["nvml"]["available"] is False
        assert "Driver Not Loaded" in hello["probes"]["nvml"]["reason"]

    def test_hung_nvml_call_marks_gpus_unresponsive_and_host_data_goes_on(self) -> None:
        lines = self._run("hangutil", ["--interval", "0.3", "--count", "4",
                                       "--gpu-deadline", "0.5"])
        samples = by_type(lines, "sample")
        assert len(samples) == 4
        assert {g["state"] for s in samples for g in s["gpus"]} <= {"unknown", "unresponsive"}
        assert samples[-1]["gpus"][0]["state"] == "unresponsive"
        assert all(s["host"]["cpu_pct"] is not None for s in samples)
        assert any("timed out" in e["message"] for e in by_type(lines, "error"))


def test_tail_follows_globbed_job_logs(tmp_path: Path) -> None:
    """Lines already there are skipped, new complete lines arrive as events."""
    log = tmp_path / "rank0.log"
    log.write_text("old line before start\n")
    proc = subprocess.Popen([sys.executable, "-I", "-", "--interval", "0.2", "--count", "15",
                             "--tail", str(tmp_path / "rank*.log")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(AGENT_SOURCE)
    proc.stdin.close()
    proc.stdout.readline()  # hello: tails are open
    with log.open("a") as f:
        f.write("NCCL WARN Net : Connection closed by remote peer\npartial")
    out = proc.stdout.read()
    proc.wait(timeout=30)
    events = [m for m in map(json.loads, out.decode().splitlines()) if m["type"] == "event"]
    assert [(e["source"], e["line"]) for e in events] == [
        (f"job:{log}", "NCCL WARN Net : Connection closed by remote peer")]


def test_compute_apps_rows_as_drivers_print_them() -> None:
    """``nvidia-smi --query-compute-apps=gpu_bus_id,pid,used_memory
    --format=csv,noheader,nounits`` as NVIDIA's nvidia-smi documentation shows the query
    (one row per process, the bus id with its 8-digit domain); "No running processes found"
    from some drivers and [N/A] memory under MIG."""
    from probes.agent.smi import parse_compute_apps

    text = ("00000000:18:00.0, 41235, 61528\n00000000:BA:00.0, 41242, [N/A]\n"
            "No running processes found\n\n garbage\n")
    assert parse_compute_apps(text) == [("0000:18:00.0", 41235, 61528.0),
                                        ("0000:ba:00.0", 41242, None)]
    assert parse_compute_apps("") == [] and parse_compute_apps(None) == []
