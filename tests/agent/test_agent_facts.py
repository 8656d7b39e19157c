"""The hello's host facts: GPU serial, VBIOS and modes, software versions, disks, swap.

The agent runs as a real subprocess (``python3 -I - --once < agent.py``); look-ups are
pointed into tmp_path with ``--log-root`` (/proc, /usr) and ``--sys-root`` (/sys), with
fake ``nvcc``, ``nv-fabricmanager`` and ``nvidia-smi`` on PATH, and the result is read back
through the console's own decoder.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.agent import SIM_SCENARIOS, parse_scenarios, pci, smi, software
from probes.wire.protocol import decode_line
from probes.wire.samples import BlockDevice, DatasetDevice, Hello, SoftwareVersions
from tests.agent.test_agent import by_type
from tests.agent.test_agent_kernel_log import _tree
from tests.conftest import AGENT_SOURCE, REPO

GIB = 1024 ** 3
NVCC_TEXT = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Thu_Mar_28_02:18:24_PDT_2024
Cuda compilation tools, release 12.4, V12.4.131
Build cuda_12.4.r12.4/compiler.34097967_0
"""
NVCC_118 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2022 NVIDIA Corporation
Built on Wed_Sep_21_10:33:58_PDT_2022
Cuda compilation tools, release 11.8, V11.8.89
Build cuda_11.8.r11.8/compiler.31833905_0
"""
MEMINFO = """MemTotal:       2113389276 kB
MemFree:        1800000000 kB
MemAvailable:   1900000000 kB
SwapCached:            0 kB
SwapTotal:       8388604 kB
SwapFree:        8126460 kB
"""
FAKE_SMI = r'''
import os, sys
FIELDS = {"index": None, "pci.bus_id": None, "uuid": None, "name": "NVIDIA A100-SXM4-80GB",
          "memory.total": "81920", "driver_version": "535.183.01", "serial": "1323321012345",
          "vbios_version": "92.00.45.00.06", "persistence_mode": "Disabled",
          "ecc.mode.current": "Enabled", "ecc.mode.pending": "Disabled",
          "power.default_limit": "[Not Supported]"}
REJECT = "mig.mode.current"  # a driver older than MIG (R450) does not know the field
query = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--query-gpu=")), None)
if query is None:
    print("| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01   CUDA Version: 12.2 |")
    sys.exit(0)
names = query.split(",")
if REJECT in names:
    print('Field "%s" is not a valid field to query.' % REJECT)
    sys.exit(2)
for i in range(2):
    row = []
    for n in names:
        v = FIELDS.get(n, "[N/A]")
        if n == "index":
            v = str(i)
        elif n == "pci.bus_id":
            v = "00000000:%02X:00.0" % (0x41 + i)
        elif n == "uuid":
            v = "GPU-0000000%d-aaaa-bbbb-cccc-dddddddddddd" % i
        row.append(v)
    print(", ".join(row))
'''
NVML_EXTRA = '''
import importlib.util as _u
_spec = _u.spec_from_file_location("_fake_pynvml_base", {base!r})
_base = _u.module_from_spec(_spec)
_spec.loader.exec_module(_base)
globals().update((k, v) for k, v in vars(_base).items() if not k.startswith("__"))


def nvmlDeviceGetSerial(h):
    _check(h)
    return b"1650124078813" if h == 0 else "16501240788%02d" % h


def nvmlDeviceGetVbiosVersion(h):
    _check(h)
    return "96.00.89.00.01"


def nvmlDeviceGetPersistenceMode(h):
    _check(h)
    return 0 if h == 1 else 1


def nvmlDeviceGetEccMode(h):
    _check(h)
    if h == 3:
        raise NVMLError_NotSupported("Not Supported")
    return [1, 0] if h == 1 else [1, 1]


def nvmlDeviceGetMigMode(h):
    _check(h)
    if h == 2:
        raise NVMLError_NotSupported("Not Supported")
    return [0, 1] if h == 1 else [0, 0]


def nvmlDeviceGetPowerManagementDefaultLimit(h):
    _check(h)
    if h == 1:
        raise NVMLError_NotSupported("Not Supported")
    return 700000
'''


def _exe(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _printer(path: Path, text: str) -> None:
    _exe(path, f"import sys\nsys.stdout.write({text!r})\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _run(args: list[str], env: dict[str, str] | None = None, isolated: bool = True,
         cwd: Path | None = None) -> tuple[list[dict], Hello]:
    flags = ["-I"] if isolated else []
    proc = subprocess.run([sys.executable, *flags, "-", "--once", *args],
                          input=AGENT_SOURCE, capture_output=True, env=env, timeout=60,
                          cwd=cwd, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""
    raw = proc.stdout.decode().splitlines()
    # a simulated HGX host (and fake nvidia-smi's NVLinks) also send a fabric message
    lines = [m for m in (json.loads(x) for x in raw) if m["type"] != "fabric"]
    assert [m["type"] for m in lines] == ["hello", "sample"]
    hello = decode_line(raw[0])
    assert isinstance(hello, Hello)
    return lines, hello


def _sim(scenario: str) -> tuple[list[dict], Hello]:
    return _run(["--simulate", scenario, "--seed", "3"])


# --------------------------------------------------------------------------- simulator

class TestSimulatedFacts:
    def test_healthy_h100_host(self) -> None:
        lines, hello = _sim("healthy")
        f = hello.facts
        assert len(f.gpus) == 8
        serials = [g.serial for g in f.gpus]
        assert len(set(serials)) == 8 and all(s and s.isdigit() and len(s) == 13
                                              for s in serials)
        for g in f.gpus:
            assert g.vbios == "96.00.89.00.01"
            assert (g.persistence_mode, g.ecc_mode, g.ecc_mode_pending, g.mig_mode) == (
                True, True, True, False)
            assert g.power_limit_default_w == 700.0
        assert f.software == SoftwareVersions(
            nvcc="12.4.131", nccl="2.21.5", torch="2.4.0", cuda_runtime="12.4.127",
            container_runtimes=("docker", "nvidia-container-cli"), fabric_manager="550.90.07")
        assert [(d.name, d.rotational, d.transport) for d in f.block_devices] == [
            ("nvme0n1", False, "nvme"), ("nvme1n1", False, "nvme"), ("sda", False, "sata")]
        sizes = {d.name: d.size_bytes for d in f.block_devices}
        assert sizes["nvme0n1"] == sizes["nvme1n1"] and 3.8e12 < (sizes["nvme0n1"] or 0) < 3.9e12
        assert 4.7e11 < (sizes["sda"] or 0) < 4.9e11
        assert all(d.model for d in f.block_devices)
        assert (f.swap_total_bytes, f.swap_used_bytes) == (8 * GIB, 0)
        gpu_bytes = sum(g.mem_total_mib or 0 for g in f.gpus) * 1024 ** 2
        assert f.mem_total_bytes == 2 * 1024 ** 4 and f.mem_total_bytes >= 2 * gpu_bytes
        assert (f.cpu_cores_physical, f.numa_nodes) == (112, 2)
        assert (f.cpu_cores_physical or 0) // len(f.gpus) == 14
        (data,) = hello.datasets
        assert data.device == "nvme0n1"
        assert data.free_bytes is not None and data.total_bytes is not None
        assert 0 < data.free_bytes < data.total_bytes < (sizes["nvme0n1"] or 0)
        assert lines[1]["host"]["mem_total_bytes"] == f.mem_total_bytes

    def test_low_ram_is_under_one_and_a_half_times_gpu_memory(self) -> None:
        lines, hello = _sim("low-ram")
        f = hello.facts
        gpu_bytes = sum(g.mem_total_mib or 0 for g in f.gpus) * 1024 ** 2
        assert f.mem_total_bytes == 768 * GIB
        assert (f.mem_total_bytes or 0) < 1.5 * gpu_bytes
        sample = lines[1]["host"]
        assert sample["mem_total_bytes"] == 768 * GIB
        assert sample["mem_used_bytes"] < sample["mem_total_bytes"]
        assert f.driver_version == "550.90.07"  # nothing else changes
        assert f.software.nccl == "2.21.5"
        assert f.simulated == ("low-ram",)

    def test_driver_skew_changes_only_the_driver_stack(self) -> None:
        _, skew = _sim("driver-skew")
        _, base = _sim("healthy")
        f = skew.facts
        assert (f.driver_version, f.cuda_version) == ("535.183.01", "12.2")
        assert (f.software.fabric_manager, f.software.nccl) == ("535.183.01", "2.18.3")
        assert f.software.nvcc == base.facts.software.nvcc == "12.4.131"
        assert f.software.torch == "2.4.0"
        assert f.mem_total_bytes == base.facts.mem_total_bytes
        assert f.gpus == base.facts.gpus

    def test_scenarios_combine(self) -> None:
        _, hello = _sim("low-ram,driver-skew,leak:3")
        f = hello.facts
        assert f.mem_total_bytes == 768 * GIB and f.driver_version == "535.183.01"

    @pytest.mark.parametrize("text", ["low-ram:3", "driver-skew@60", "low-ram:1@5"])
    def test_gpu_and_time_are_ignored_as_for_healthy(self, text: str) -> None:
        """Facts-only scenarios have no GPU or time; like ``healthy:3`` the parts are accepted
        and change nothing."""
        name = text.split(":")[0].split("@")[0]
        (parsed,) = parse_scenarios(text)
        assert parsed["name"] == name
        parse_scenarios("healthy:3@5")  # the same rule
        _, with_parts = _sim(text)
        _, plain = _sim(name)
        assert with_parts.facts.mem_total_bytes == plain.facts.mem_total_bytes
        assert with_parts.facts.software == plain.facts.software
        assert with_parts.facts.driver_version == plain.facts.driver_version

    @pytest.mark.parametrize("bad", ["low-ram:9", "lowram", "driver-skew@soon"])
    def test_malformed_new_scenarios_are_refused(self, bad: str) -> None:
        with pytest.raises(ValueError, match="scenario"):
            parse_scenarios(bad)

    def test_scenarios_are_listed_in_the_protocol_doc(self) -> None:
        doc = (REPO / "probes" / "wire" / "PROTOCOL.md").read_text()
        for name in SIM_SCENARIOS:
            assert f"`{name}" in doc


# --------------------------------------------------------------------------- a fake root

def _disk(sys_root: Path, real: str, name: str, sectors: int, rotational: str | None,
          model: str | None) -> None:
    """/sys/block/NAME as a link to where the kernel places the disk, as sysfs does: a SCSI
    disk in ``<h:c:t:l>/block/sdX`` (``device`` is the h:c:t:l), an NVMe namespace in
    ``nvme/nvmeN/nvmeNn1`` (``device`` is the controller)."""
    dev = sys_root / "devices" / real / ("" if name.startswith("nvme") else "block") / name
    _write(dev / "size", f"{sectors}\n")
    if rotational is not None:
        _write(dev / "queue" / "rotational", rotational + "\n")
    if model is not None:
        parent = dev.parent if name.startswith("nvme") else dev.parent.parent
        _write(parent / "model", model)
        (dev / "device").symlink_to(os.path.relpath(parent, dev))
    (sys_root / "block").mkdir(parents=True, exist_ok=True)
    (sys_root / "block" / name).symlink_to(os.path.relpath(dev, sys_root / "block"))


@pytest.fixture
def fake_host(tmp_path: Path) -> dict[str, Path]:
    """bin/ with nvcc, nv-fabricmanager, docker and enroot; a root with /proc/meminfo, NCCL
    libraries and /usr/local/cuda/version.json; a /sys with disks of every kind."""
    bindir = tmp_path / "bin"
    _printer(bindir / "nvcc", NVCC_TEXT)
    _printer(bindir / "nv-fabricmanager", "Fabric Manager version is : 550.54.15\n")
    for name in ("docker", "enroot"):  # found on PATH, never run
        _exe(bindir / name, "import sys\nsys.exit(3)\n")
    root = tmp_path / "root"
    _write(root / "proc" / "meminfo", MEMINFO)
    libs = root / "usr" / "lib" / "x86_64-linux-gnu"
    for name in ("libnccl.so.2.19.3", "libnccl.so.2.9.6", "libnccl.so.2", "libnccl.so",
                 "libnccl_static.a", "libnccl.so.2.19.3.bak"):
        _write(libs / name, "")
    _write(root / "usr" / "local" / "cuda" / "lib64" / "libnccl.so.2.18.1", "")
    _write(root / "usr" / "local" / "cuda" / "version.json", json.dumps({
        "cuda": {"name": "CUDA SDK", "version": "12.4.1"},
        "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": "12.4.127"}}))
    sys_root = tmp_path / "sys"
    pci = "pci0000:00/0000:00:01.0"
    _disk(sys_root, f"{pci}/0000:01:00.0/nvme/nvme0", "nvme0n1", 7501476528, "0",
          "SAMSUNG MZQL23T8HCLS-00A07               ")
    _disk(sys_root, "pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0", "sda",
          7814037168, "1", "ST4000NM0035-1V4")
    _disk(sys_root, "pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0",
          "sdb", 60062500, "1", "Flash Disk      ")
    _disk(sys_root, "pci0000:00/0000:00:02.0/host7/port-7:0/end_device-7:0/target7:0:0/"
          "7:0:0:0", "sdc", 23437770752, "1", "HUH721212AL5200")
    _disk(sys_root, "virtual", "sdd", 1000, None, None)
    _disk(sys_root, "pci0000:00/0000:00:06.0/virtio3/host2/target2:0:0/2:0:0:0", "sde", 2048,
          "1", "QEMU HARDDISK")
    _disk(sys_root, "pci0000:00/0000:00:05.0/virtio2", "vda", 524288000, "1", None)
    for name, size in (("loop0", 1000), ("ram0", 1000), ("zram0", 1000), ("dm-0", 1000),
                       ("nbd0", 0), ("sr0", 1000), ("md0", 0)):
        _disk(sys_root, "virtual", name, size, "0", None)
    data = tmp_path / "data"
    data.mkdir()
    return {"bin": bindir, "root": root, "sys": sys_root, "data": data, "tmp": tmp_path}


def _host_args(h: dict[str, Path], *extra: str) -> list[str]:
    return ["--log-root", str(h["root"]), "--sys-root", str(h["sys"]),
            "--dataset", str(h["data"]), *extra]


def _env(h: dict[str, Path], **extra: str) -> dict[str, str]:
    return {"PATH": str(h["bin"]), **extra}


class TestLookups:
    def test_each_lookup_from_the_fake_root(self, fake_host: dict[str, Path]) -> None:
        lines, hello = _run(_host_args(fake_host), env=_env(fake_host), cwd=fake_host["tmp"])
        sw = hello.facts.software
        assert sw.nvcc == "12.4.131"
        assert sw.nccl == "2.19.3"  # numeric order: 2.9.6 < 2.18.1 < 2.19.3
        assert sw.cuda_runtime == "12.4.127"
        assert sw.fabric_manager == "550.54.15"
        assert sw.container_runtimes == ("docker", "enroot")
        assert sw.torch is None  # the test venv has no torch
        assert lines[0]["host"]["software"]["container_runtimes"] == ["docker", "enroot"]

    def test_block_devices(self, fake_host: dict[str, Path]) -> None:
        _, hello = _run(_host_args(fake_host), env=_env(fake_host))
        got = {d.name: d for d in hello.facts.block_devices}
        assert set(got) == {"nvme0n1", "sda", "sdb", "sdc", "sdd", "sde", "vda"}  # md0: empty
        assert got["nvme0n1"] == BlockDevice("nvme0n1", 7501476528 * 512, False,
                                             "SAMSUNG MZQL23T8HCLS-00A07", "nvme")
        assert got["sda"] == BlockDevice("sda", 7814037168 * 512, True, "ST4000NM0035-1V4",
                                         "sata")
        assert (got["sdb"].transport, got["sdb"].model) == ("usb", "Flash Disk")
        assert got["sdc"].transport == "sas"
        assert got["sdd"] == BlockDevice("sdd", 512000, None, None, None)
        assert (got["vda"].transport, got["vda"].model) == ("virtio", None)
        assert (got["sde"].transport, got["sde"].model) == ("virtio", "QEMU HARDDISK")

    def test_swap_in_use_and_memory_from_meminfo(self, fake_host: dict[str, Path]) -> None:
        _, hello = _run(_host_args(fake_host), env=_env(fake_host))
        f = hello.facts
        assert f.swap_total_bytes == 8388604 * 1024
        assert f.swap_used_bytes == (8388604 - 8126460) * 1024
        assert f.mem_total_bytes == 2113389276 * 1024

    def test_no_swap_is_zero_used_and_no_meminfo_is_unknown(
            self, fake_host: dict[str, Path]) -> None:
        meminfo = fake_host["root"] / "proc" / "meminfo"
        meminfo.write_text("MemTotal: 1000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n")
        _, hello = _run(_host_args(fake_host), env=_env(fake_host))
        assert (hello.facts.swap_total_bytes, hello.facts.swap_used_bytes) == (0, 0)
        meminfo.unlink()
        lines, hello = _run(_host_args(fake_host), env=_env(fake_host))
        assert hello.facts.swap_used_bytes is None and hello.facts.mem_total_bytes is None
        assert lines[0]["host"]["swap_used_bytes"] is None

    def test_dataset_space_from_statvfs(self, fake_host: dict[str, Path]) -> None:
        missing = fake_host["tmp"] / "not-there"
        _, hello = _run(_host_args(fake_host, "--dataset", str(missing)), env=_env(fake_host))
        data, gone = hello.datasets
        st = os.statvfs(fake_host["data"])
        assert data.total_bytes == st.f_blocks * st.f_frsize
        assert data.free_bytes is not None
        assert abs(data.free_bytes - st.f_bavail * st.f_frsize) < 256 * 1024 ** 2
        assert gone == DatasetDevice(str(missing), None, None, None)

    def test_a_hung_mount_does_not_hold_up_the_hello(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        hung = str(tmp_path / "nfs")
        real = os.statvfs

        def statvfs(path: str) -> os.statvfs_result:
            if path == hung:
                time.sleep(5)
            return real(path)

        monkeypatch.setattr(pci.os, "statvfs", statvfs)
        t0 = time.monotonic()
        got = pci.datasets_facts(str(tmp_path), [hung, str(tmp_path)], timeout=0.3)
        assert time.monotonic() - t0 < 2.0
        assert got[0] == {"path": hung, "device": None, "free_bytes": None, "total_bytes": None}
        assert got[1]["path"] == str(tmp_path) and got[1]["total_bytes"]

    def test_package_metadata_wins_and_torch_is_never_imported(
            self, fake_host: dict[str, Path]) -> None:
        site = fake_host["tmp"] / "site"
        for dist, version in (("torch", "2.4.0"), ("nvidia_nccl_cu12", "2.21.5"),
                              ("nvidia_cuda_runtime_cu12", "12.4.127")):
            name = dist.replace("_", "-")
            _write(site / f"{dist}-{version}.dist-info" / "METADATA",
                   f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        _write(site / "torch" / "__init__.py", "raise SystemExit('torch was imported')\n")
        _, hello = _run(_host_args(fake_host), isolated=False,
                        env=_env(fake_host, PYTHONPATH=str(site)))
        sw = hello.facts.software
        assert (sw.torch, sw.nccl, sw.cuda_runtime) == ("2.4.0", "2.21.5", "12.4.127")

    def test_fallbacks_nvcc_under_usr_local_cuda_and_version_txt(
            self, fake_host: dict[str, Path]) -> None:
        for name in ("nvcc", "nv-fabricmanager"):
            (fake_host["bin"] / name).unlink()
        cuda = fake_host["root"] / "usr" / "local" / "cuda"
        (cuda / "version.json").unlink()
        _write(cuda / "version.txt", "CUDA Version 11.0.228\n")
        _printer(cuda / "bin" / "nvcc", NVCC_118)
        _, hello = _run(_host_args(fake_host), env=_env(fake_host))
        sw = hello.facts.software
        assert (sw.nvcc, sw.cuda_runtime, sw.fabric_manager) == ("11.8.89", "11.0.228", None)

    def test_nothing_installed_is_none_not_empty_text(self, tmp_path: Path) -> None:
        empty = tmp_path / "empty"
        empty.mkdir()
        _, hello = _run(["--log-root", str(empty), "--sys-root", str(empty)],
                        env={"PATH": str(empty)})
        assert hello.facts.software == SoftwareVersions()
        assert hello.facts.block_devices == ()

    def test_hung_or_failing_tool_is_bounded_and_unknown(
            self, fake_host: dict[str, Path]) -> None:
        _exe(fake_host["bin"] / "nvcc", "import time\ntime.sleep(60)\n")
        _exe(fake_host["bin"] / "nv-fabricmanager",
             "import sys\nprint('Fabric Manager version is : 1.2.3')\nsys.exit(1)\n")
        t0 = time.monotonic()
        _, hello = _run(_host_args(fake_host), env=_env(fake_host))
        assert time.monotonic() - t0 < software.SOFTWARE_TIMEOUT_S + 4.0
        assert (hello.facts.software.nvcc, hello.facts.software.fabric_manager) == (None, None)

    def test_no_file_is_written(self, fake_host: dict[str, Path]) -> None:
        marker = fake_host["tmp"] / "ran"
        _exe(fake_host["bin"] / "docker", f"open({str(marker)!r}, 'w').close()\n")
        before = _tree(fake_host["tmp"])
        _run(_host_args(fake_host), env=_env(fake_host), cwd=fake_host["tmp"])
        assert not marker.exists()  # runtimes are looked up on PATH, not run
        assert _tree(fake_host["tmp"]) == before


class TestParsing:
    @pytest.mark.parametrize(("text", "version"), [
        (NVCC_TEXT, "12.4.131"), (NVCC_118, "11.8.89"),
        ("Cuda compilation tools, release 9.0, V9.0.176\n", "9.0.176"),
        ("Cuda compilation tools, release 12.4\n", "12.4"), ("", None), ("garbage", None),
    ])
    def test_nvcc_release(self, text: str, version: str | None) -> None:
        assert software.parse_nvcc_version(text) == version

    @pytest.mark.parametrize(("text", "value"), [
        ("Enabled", True), ("Disabled", False), ("[N/A]", None), ("[Not Supported]", None),
        ("N/A", None), ("", None), (None, None),
    ])
    def test_smi_modes(self, text: str | None, value: bool | None) -> None:
        f = smi.smi_gpu_facts({"persistence_mode": text, "ecc.mode.current": text,
                                     "mig.mode.current": text})
        assert f["persistence_mode"] is f["ecc_mode"] is f["mig_mode"] is value
        assert f["ecc_mode_pending"] is None and f["serial"] is None

    def test_smi_default_limit(self) -> None:
        assert smi.smi_gpu_facts({"power.default_limit": "700.00"})[
            "power_limit_default_w"] == 700.0
        assert smi.smi_gpu_facts({"power.default_limit": "[N/A]"})[
            "power_limit_default_w"] is None


# --------------------------------------------------------------------------- GPU back-ends

class TestGpuFacts:
    def test_nvidia_smi_fallback_from_a_real_capture(
            self, fake_smi: Callable[[str], dict[str, str]]) -> None:
        lines, hello = _run([], env=fake_smi("csv"), isolated=True)
        assert by_type(lines, "error") == []
        assert hello.facts.driver_version == "590.48.01"
        for g in hello.facts.gpus:
            assert (g.serial, g.vbios) == ("1650124078813", "96.00.74.00.1C")
            assert (g.persistence_mode, g.ecc_mode, g.ecc_mode_pending, g.mig_mode) == (
                True, True, True, False)
            assert g.power_limit_default_w == 700.0

    def test_nvidia_smi_that_rejects_a_field(self, tmp_path: Path) -> None:
        """The rejected field is dropped (unknown), the others still arrive."""
        _exe(tmp_path / "bin" / "nvidia-smi", FAKE_SMI)
        env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin"}
        _, hello = _run(["--sys-root", str(tmp_path)], env=env)
        assert hello.facts.driver_version == "535.183.01"
        assert [g.bus_id for g in hello.facts.gpus] == ["0000:41:00.0", "0000:42:00.0"]
        g = hello.facts.gpus[1]
        assert (g.serial, g.vbios) == ("1323321012345", "92.00.45.00.06")
        assert (g.persistence_mode, g.ecc_mode, g.ecc_mode_pending) == (False, True, False)
        assert (g.mig_mode, g.power_limit_default_w) == (None, None)

    def test_nvml(self, tmp_path: Path) -> None:
        base = REPO / "tests" / "data" / "fake_pynvml" / "pynvml.py"
        _write(tmp_path / "nvml" / "pynvml.py", NVML_EXTRA.format(base=str(base)))
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "nvml"),
               "FAKE_NVML": ""}
        _, hello = _run([], env=env, isolated=False)
        g0, g1, g2, g3 = hello.facts.gpus
        assert (g0.serial, g1.serial) == ("1650124078813", "1650124078801")
        assert {g.vbios for g in hello.facts.gpus} == {"96.00.89.00.01"}
        assert (g0.persistence_mode, g1.persistence_mode) == (True, False)
        assert (g0.ecc_mode, g0.ecc_mode_pending) == (True, True)
        assert (g1.ecc_mode, g1.ecc_mode_pending) == (True, False)
        assert (g3.ecc_mode, g3.ecc_mode_pending) == (None, None)  # NotSupported
        assert (g0.mig_mode, g1.mig_mode, g2.mig_mode) == (False, False, None)
        assert (g0.power_limit_default_w, g1.power_limit_default_w) == (700.0, None)

    def test_nvml_binding_without_the_calls(self) -> None:
        """The stock fake lacks serial, VBIOS, ECC/MIG mode and default limit: all None."""
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "tests" / "data" /
                                                         "fake_pynvml"), "FAKE_NVML": ""}
        _, hello = _run([], env=env, isolated=False)
        g = hello.facts.gpus[0]
        assert (g.serial, g.vbios, g.ecc_mode, g.mig_mode, g.power_limit_default_w) == (
            None, None, None, None, None)
        assert g.persistence_mode is True


# --------------------------------------------------------------------------- compatibility

OLD_HELLO = {
    "type": "hello", "v": 1, "agent": "0.1.0", "ts": 1796244797.36,
    "host": {"hostname": "gpu-a01", "kernel": "5.15.0-119-generic", "os": "Ubuntu 22.04.4 LTS",
             "python": "3.10.12", "driver_version": "550.90.07", "cuda_version": "12.4",
             "cpu_model": "x", "cpu_cores_logical": 224, "cpu_cores_physical": 112,
             "mem_total_bytes": 2199023255552, "swap_total_bytes": 8589934592},
    "gpus": [{"index": 0, "uuid": "GPU-1", "bus_id": "0000:18:00.0", "name": "H100",
              "mem_total_mib": 81559.0}],
    "probes": {}, "simulated": [], "datasets": [{"path": "/data", "device": "nvme0n1"}],
}


def test_hello_of_an_older_agent_decodes_with_defaults() -> None:
    hello = decode_line(json.dumps(OLD_HELLO))
    assert isinstance(hello, Hello)
    f = hello.facts
    assert f.software == SoftwareVersions() and f.software.container_runtimes == ()
    assert f.block_devices == () and f.swap_used_bytes is None
    g = f.gpus[0]
    assert (g.serial, g.vbios, g.persistence_mode, g.ecc_mode, g.ecc_mode_pending,
            g.mig_mode, g.power_limit_default_w) == (None,) * 7
    assert hello.datasets == (DatasetDevice("/data", "nvme0n1", None, None),)


def test_wrong_types_become_unknown_not_errors() -> None:
    obj = json.loads(json.dumps(OLD_HELLO))
    obj["host"].update(software={"nvcc": 12.4, "container_runtimes": ["docker", 3, None],
                                 "torch": None}, swap_used_bytes="0",
                       block_devices=[{"name": "sda", "size_bytes": "1", "rotational": 1},
                                      {"size_bytes": 5}, "nvme0n1"])
    obj["gpus"][0].update(persistence_mode="Enabled", ecc_mode=1, serial=1650124078813,
                          power_limit_default_w="700 W")
    obj["datasets"][0].update(free_bytes=None, total_bytes=True)
    hello = decode_line(json.dumps(obj))
    assert isinstance(hello, Hello)
    f = hello.facts
    assert f.software == SoftwareVersions(container_runtimes=("docker",))
    assert f.swap_used_bytes is None
    assert f.block_devices == (BlockDevice("sda"),)
    g = f.gpus[0]
    assert (g.persistence_mode, g.ecc_mode, g.serial, g.power_limit_default_w) == (
        None, None, None, None)
    assert hello.datasets[0].total_bytes is None
    obj["host"]["software"] = "12.4"
    again = decode_line(json.dumps(obj))
    assert isinstance(again, Hello) and again.facts.software == SoftwareVersions()


# --------------------------------------------------------------------------- this machine

def test_real_host_without_gpus() -> None:
    """This machine (no GPU): the look-ups run against the real host and the hello decodes."""
    lines, hello = _run(["--dataset", str(REPO)], env=dict(os.environ))
    host = lines[0]["host"]
    assert set(host["software"]) == {"nvcc", "nccl", "torch", "cuda_runtime",
                                     "container_runtimes", "fabric_manager"}
    assert hello.facts.gpus == ()
    skip = ("loop", "ram", "zram", "fd", "sr", "dm-", "nbd")
    disks = []
    for name in sorted(os.listdir("/sys/block")):
        size = Path("/sys/block", name, "size").read_text().strip()
        if not name.startswith(skip) and size != "0":
            disks.append((name, int(size) * 512))
    assert [(d.name, d.size_bytes) for d in hello.facts.block_devices] == disks
    assert bool(hello.facts.block_devices) == bool(disks)
    assert hello.facts.swap_used_bytes is not None and hello.facts.swap_used_bytes >= 0
    assert hello.datasets[0].total_bytes and hello.datasets[0].free_bytes is not None
