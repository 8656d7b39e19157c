#!/usr/bin/env python3
"""rigwatch agent: reads a GPU host and streams protocol-v1 NDJSON on stdout.

One file, standard library only, Python >= 3.8, so it can be sent to any host's
stock ``python3`` over an SSH channel and run without writing a file.  It uses
``pynvml`` (nvidia-ml-py) and ``psutil`` when the host has them and falls back
to ``nvidia-smi`` and ``/proc``.  It is read-only: it never writes files, changes
GPU settings or needs root.  Every GPU call runs off the main thread with a
deadline, so a hung driver never stops host and disk samples.

Run it as ``python3 -m probes.agent``, ``python3 - --once < agent.py``, or through
the console's bootstrap, which sends this source over stdin and keeps stdin open:
with ``--stdin-eof-exit`` the agent exits as soon as the console goes away.
The kernel log is followed read-only through ``journalctl``, else ``dmesg``, else a
syslog file, and the agent says which (and what refused it) in a ``logsource`` message.
The protocol is described in ``probes/wire/PROTOCOL.md``; the simulator (``--simulate``)
emits the same protocol for a realistic 8-GPU host.
"""

from __future__ import annotations

import argparse
import calendar
import csv
import errno
import functools
import glob
import json
import math
import os
import platform
import random
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings

AGENT_VERSION = "0.1.0"
PROTOCOL_VERSION = 1
SMI_TIMEOUT_S = 5.0
GPU_DEADLINE_S = 4.0
MAX_TAIL_BYTES_PER_TICK = 64 * 1024
MAX_EVENT_LINE = 8192
MAX_TAILED_FILES = 64
MAX_PROCESSES = 64
NVML_SLOW_EVERY = 10
NVML_PROCS_EVERY = 5
PCIE_EVERY_TICKS = 30
LOG_GLOB_EVERY_S = 10.0

# Bit values of nvmlClocksEventReason* (same bits as the older ThrottleReason names).
CLOCK_REASON_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
NA_MARKERS = ("n/a", "[n/a]", "[not supported]", "not supported", "", "[unknown error]",
              "[requested functionality has been deprecated]", "unknown error")


# --------------------------------------------------------------------------- output

class Writer(object):
    """Writes one JSON object per line; exits the process when stdout is gone."""

    def __init__(self, stream):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj):
        line = json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n"
        with self._lock:
            try:
                self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                exit_now(0)


def watch_stdin_eof():
    """Exit when the console closes our stdin, so no orphan stays on the host."""

    def run():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        exit_now(0)

    t = threading.Thread(target=run, name="stdin-eof", daemon=True)
    t.start()


# --------------------------------------------------------------------------- commands

_CHILDREN = set()  # type: set[subprocess.Popen]
_CHILDREN_LOCK = threading.Lock()


def exit_now(code=0):
    """Leave at once, killing commands still running so none outlives the agent."""
    with _CHILDREN_LOCK:
        for proc in list(_CHILDREN):
            try:
                proc.kill()
            except OSError:
                pass
    os._exit(code)


def run_command(argv, timeout):
    """Run a read-only command with a deadline.

    Returns (returncode, stdout, stderr); returncode None means it timed out.  A
    child stuck in D state cannot be reaped, so after the kill we wait only
    briefly and abandon it rather than block the stream.
    """
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        return -1, "", str(exc)
    with _CHILDREN_LOCK:
        _CHILDREN.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            out, err = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None, "", "timed out after %gs (process abandoned)" % timeout
        return None, _text(out), "timed out after %gs" % timeout
    finally:
        if proc.poll() is not None:
            with _CHILDREN_LOCK:
                _CHILDREN.discard(proc)
    return proc.returncode, _text(out), _text(err)


def _text(data):
    if data is None:
        return ""
    return data.decode("utf-8", "replace")


def read_text(path):
    try:
        with open(path, "r") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------- value parsing

def parse_number(text):
    """A measured value from nvidia-smi CSV: strip units, None for N/A markers."""
    if text is None:
        return None
    s = text.strip()
    if s.lower() in NA_MARKERS:
        return None
    m = re.match(r"^[-+]?\d+(?:\.\d+)?", s)
    if not m:
        return None
    value = float(m.group(0))
    return value if math.isfinite(value) else None


def parse_int(text):
    v = parse_number(text)
    return int(v) if v is not None else None


def parse_str(text):
    if text is None:
        return None
    s = text.strip()
    return None if s.lower() in NA_MARKERS else s


def parse_yes(text):
    """'Yes'/'Enabled'/'1' -> True, 'No'/'Disabled'/'0' -> False, markers -> None."""
    value = parse_str(text)
    if value is None:
        return None
    low = value.lower()
    if low in ("yes", "enabled", "1", "true", "active"):
        return True
    if low in ("no", "disabled", "0", "false", "not active"):
        return False
    return None


def decode_reasons(mask):
    if mask is None:
        return []
    return [name for bit, name in CLOCK_REASON_BITS if mask & bit]


def normalise_bus_id(bus_id):
    """'00000000:3B:00.0' -> '0000:3b:00.0': lowercase, an all-zero domain cut to 4 digits."""
    if not bus_id:
        return bus_id
    b = bus_id.strip().lower()
    parts = b.split(":")
    if len(parts) == 3 and len(parts[0]) > 4 and set(parts[0]) <= {"0"}:
        parts[0] = parts[0][-4:]
    elif len(parts) == 2:
        parts.insert(0, "0000")
    return ":".join(parts)


# --------------------------------------------------------------------------- host (/proc)

def read_cpu_times():
    text = read_text("/proc/stat")
    if not text:
        return None
    fields = text.splitlines()[0].split()
    if not fields or fields[0] != "cpu":
        return None
    vals = [int(x) for x in fields[1:9]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals), idle


def read_meminfo(root="/"):
    text = read_text(rooted(root, "/proc/meminfo")) or ""
    info = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            try:
                info[parts[0][:-1]] = int(parts[1]) * 1024
            except ValueError:
                pass
    return info


def read_loadavg():
    text = read_text("/proc/loadavg")
    if not text:
        return None, None, None
    parts = text.split()
    try:
        return float(parts[0]), float(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        return None, None, None


def whole_disks():
    """Names of whole block devices (no partitions, loops or RAM disks)."""
    try:
        names = os.listdir("/sys/block")
    except OSError:
        return None
    skip = ("loop", "ram", "zram", "fd", "sr")
    return set(n for n in names if not n.startswith(skip))


def read_diskstats(allowed):
    """/proc/diskstats -> {name: [fields 4..20 as ints]} for the allowed devices."""
    return parse_diskstats(read_text("/proc/diskstats"), allowed)


def parse_diskstats(text, allowed):
    """The text of /proc/diskstats -> {name: [fields 4..20 as ints]}; partitions,
    loop and RAM devices are left out unless ``allowed`` names them."""
    out = {}
    if not text:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        name = parts[2]
        if allowed is not None and name not in allowed:
            continue
        partition = re.search(r"\d$", name) and not name.startswith(("nvme", "dm-", "md"))
        if allowed is None and (partition
                                or name.startswith(("loop", "ram"))):
            continue
        try:
            nums = [int(x) for x in parts[3:]]
        except ValueError:
            continue
        nums += [0] * (17 - len(nums))
        out[name] = nums
    return out


def disk_rates(old, new, dt):
    """iostat -x figures from two /proc/diskstats readings dt seconds apart (sysstat formulas)."""
    out = {}
    if dt <= 0:
        return out
    for name, n in new.items():
        o = old.get(name)
        if o is None:
            continue
        d = [max(0, b - a) for a, b in zip(o, n)]
        reads, rsect, rms = d[0], d[2], d[3]
        writes, wsect, wms = d[4], d[6], d[7]
        io_ticks, in_queue = d[9], d[10]
        out[name] = {
            "r_s": round(reads / dt, 2),
            "w_s": round(writes / dt, 2),
            "rkb_s": round(rsect / 2.0 / dt, 2),
            "wkb_s": round(wsect / 2.0 / dt, 2),
            "r_await": round(rms / float(reads), 2) if reads else 0.0,
            "w_await": round(wms / float(writes), 2) if writes else 0.0,
            "aqu_sz": round(in_queue / (dt * 1000.0), 2),
            "util": round(min(100.0, io_ticks / (dt * 1000.0) * 100.0), 2),
        }
    return out


def cpu_model():
    text = read_text("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def physical_cores():
    text = read_text("/proc/cpuinfo") or ""
    cores = set()
    phys = core = None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if phys is not None or core is not None:
                cores.add((phys, core))
            phys = core = None
        elif line.startswith("physical id"):
            phys = line.split(":", 1)[1].strip()
        elif line.startswith("core id"):
            core = line.split(":", 1)[1].strip()
    return len(cores) or None


def os_name():
    text = read_text("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else platform.system()


class HostReader(object):
    """CPU %, load, memory, swap and disks from /proc (psutil only for memory when present)."""

    def __init__(self):
        self._cpu = read_cpu_times()
        self._disks_allowed = whole_disks()
        self._disk = read_diskstats(self._disks_allowed)
        self._swap = read_vmstat()
        self._t = time.monotonic()

    def sample(self):
        now = time.monotonic()
        dt = now - self._t
        cpu = read_cpu_times()
        cpu_pct = None
        if cpu and self._cpu and cpu[0] > self._cpu[0]:
            total = cpu[0] - self._cpu[0]
            idle = cpu[1] - self._cpu[1]
            cpu_pct = round(100.0 * (total - idle) / total, 1)
        self._cpu = cpu
        disk = read_diskstats(self._disks_allowed)
        disks = disk_rates(self._disk, disk, dt)
        self._disk = disk
        swap = read_vmstat()
        swap_in = swap_out = None
        if swap is not None and self._swap is not None and dt > 0:
            swap_in = round(max(0, swap[0] - self._swap[0]) / dt, 2)
            swap_out = round(max(0, swap[1] - self._swap[1]) / dt, 2)
        self._swap = swap
        self._t = now
        mem = read_meminfo()
        total = mem.get("MemTotal")
        avail = mem.get("MemAvailable", mem.get("MemFree"))
        swap_total = mem.get("SwapTotal")
        swap_free = mem.get("SwapFree")
        l1, l5, l15 = read_loadavg()
        host = {
            "cpu_pct": cpu_pct, "load1": l1, "load5": l5, "load15": l15,
            "mem_used_bytes": total - avail if total is not None and avail is not None else None,
            "mem_total_bytes": total,
            "swap_used_bytes": (swap_total - swap_free
                                if swap_total is not None and swap_free is not None else None),
            "swap_total_bytes": swap_total,
            "swap_in_pages_s": swap_in, "swap_out_pages_s": swap_out,
        }
        return host, disks


def host_facts(root="/"):
    mem = read_meminfo(root)
    uname = platform.uname()
    swap_total, swap_free = mem.get("SwapTotal"), mem.get("SwapFree")
    return {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "os": os_name(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_physical": physical_cores(),
        "mem_total_bytes": mem.get("MemTotal"),
        "swap_total_bytes": swap_total,
        "swap_used_bytes": (max(0, swap_total - swap_free)
                            if swap_total is not None and swap_free is not None else None),
        "driver_version": None,
        "cuda_version": None,
    }


# ------------------------------------------------------------------- sysfs: PCIe, NUMA, NICs

_BDF_NAME = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def _sys_value(path):
    text = read_text(path)
    return text.strip() if text is not None else None


def link_speed_gts(text):
    """'16.0 GT/s PCIe' -> 16.0; 'Unknown' or absent -> None."""
    m = re.match(r"\s*([\d.]+)\s*GT/s", text or "")
    return float(m.group(1)) if m else None


def numa_of(path):
    value = parse_int(_sys_value(os.path.join(path, "numa_node")))
    return value if value is not None and value >= 0 else None


def pci_link(path):
    """One PCI function's link from sysfs: what it trained at and what it can do."""
    return {
        "address": normalise_bus_id(os.path.basename(path)),
        "speed_gts": link_speed_gts(_sys_value(os.path.join(path, "current_link_speed"))),
        "width": parse_int(_sys_value(os.path.join(path, "current_link_width"))),
        "max_speed_gts": link_speed_gts(_sys_value(os.path.join(path, "max_link_speed"))),
        "max_width": parse_int(_sys_value(os.path.join(path, "max_link_width"))),
        "numa_node": numa_of(path),
        "local_cpulist": _sys_value(os.path.join(path, "local_cpulist")),
    }


def pci_chain(sys_root, bus_id):
    """The GPU's link and those of the bridges above it, GPU first, up to the root port."""
    if not bus_id:
        return []
    start = os.path.join(sys_root, "bus", "pci", "devices", bus_id)
    if not os.path.exists(start):
        return []
    path = os.path.realpath(start)
    chain = []
    while _BDF_NAME.match(os.path.basename(path)) and len(chain) < 16:
        chain.append(pci_link(path))
        path = os.path.dirname(path)
    return chain


def pci_device_of(sys_root, class_dir):
    """A /sys/class/<x>/<dev> entry's PCI function path, or None for virtual devices."""
    dev = os.path.join(class_dir, "device")
    if not os.path.exists(dev):
        return None
    path = os.path.realpath(dev)
    return path if _BDF_NAME.match(os.path.basename(path)) else None


def list_dir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def read_nics(sys_root):
    """InfiniBand HCAs (ports, state, rate) and physical network interfaces, with NUMA."""
    nics = []
    ib_root = os.path.join(sys_root, "class", "infiniband")
    for name in list_dir(ib_root):
        base = os.path.join(ib_root, name)
        pci = pci_device_of(sys_root, base)
        ports = []
        for port in list_dir(os.path.join(base, "ports")):
            p = os.path.join(base, "ports", port)
            ports.append({"port": parse_int(port), "state": _sys_value(os.path.join(p, "state")),
                          "rate": _sys_value(os.path.join(p, "rate")),
                          "link_layer": _sys_value(os.path.join(p, "link_layer"))})
        nics.append({"name": name, "kind": "infiniband",
                     "address": normalise_bus_id(os.path.basename(pci)) if pci else None,
                     "numa_node": numa_of(pci) if pci else None, "ports": ports})
    net_root = os.path.join(sys_root, "class", "net")
    for name in list_dir(net_root):
        base = os.path.join(net_root, name)
        pci = pci_device_of(sys_root, base)
        if pci is None:
            continue
        nics.append({"name": name, "kind": "net",
                     "address": normalise_bus_id(os.path.basename(pci)),
                     "numa_node": numa_of(pci),
                     "state": _sys_value(os.path.join(base, "operstate")),
                     "speed_mbps": parse_int(_sys_value(os.path.join(base, "speed")))})
    return nics[:64]


def numa_nodes(sys_root):
    names = list_dir(os.path.join(sys_root, "devices", "system", "node"))
    count = len([n for n in names if re.match(r"^node\d+$", n)])
    return count or None


def block_device_of(sys_root, path):
    """The whole disk (as /proc/diskstats names it) that holds ``path``; None if unknown."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    link = os.path.join(sys_root, "dev", "block", "%d:%d" % (os.major(dev), os.minor(dev)))
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def read_vmstat():
    """Pages swapped in and out since boot (pswpin, pswpout)."""
    text = read_text("/proc/vmstat") or ""
    found = dict(re.findall(r"^(pswpin|pswpout) (\d+)$", text, re.M))
    if "pswpin" not in found:
        return None
    return int(found["pswpin"]), int(found.get("pswpout", 0))


MAX_BLOCK_DEVICES = 64
_BLOCK_SKIP = ("loop", "ram", "zram", "fd", "sr", "dm-", "nbd")
_TRANSPORT_PARTS = (("ata", "sata"), ("usb", "usb"), ("end_device-", "sas"),
                    ("session", "iscsi"), ("virtio", "virtio"))


def disk_transport(name, real):
    """How a disk is attached: from its name, else from where sysfs places it (an
    ``ata1`` parent is SATA, ``end_device-*`` SAS, …); None when sysfs does not say."""
    if name.startswith("nvme"):
        return "nvme"
    if name.startswith("vd"):
        return "virtio"
    if name.startswith("xvd"):
        return "xen"
    for part in real.split(os.sep):
        for prefix, kind in _TRANSPORT_PARTS:
            if part.startswith(prefix) and (prefix.endswith("-") or part[len(prefix):].isdigit()):
                return kind
    return None


def read_block_devices(sys_root):
    """Whole disks from /sys/block with size, kind and model.  Loop, RAM, floppy, optical,
    network-block and device-mapper devices are left out (a dm volume sits on disks that
    are listed), and so is a device of size 0 (nothing attached)."""
    base = os.path.join(sys_root, "block")
    out = []
    for name in list_dir(base):
        if name.startswith(_BLOCK_SKIP):
            continue
        path = os.path.join(base, name)
        sectors = parse_int(_sys_value(os.path.join(path, "size")))
        if sectors == 0:
            continue
        rotational = _sys_value(os.path.join(path, "queue", "rotational"))
        model = " ".join((_sys_value(os.path.join(path, "device", "model")) or "").split())
        out.append({"name": name,
                    "size_bytes": sectors * 512 if sectors is not None else None,
                    "rotational": {"0": False, "1": True}.get(rotational),
                    "model": model or None,
                    "transport": disk_transport(name, os.path.realpath(path))})
        if len(out) >= MAX_BLOCK_DEVICES:
            break
    return out


DATASET_TIMEOUT_S = 3.0


def dataset_facts(sys_root, path):
    """A --dataset path: the disk under it and the space left on its file system."""
    free = total = None
    try:
        st = os.statvfs(path)
        free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    except OSError:
        pass
    return {"path": path, "device": block_device_of(sys_root, path), "free_bytes": free,
            "total_bytes": total}


def datasets_facts(sys_root, paths, timeout=DATASET_TIMEOUT_S):
    """dataset_facts of each path, in parallel with a deadline: stat on a hung NFS or
    Lustre mount never returns, and it must not hold up the hello."""
    done = GpuWatchdog(timeout).call_many(
        [(i, functools.partial(dataset_facts, sys_root, p)) for i, p in enumerate(paths)])
    return [done[i][1] if done[i][0] else {"path": p, "device": None, "free_bytes": None,
                                           "total_bytes": None} for i, p in enumerate(paths)]


# ----------------------------------------------------------------- software versions

SOFTWARE_TIMEOUT_S = 3.0
CONTAINER_RUNTIMES = ("docker", "podman", "containerd", "nvidia-container-cli", "enroot",
                      "apptainer", "singularity")
NCCL_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64",
                 "/usr/lib/aarch64-linux-gnu")
_NVCC_RELEASE = re.compile(r"release\s+([\d.]+)(?:,\s*V(\d+(?:\.\d+)+))?")
_VERSION = re.compile(r"\b(\d+\.\d+(?:\.\d+)*)\b")
_NCCL_LIB = re.compile(r"^libnccl\.so\.(\d+)\.(\d+)\.(\d+)$")


def package_version(*names):
    """The installed version of the first of these Python distributions that exists, read
    from its metadata (nothing is imported); None before 3.8 or when none is installed."""
    try:
        from importlib import metadata
    except ImportError:
        return None
    for name in names:
        try:
            return metadata.version(name)
        except Exception:  # PackageNotFoundError, or a broken dist-info
            continue
    return None


def tool_output(argv):
    """stdout and stderr of ``argv`` when it exits 0 within SOFTWARE_TIMEOUT_S, else None."""
    rc, out, err = run_command(argv, SOFTWARE_TIMEOUT_S)
    return out + "\n" + err if rc == 0 else None


def parse_nvcc_version(text):
    """'Cuda compilation tools, release 12.4, V12.4.131' -> '12.4.131' (else '12.4')."""
    m = _NVCC_RELEASE.search(text or "")
    if not m:
        return None
    return m.group(2) or m.group(1)


def nvcc_version(root):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        fallback = rooted(root, "/usr/local/cuda/bin/nvcc")
        nvcc = fallback if os.access(fallback, os.X_OK) else None
    return parse_nvcc_version(tool_output([nvcc, "--version"])) if nvcc else None


def nccl_version(root):
    """NCCL of the pip wheels, else the highest ``libnccl.so.2.X.Y`` in the usual lib dirs."""
    version = package_version("nvidia-nccl-cu12", "nvidia-nccl-cu11")
    if version:
        return version
    found = []
    for top in NCCL_LIB_DIRS:
        for path in glob.glob(os.path.join(rooted(root, top), "libnccl.so.*")):
            m = _NCCL_LIB.match(os.path.basename(path))
            if m:
                found.append(tuple(int(x) for x in m.groups()))
    return ".".join(str(x) for x in max(found)) if found else None


def cuda_runtime_version(root):
    """CUDA runtime of the pip wheels, else /usr/local/cuda's version.json (its cudart
    entry, which numbers like the wheel: 12.4.127; else the toolkit's 12.4.1), else
    version.txt (CUDA 10 and 11.0)."""
    version = package_version("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11")
    if version:
        return version
    text = read_text(rooted(root, "/usr/local/cuda/version.json"))
    try:
        doc = json.loads(text) if text else {}
    except ValueError:
        doc = {}
    for key in ("cuda_cudart", "cuda"):
        entry = doc.get(key) if isinstance(doc, dict) else None
        value = entry.get("version") if isinstance(entry, dict) else None
        if isinstance(value, str) and value.strip():
            return value.strip()
    m = re.search(r"CUDA Version\s+(\d+(?:\.\d+)*)",
                  read_text(rooted(root, "/usr/local/cuda/version.txt")) or "")
    return m.group(1) if m else None


def fabric_manager_version():
    fm = shutil.which("nv-fabricmanager")
    m = _VERSION.search(tool_output([fm, "--version"]) or "") if fm else None
    return m.group(1) if m else None


def software_versions(root):
    """Versions a training job depends on, found without importing or running its code:
    package metadata, library file names, ``--version`` of a tool (each bounded)."""
    return {"nvcc": nvcc_version(root), "nccl": nccl_version(root),
            "torch": package_version("torch"), "cuda_runtime": cuda_runtime_version(root),
            "container_runtimes": [n for n in CONTAINER_RUNTIMES if shutil.which(n)],
            "fabric_manager": fabric_manager_version()}


TOPO_TIMEOUT_S = 10.0
MAX_TOPO_BYTES = 64 * 1024


def capture_topology(smi):
    """``nvidia-smi topo -m`` as printed; the console parses it.  None when it fails."""
    if not smi:
        return None
    rc, out, _ = run_command([smi, "topo", "-m"], TOPO_TIMEOUT_S)
    if rc != 0 or not out.strip():
        return None
    return out[:MAX_TOPO_BYTES]


# --------------------------------------------------------------------------- GPUs: nvidia-smi

SMI_FIELDS = (
    ("index", ()), ("uuid", ()), ("pci.bus_id", ()), ("name", ()),
    ("memory.total", ()), ("memory.used", ()),
    ("utilization.gpu", ()), ("utilization.memory", ()), ("temperature.gpu", ()),
    ("power.draw", ()), ("enforced.power.limit", ("power.limit",)),
    ("clocks.sm", ()), ("clocks.max.sm", ()),
    ("clocks_event_reasons.active", ("clocks_throttle_reasons.active",)),
    ("pcie.link.gen.gpucurrent", ("pcie.link.gen.current",)), ("pcie.link.gen.max", ()),
    ("pcie.link.width.current", ()), ("pcie.link.width.max", ()),
    ("temperature.memory", ()), ("clocks.current.memory", ("clocks.mem",)),
    ("clocks.max.memory", ("clocks.max.mem",)), ("pstate", ()),
    ("ecc.errors.corrected.volatile.total", ()), ("ecc.errors.uncorrected.volatile.total", ()),
    ("ecc.errors.corrected.aggregate.total", ()), ("ecc.errors.uncorrected.aggregate.total", ()),
    ("retired_pages.pending", ()), ("remapped_rows.correctable", ()),
    ("remapped_rows.uncorrectable", ()), ("remapped_rows.pending", ()),
    ("remapped_rows.failure", ()), ("persistence_mode", ()),
)
"""What the fallback asks for; a field an older driver rejects is renamed or dropped."""
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
_NO_HANDLE = re.compile(
    r"Unable to determine the device handle for GPU\s*"
    r"((?:[0-9A-Fa-f]+:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")


class SmiBackend(object):
    """GPUs through ``nvidia-smi --query-gpu``, learning which field names this driver accepts."""

    name = "nvidia-smi"

    def __init__(self, path):
        self.path = path
        self.fields = [(f, list(alts)) for f, alts in SMI_FIELDS]
        self.known = {}

    def _query(self):
        """Run the query; drop or rename fields the driver rejects (older/newer drivers)."""
        for _ in range(len(self.fields) + 1):
            names = [f for f, _ in self.fields]
            rc, out, err = run_command(
                [self.path, "--query-gpu=" + ",".join(names), "--format=csv,noheader,nounits"],
                SMI_TIMEOUT_S)
            if rc is None:
                raise ProbeTimeout("nvidia-smi " + err)
            m = _INVALID_FIELD.search(out + err)
            if m and rc != 0:
                self._replace_field(m.group(1))
                continue
            return names, rc, out, err
        raise ProbeFailed("nvidia-smi rejected every field")

    def _replace_field(self, bad):
        for i, (f, alts) in enumerate(self.fields):
            if f == bad:
                if alts:
                    self.fields[i] = (alts[0], alts[1:])
                else:
                    del self.fields[i]
                return
        raise ProbeFailed("nvidia-smi rejected field %r" % bad)

    def sample(self):
        names, rc, out, err = self._query()
        canon = dict((f, SMI_CANON.get(f, f)) for f in names)
        lost = [normalise_bus_id(b) for b in _NO_HANDLE.findall(out + "\n" + err)]
        gpus = []
        for row in csv.reader(out.splitlines(), skipinitialspace=True):
            if len(row) != len(names):
                continue
            values = dict((canon[n], v) for n, v in zip(names, row))
            gpu = smi_row_to_gpu(values)
            if gpu is not None:
                gpus.append(gpu)
        if rc != 0 and not gpus and not lost:
            raise ProbeFailed("nvidia-smi exit %s: %s" % (rc, (err or out).strip()[:300]))
        by_bus = dict((g.get("bus_id"), g) for g in gpus)
        for bus in lost:
            known = self.known.get(bus)
            if bus not in by_bus:
                gpus.append({"index": known["index"] if known else -1, "uuid":
                             known.get("uuid") if known else None, "bus_id": bus,
                             "state": "lost"})
        return gpus

    def _fact_rows(self):
        """The hello-time query (SMI_FACT_FIELDS) as {field: text} per GPU; a field this
        driver rejects is dropped and the query asked again."""
        names = list(SMI_FACT_FIELDS)
        for _ in range(len(SMI_FACT_FIELDS)):
            rc, out, err = run_command(
                [self.path, "--query-gpu=" + ",".join(names), "--format=csv,noheader,nounits"],
                SMI_TIMEOUT_S)
            m = _INVALID_FIELD.search(out + err)
            if rc is not None and rc != 0 and m and m.group(1) in names[1:]:
                names.remove(m.group(1))
                continue
            return [dict(zip(names, row)) for row in csv.reader(out.splitlines(),
                                                                skipinitialspace=True)
                    if len(row) == len(names)]
        return []

    def facts(self):
        gpus = [g for g in self.sample() if g.get("state") != "lost"]
        self.known = dict((g["bus_id"], g) for g in gpus)
        rows = self._fact_rows()
        driver = parse_str(rows[0].get("driver_version")) if rows else None
        by_index = dict((parse_int(r.get("index")), r) for r in rows)
        _, out, _ = run_command([self.path], SMI_TIMEOUT_S)
        m = re.search(r"CUDA Version:\s*([\d.]+)", out or "")
        info = []
        for g in gpus:
            one = dict((k, g.get(k)) for k in ("index", "uuid", "bus_id", "name", "mem_total_mib"))
            one.update(smi_gpu_facts(by_index.get(g["index"]) or {}))
            info.append(one)
        return {"driver_version": driver, "cuda_version": m.group(1) if m else None,
                "gpus": info}


SMI_FACT_FIELDS = ("index", "driver_version", "serial", "vbios_version", "persistence_mode",
                   "ecc.mode.current", "ecc.mode.pending", "mig.mode.current",
                   "power.default_limit")
"""Asked once for the hello; ``index`` first: it is never dropped."""


def smi_gpu_facts(v):
    """One row of the hello-time query -> the GPU's static facts ([N/A] -> None)."""
    return {"serial": parse_str(v.get("serial")), "vbios": parse_str(v.get("vbios_version")),
            "persistence_mode": parse_yes(v.get("persistence_mode")),
            "ecc_mode": parse_yes(v.get("ecc.mode.current")),
            "ecc_mode_pending": parse_yes(v.get("ecc.mode.pending")),
            "mig_mode": parse_yes(v.get("mig.mode.current")),
            "power_limit_default_w": parse_number(v.get("power.default_limit"))}


SMI_CANON = {
    "power.limit": "enforced.power.limit",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "pcie.link.gen.current": "pcie.link.gen.gpucurrent",
    "clocks.mem": "clocks.current.memory",
    "clocks.max.mem": "clocks.max.memory",
}


def smi_row_to_gpu(v):
    index = parse_int(v.get("index"))
    if index is None:
        return None
    mask = None
    reasons_text = parse_str(v.get("clocks_event_reasons.active"))
    if reasons_text:
        try:
            mask = int(reasons_text, 16)
        except ValueError:
            mask = None
    return {
        "index": index,
        "uuid": parse_str(v.get("uuid")),
        "bus_id": normalise_bus_id(parse_str(v.get("pci.bus_id"))),
        "name": parse_str(v.get("name")),
        "state": "ok",
        "mem_used_mib": parse_number(v.get("memory.used")),
        "mem_total_mib": parse_number(v.get("memory.total")),
        "util_pct": parse_number(v.get("utilization.gpu")),
        "mem_util_pct": parse_number(v.get("utilization.memory")),
        "temp_c": parse_number(v.get("temperature.gpu")),
        "power_w": parse_number(v.get("power.draw")),
        "power_limit_w": parse_number(v.get("enforced.power.limit")),
        "sm_clock_mhz": parse_number(v.get("clocks.sm")),
        "sm_clock_max_mhz": parse_number(v.get("clocks.max.sm")),
        "clock_reasons": decode_reasons(mask),
        "pcie_gen": parse_int(v.get("pcie.link.gen.gpucurrent")),
        "pcie_gen_max": parse_int(v.get("pcie.link.gen.max")),
        "pcie_width": parse_int(v.get("pcie.link.width.current")),
        "pcie_width_max": parse_int(v.get("pcie.link.width.max")),
        "temp_mem_c": parse_number(v.get("temperature.memory")),
        "mem_clock_mhz": parse_number(v.get("clocks.current.memory")),
        "mem_clock_max_mhz": parse_number(v.get("clocks.max.memory")),
        "pstate": parse_str(v.get("pstate")),
        "ecc_corrected_volatile": parse_int(v.get("ecc.errors.corrected.volatile.total")),
        "ecc_uncorrected_volatile": parse_int(v.get("ecc.errors.uncorrected.volatile.total")),
        "ecc_corrected_aggregate": parse_int(v.get("ecc.errors.corrected.aggregate.total")),
        "ecc_uncorrected_aggregate": parse_int(v.get("ecc.errors.uncorrected.aggregate.total")),
        "retired_pages_pending": parse_yes(v.get("retired_pages.pending")),
        "remap_correctable": parse_int(v.get("remapped_rows.correctable")),
        "remap_uncorrectable": parse_int(v.get("remapped_rows.uncorrectable")),
        "remap_pending": parse_yes(v.get("remapped_rows.pending")),
        "remap_failure": parse_yes(v.get("remapped_rows.failure")),
        "persistence": parse_yes(v.get("persistence_mode")),
    }


# --------------------------------------------------------------------------- GPUs: NVML

class NvmlBackend(object):
    """GPUs through NVML (``pynvml`` from nvidia-ml-py), the cheap path when the host has it."""

    name = "nvml"

    def __init__(self, nvml):
        self.nv = nvml
        self.nv.nvmlInit()
        self.handles = [self.nv.nvmlDeviceGetHandleByIndex(i)
                        for i in range(self.nv.nvmlDeviceGetCount())]
        self.static = {}
        self.slow = {}
        self.procs = {}
        self.ticks = {}

    def _q(self, fn, *args, **kwargs):
        """One NVML call: unsupported or unavailable values become None, a lost GPU raises."""
        func = getattr(self.nv, fn, None)
        if func is None:
            return None
        try:
            return func(*args, **kwargs)
        except self.nv.NVMLError as exc:
            lost = [getattr(self.nv, n, None) for n in ("NVMLError_GpuIsLost",
                                                        "NVMLError_ResetRequired")]
            if any(c is not None and isinstance(exc, c) for c in lost):
                raise GpuLost(str(exc)) from None
            return None

    def _text(self, value):
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return value

    def _memory(self, h):
        mem = None
        v2 = getattr(self.nv, "nvmlMemory_v2", None)
        if v2 is not None:
            try:
                mem = self.nv.nvmlDeviceGetMemoryInfo(h, version=v2)
            except (TypeError, self.nv.NVMLError):
                mem = None
        if mem is None:
            mem = self._q("nvmlDeviceGetMemoryInfo", h)
        if mem is None:
            return None, None
        return round(mem.used / 1048576.0, 1), round(mem.total / 1048576.0, 1)

    def _reasons(self, h):
        mask = self._q("nvmlDeviceGetCurrentClocksEventReasons", h)
        if mask is None:
            mask = self._q("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return decode_reasons(mask)

    def _const(self, name, default):
        return getattr(self.nv, name, default)

    def _fast(self, i, h):
        """Fields that move every second: memory, load, thermals, power, clocks, link."""
        st = self.static.get(i) or {}
        used, total = self._memory(h)
        util = self._q("nvmlDeviceGetUtilizationRates", h)
        power = self._q("nvmlDeviceGetPowerUsage", h)
        limit = self._q("nvmlDeviceGetEnforcedPowerLimit", h)
        pstate = self._q("nvmlDeviceGetPerformanceState", h)
        sm = self._const("NVML_CLOCK_SM", 1)
        mem = self._const("NVML_CLOCK_MEM", 2)
        return {
            "index": i, "uuid": st.get("uuid"), "state": "ok",
            "mem_used_mib": used, "mem_total_mib": total,
            "util_pct": float(util.gpu) if util is not None else None,
            "mem_util_pct": float(util.memory) if util is not None else None,
            "temp_c": self._q("nvmlDeviceGetTemperature", h,
                              self._const("NVML_TEMPERATURE_GPU", 0)),
            "power_w": round(power / 1000.0, 2) if power is not None else None,
            "power_limit_w": round(limit / 1000.0, 2) if limit is not None else None,
            "sm_clock_mhz": self._q("nvmlDeviceGetClockInfo", h, sm),
            "sm_clock_max_mhz": self._cached(i, "sm_max", "nvmlDeviceGetMaxClockInfo", h, sm),
            "mem_clock_mhz": self._q("nvmlDeviceGetClockInfo", h, mem),
            "mem_clock_max_mhz": self._cached(i, "mem_max", "nvmlDeviceGetMaxClockInfo", h, mem),
            "clock_reasons": self._reasons(h),
            "pstate": "P%d" % pstate if isinstance(pstate, int) and 0 <= pstate < 32 else None,
            "pcie_gen": self._q("nvmlDeviceGetCurrPcieLinkGeneration", h),
            "pcie_gen_max": self._cached(i, "gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", h),
            "pcie_width": self._q("nvmlDeviceGetCurrPcieLinkWidth", h),
            "pcie_width_max": self._cached(i, "width_max", "nvmlDeviceGetMaxPcieLinkWidth", h),
        }

    def _cached(self, i, key, fn, *args):
        """A value that cannot change while the driver is loaded: ask once."""
        box = self.static.setdefault(i, {})
        if box.get(key) is None:
            box[key] = self._q(fn, *args)
        return box[key]

    def _ecc(self, h):
        corr = self._const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        unc = self._const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        vol = self._const("NVML_VOLATILE_ECC", 0)
        agg = self._const("NVML_AGGREGATE_ECC", 1)
        get = "nvmlDeviceGetTotalEccErrors"
        return {"ecc_corrected_volatile": self._q(get, h, corr, vol),
                "ecc_uncorrected_volatile": self._q(get, h, unc, vol),
                "ecc_corrected_aggregate": self._q(get, h, corr, agg),
                "ecc_uncorrected_aggregate": self._q(get, h, unc, agg)}

    def _nvlink(self, h):
        """(links up, links present); (None, None) on GPUs without NVLink."""
        up = present = 0
        for link in range(self._const("NVML_NVLINK_MAX_LINKS", 18)):
            state = self._q("nvmlDeviceGetNvLinkState", h, link)
            if state is None:
                continue
            present += 1
            up += 1 if state else 0
        return (up, present) if present else (None, None)

    def _memory_temp(self, h):
        """HBM temperature through field values (NVML_FI_DEV_MEMORY_TEMP); None if absent."""
        field_id = self._const("NVML_FI_DEV_MEMORY_TEMP", 82)
        values = self._q("nvmlDeviceGetFieldValues", h, [field_id])
        try:
            v = values[0]
            if getattr(v, "nvmlReturn", 1) != 0:
                return None
            temp = v.value.uiVal
        except (TypeError, IndexError, AttributeError):
            return None
        return float(temp) if 0 < temp < 200 else None

    def _slow(self, h):
        """Fields that change rarely or cost more (the PCIe throughput call samples 20 ms)."""
        out = self._ecc(h)
        pending = self._q("nvmlDeviceGetRetiredPagesPendingStatus", h)
        out["retired_pages_pending"] = bool(pending) if pending is not None else None
        rows = self._q("nvmlDeviceGetRemappedRows", h)
        if rows is not None and len(rows) >= 4:
            out.update({"remap_correctable": rows[0], "remap_uncorrectable": rows[1],
                        "remap_pending": bool(rows[2]), "remap_failure": bool(rows[3])})
        else:
            out.update({"remap_correctable": None, "remap_uncorrectable": None,
                        "remap_pending": None, "remap_failure": None})
        out["nvlink_up"], out["nvlink_links"] = self._nvlink(h)
        mode = self._q("nvmlDeviceGetPersistenceMode", h)
        out["persistence"] = bool(mode) if mode is not None else None
        out["pcie_replay"] = self._q("nvmlDeviceGetPcieReplayCounter", h)
        tx = self._q("nvmlDeviceGetPcieThroughput", h, self._const("NVML_PCIE_UTIL_TX_BYTES", 0))
        rx = self._q("nvmlDeviceGetPcieThroughput", h, self._const("NVML_PCIE_UTIL_RX_BYTES", 1))
        out["pcie_tx_kbs"], out["pcie_rx_kbs"] = tx, rx
        out["temp_mem_c"] = self._memory_temp(h)
        return out

    def _processes(self, h):
        procs = self._q("nvmlDeviceGetComputeRunningProcesses", h)
        if procs is None:
            return None
        out = []
        for p in procs[:MAX_PROCESSES]:
            pid = getattr(p, "pid", None)
            used = getattr(p, "usedGpuMemory", None)
            name, user = process_owner(pid)
            out.append({"pid": pid, "name": name, "user": user,
                        "used_mib": round(used / 1048576.0, 1) if isinstance(used, int) else None})
        return out

    def sample_gpu(self, i):
        """One GPU; slow fields and the process list are refreshed every few ticks."""
        h = self.handles[i]
        tick = self.ticks.get(i, 0)
        self.ticks[i] = tick + 1
        try:
            gpu = self._fast(i, h)
            if tick % NVML_SLOW_EVERY == 0 or i not in self.slow:
                self.slow[i] = self._slow(h)
            if tick % NVML_PROCS_EVERY == 0 or i not in self.procs:
                self.procs[i] = self._processes(h)
        except GpuLost:
            return {"index": i, "uuid": (self.static.get(i) or {}).get("uuid"), "state": "lost"}
        gpu.update(self.slow[i])
        gpu["processes"] = self.procs[i]
        return gpu

    def gpu_indices(self):
        return list(range(len(self.handles)))

    def sample(self):
        return [self.sample_gpu(i) for i in self.gpu_indices()]

    def _static_facts(self, h):
        """Serial, VBIOS and the modes a preflight compares across GPUs (None: unsupported)."""
        persistence = self._q("nvmlDeviceGetPersistenceMode", h)
        ecc = _mode_pair(self._q("nvmlDeviceGetEccMode", h))
        mig = _mode_pair(self._q("nvmlDeviceGetMigMode", h))
        default = self._q("nvmlDeviceGetPowerManagementDefaultLimit", h)
        return {"serial": self._text(self._q("nvmlDeviceGetSerial", h)),
                "vbios": self._text(self._q("nvmlDeviceGetVbiosVersion", h)),
                "persistence_mode": bool(persistence) if persistence is not None else None,
                "ecc_mode": ecc[0], "ecc_mode_pending": ecc[1], "mig_mode": mig[0],
                "power_limit_default_w": (round(default / 1000.0, 2)
                                          if isinstance(default, (int, float)) else None)}

    def facts(self):
        gpus = []
        shutdown = self._const("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0)
        slowdown = self._const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
        for i, h in enumerate(self.handles):
            pci = self._q("nvmlDeviceGetPciInfo", h)
            bus = self._text(getattr(pci, "busId", None)) if pci is not None else None
            try:
                _, total = self._memory(h)
                temps = (self._q("nvmlDeviceGetTemperatureThreshold", h, slowdown),
                         self._q("nvmlDeviceGetTemperatureThreshold", h, shutdown))
                gen_gpu = self._q("nvmlDeviceGetGpuMaxPcieLinkGeneration", h)
                static = self._static_facts(h)
            except GpuLost:
                total, temps, gen_gpu, static = None, (None, None), None, {}
            info = {"index": i, "uuid": self._text(self._q("nvmlDeviceGetUUID", h)),
                    "bus_id": normalise_bus_id(bus),
                    "name": self._text(self._q("nvmlDeviceGetName", h)),
                    "mem_total_mib": total,
                    "temp_slowdown_c": temps[0], "temp_shutdown_c": temps[1],
                    "pcie_gen_max_gpu": gen_gpu}
            for key in ("serial", "vbios", "persistence_mode", "ecc_mode", "ecc_mode_pending",
                        "mig_mode", "power_limit_default_w"):
                info[key] = static.get(key)
            self.static.setdefault(i, {}).update(info)
            gpus.append(info)
        cuda = self._q("nvmlSystemGetCudaDriverVersion")
        return {"driver_version": self._text(self._q("nvmlSystemGetDriverVersion")),
                "cuda_version": "%d.%d" % (cuda // 1000, (cuda % 1000) // 10) if cuda else None,
                "gpus": gpus}


def _mode_pair(value):
    """NVML's (current, pending) mode pair -> two booleans; None where not given."""
    try:
        current, pending = value
    except (TypeError, ValueError):
        return None, None
    return ((bool(current) if isinstance(current, int) else None),
            (bool(pending) if isinstance(pending, int) else None))


def process_owner(pid):
    """(command name, user name) of a pid from /proc; None where it cannot be seen."""
    if not isinstance(pid, int):
        return None, None
    name = read_text("/proc/%d/comm" % pid)
    user = None
    status = read_text("/proc/%d/status" % pid) or ""
    m = re.search(r"^Uid:\s+(\d+)", status, re.M)
    if m:
        try:
            import pwd
            user = pwd.getpwuid(int(m.group(1))).pw_name
        except (ImportError, KeyError):
            user = m.group(1)
    return (name.strip() if name else None), user


class GpuLost(Exception):
    pass


class ProbeTimeout(Exception):
    pass


class ProbeFailed(Exception):
    pass


def open_gpu_backend():
    """Pick NVML, else nvidia-smi, else none; say why each is or is not available."""
    probes = {}
    backend = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pynvml
        try:
            backend = NvmlBackend(pynvml)
            probes["nvml"] = {"available": True}
        except Exception as exc:  # any NVMLError: library missing, driver not loaded, mismatch
            probes["nvml"] = {"available": False, "reason": "nvmlInit failed: %s" % exc}
    except ImportError:
        probes["nvml"] = {"available": False, "reason": "pynvml not importable"}
    smi = shutil.which("nvidia-smi")
    if smi:
        probes["nvidia-smi"] = {"available": True}
        if backend is None:
            backend = SmiBackend(smi)
    else:
        probes["nvidia-smi"] = {"available": False, "reason": "nvidia-smi not on PATH"}
    return backend, probes


class GpuWatchdog(object):
    """Runs GPU collection on worker threads with a deadline, one thread per key (GPU).

    A call that does not return in time is abandoned (a hung driver cannot be
    interrupted); until it returns, no new call is started for that key and that GPU is
    reported ``unresponsive``, while the other GPUs and the rest of the sample go on.
    """

    def __init__(self, deadline):
        self.deadline = deadline
        self._busy = {}

    def call_many(self, calls):
        """[(key, fn)] -> {key: (ok, value_or_message)}; calls run in parallel."""
        results = {}
        started = []
        for key, fn in calls:
            busy = self._busy.get(key)
            if busy is not None and busy.is_alive():
                results[key] = (False, "previous GPU probe call still hung")
                continue
            box = {}
            t = threading.Thread(target=_run_into, args=(fn, box), name="gpu-probe-%s" % key)
            t.daemon = True
            t.start()
            started.append((key, t, box))
        end = time.monotonic() + self.deadline
        for key, t, box in started:
            t.join(max(0.0, end - time.monotonic()))
            if t.is_alive():
                self._busy[key] = t
                results[key] = (False, "GPU probe timed out after %gs" % self.deadline)
                continue
            self._busy.pop(key, None)
            if "error" in box:
                results[key] = (False, box["error"])
            else:
                results[key] = (True, box.get("value"))
        return results

    def call(self, fn, key="all"):
        """Returns (ok, value_or_message)."""
        return self.call_many([(key, fn)])[key]


def _run_into(fn, box):
    try:
        box["value"] = fn()
    except Exception as exc:  # reported as an error line, never fatal
        box["error"] = "%s: %s" % (type(exc).__name__, exc)


# --------------------------------------------------------------------------- log tailing

class FileTail(object):
    """Follows a log file read-only from its end, surviving rotation and truncation.

    With ``lookback`` it starts that many bytes before the end (seeking there, never
    reading the whole file) and drops the cut line it lands in.
    """

    def __init__(self, path, at_end=True, lookback=0):
        self.path = path
        self._f = None
        self._ino = None
        self._partial = b""
        self._skip_cut = False
        self._open(at_end=at_end, lookback=lookback)

    def _open(self, at_end, lookback=0):
        try:
            f = open(self.path, "rb")
        except OSError:
            self._f = None
            return
        st = os.fstat(f.fileno())
        if at_end:
            start = max(0, st.st_size - max(0, lookback))
            f.seek(start)
            self._skip_cut = lookback > 0 and start > 0
        self._f, self._ino = f, st.st_ino

    def lines(self, budget=MAX_TAIL_BYTES_PER_TICK):
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if self._f is None or st.st_ino != self._ino or st.st_size < self._f.tell():
            if self._f is not None:
                self._f.close()
            self._skip_cut = False
            self._partial = b""
            self._open(at_end=False)
            if self._f is None:
                return []
        data = self._partial + self._f.read(budget)
        if self._skip_cut:
            nl = data.find(b"\n")
            if nl < 0:
                self._partial = b""
                return []
            data = data[nl + 1:]
            self._skip_cut = False
        parts = data.split(b"\n")
        self._partial = parts.pop()[-MAX_EVENT_LINE:]
        return [p[:MAX_EVENT_LINE].decode("utf-8", "replace").rstrip("\r") for p in parts if p]


# --------------------------------------------------------------------------- kernel log

KERNEL_LOG_MODES = ("auto", "journal", "dmesg", "file", "off")
KERNEL_LOG_ORDER = {"auto": ("journalctl", "dmesg", "file"), "journal": ("journalctl",),
                    "dmesg": ("dmesg",), "file": ("file",)}
KERNEL_LOOKBACK_LINES = 2000
KERNEL_FILE_LOOKBACK_BYTES = 256 * 1024
KERNEL_BYTES_PER_TICK = 512 * 1024
KERNEL_READ_WAIT_S = 0.05
KERNEL_PROBE_S = 0.6
MAX_JOURNAL_LINE = 64 * 1024
KERNEL_LOG_FILES = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
JOURNAL_DIRS = ("/run/log/journal", "/var/log/journal")
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
# What journalctl and dmesg print when they refuse (matched with LC_ALL=C).
JOURNAL_DENIED = ("insufficient permissions", "not seeing messages from other users",
                  "permission denied")
JOURNAL_NONE = ("no journal files were found",)
DMESG_DENIED = ("operation not permitted", "permission denied")
_DMESG_MONO = re.compile(r"^\[\s*(\d+(?:\.\d+)?)\]")
_SYSLOG_KERNEL = re.compile(r"\skernel:\s")
_ISO_TS = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?"
                     r"(Z|[+-]\d\d:?\d\d)?\s")
_BSD_TS = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)\s")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def journal_argv(lookback, after_cursor=None):
    """The journalctl command line (an argument list: no shell ever sees it)."""
    argv = ["journalctl", "-k", "-o", "json", "--no-pager", "--follow"]
    if after_cursor:
        argv.append("--after-cursor=" + after_cursor)
    else:
        argv.append("--lines=%d" % max(0, int(lookback)))
    return argv


def dmesg_argv():
    return ["dmesg", "-w"]


def rooted(root, path):
    """``path`` under ``root`` (the hidden --log-root test option, for /proc, /var and /usr
    look-ups; "/" on a host)."""
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def one_line(text, limit=300):
    return " ".join((text or "").split())[:limit]


def journal_entry(raw):
    """One ``journalctl -o json`` line -> (line, ts, boot, cursor); None for an entry
    without a message.  Raises ValueError when the line is not a JSON object."""
    entry = json.loads(raw.decode("utf-8", "replace"))
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    msg = entry.get("MESSAGE")
    if isinstance(msg, list):  # not UTF-8: journalctl sends the bytes
        try:
            msg = bytes(bytearray(msg)).decode("utf-8", "replace")
        except (TypeError, ValueError):
            raise ValueError("MESSAGE is not a byte array") from None
    if not isinstance(msg, str):
        return None  # null: journalctl leaves out fields over 4 KiB
    try:
        ts = int(entry.get("__REALTIME_TIMESTAMP")) / 1e6
    except (TypeError, ValueError):
        ts = None
    boot = entry.get("_BOOT_ID")
    cursor = entry.get("__CURSOR")
    return (msg.rstrip("\n")[:MAX_EVENT_LINE], ts,
            boot if isinstance(boot, str) else None,
            cursor if isinstance(cursor, str) else None)


def syslog_ts(line, now):
    """The time at the start of a syslog line (RFC 3339 or "Dec  2 03:14:07"), else now."""
    m = _ISO_TS.match(line)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        frac = float(m.group(7)) if m.group(7) else 0.0
        zone = m.group(8)
        if zone is None:
            return time.mktime((y, mo, d, h, mi, s, 0, 0, -1)) + frac
        offset = 0
        if zone != "Z":
            z = zone.replace(":", "")
            offset = (int(z[1:3]) * 3600 + int(z[3:5]) * 60) * (1 if z[0] == "+" else -1)
        return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac - offset
    m = _BSD_TS.match(line)
    if m and m.group(1) in _MONTHS:
        mo = _MONTHS.index(m.group(1)) + 1
        d, h, mi, s = (int(x) for x in m.groups()[1:])
        year = time.localtime(now).tm_year
        try:
            t = time.mktime((year, mo, d, h, mi, s, 0, 0, -1))
            if t > now + 86400:  # "Dec 31" read on Jan 1: last year
                t = time.mktime((year - 1, mo, d, h, mi, s, 0, 0, -1))
        except (OverflowError, ValueError):
            return now
        return t
    return now


def journal_files(log_root):
    """Whether journald has left any journal file: True, False, or None (cannot look).

    journalctl in JSON follow mode says nothing when there are none, so look first.
    """
    unknown = False
    for top in JOURNAL_DIRS:
        base = rooted(log_root, top)
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            continue
        except OSError:
            unknown = True
            continue
        for name in names:
            if name.endswith((".journal", ".journal~")):
                return True
            try:
                inner = os.listdir(os.path.join(base, name))
            except OSError as exc:
                unknown = unknown or not isinstance(exc, (FileNotFoundError, NotADirectoryError))
                continue
            if any(n.endswith((".journal", ".journal~")) for n in inner):
                return True
    return None if unknown else False


def _user_name():
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, OSError):
        return os.environ.get("USER") or "USER"


class ChildLines(object):
    """A following command (journalctl, dmesg) read without blocking: bounded bytes
    per tick, the partial line kept, lines cut like FileTail cuts them."""

    def __init__(self, argv, max_line):
        self.argv = list(argv)
        self.max_line = max_line
        self.proc = None
        self.eof = False
        self._partial = b""
        self._err = b""

    def start(self):
        """Start the command; returns None, or why it could not be started."""
        env = dict(os.environ)
        env["LC_ALL"] = "C"  # refusals are recognised by their English text
        env["SYSTEMD_COLORS"] = "0"
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                return "not installed"
            return exc.strerror or str(exc)
        with _CHILDREN_LOCK:
            _CHILDREN.add(proc)
        self.proc = proc
        os.set_blocking(proc.stdout.fileno(), False)
        os.set_blocking(proc.stderr.fileno(), False)
        return None

    def _read(self, stream, budget, wait):
        """Up to ``budget`` bytes that are there now, waiting at most ``wait`` s in all
        for more while they keep coming.  Returns (data, eof)."""
        fd = stream.fileno()
        chunks = []
        total = 0
        deadline = time.monotonic() + wait
        while total < budget:
            try:
                data = os.read(fd, min(65536, budget - total))
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    ready = select.select([fd], [], [], min(left, 0.005))[0]
                except (OSError, ValueError):
                    break
                if not ready:
                    break
                continue
            except OSError:
                return b"".join(chunks), True
            if not data:
                return b"".join(chunks), True
            chunks.append(data)
            total += len(data)
        return b"".join(chunks), False

    def lines(self, budget=KERNEL_BYTES_PER_TICK, wait=KERNEL_READ_WAIT_S):
        """Complete lines read this tick (bytes, cut at ``max_line``)."""
        if self.proc is None or self.eof:
            return []
        data, eof = self._read(self.proc.stdout, budget, wait)
        data = self._partial + data
        parts = data.split(b"\n")
        self._partial = parts.pop()[-self.max_line:]
        if eof:
            self.eof = True
            if self._partial:
                parts.append(self._partial)
            self._partial = b""
        return [p[:self.max_line].rstrip(b"\r") for p in parts if p.strip()]

    def stderr_text(self):
        """What the command has printed on stderr so far (the last 8 KiB)."""
        if self.proc is not None:
            data, _ = self._read(self.proc.stderr, 16384, 0.0)
            if data:
                self._err = (self._err + data)[-8192:]
        return self._err.decode("utf-8", "replace")

    def exited(self):
        """The exit status once the command has ended and its output is read, else None."""
        if self.proc is None:
            return -1
        code = self.proc.poll()
        return code if code is not None and self.eof else None

    def stop(self):
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        if proc.poll() is not None:
            with _CHILDREN_LOCK:
                _CHILDREN.discard(proc)


class KernelLog(object):
    """The host's kernel log, read-only and without root: journalctl, else dmesg, else a
    syslog file, whichever this user may read.  ``send`` gets the event and logsource
    messages in order; ``error`` gets (probe, message) to report."""

    def __init__(self, mode, send, error, lookback=KERNEL_LOOKBACK_LINES, log_root="/",
                 after_cursor=None):
        self.mode = mode
        self.send = send
        self.error = error
        self.lookback = lookback
        self.log_root = log_root
        self.after_cursor = after_cursor
        self.todo = list(KERNEL_LOG_ORDER.get(mode, ()))
        self.refused = []  # (name, "denied" | "missing" | "failed", what it said)
        self.via = None
        self.child = None
        self.tail = None
        self.kernel_only = False
        self.boot = None
        self.bad_json = 0
        self._bad_reported = False
        self._held = []

    # -- choosing a source

    def start(self):
        """Try the sources in order until one works; then send the logsource message."""
        while self.todo and self.via is None:
            name = self.todo.pop(0)
            if name == "journalctl":
                if shutil.which("journalctl") is None:
                    self.refused.append(("journalctl", "missing", "not installed"))
                    continue
                if journal_files(self.log_root) is False:
                    self.refused.append(("journalctl", "missing", "No journal files were found "
                                         "(%s hold none)" % ", ".join(JOURNAL_DIRS)))
                    continue
                self._try_child("journalctl", journal_argv(self.lookback, self.after_cursor),
                                MAX_JOURNAL_LINE)
            elif name == "dmesg":
                self.boot = (read_text(rooted(self.log_root, BOOT_ID_PATH)) or "").strip() or None
                self._try_child("dmesg", dmesg_argv(), MAX_EVENT_LINE)
            else:
                self._try_files()
        self.send(self.message())
        held, self._held = self._held, []
        for raw in held:
            self._emit(raw)

    def _try_child(self, name, argv, max_line):
        child = ChildLines(argv, max_line)
        why = child.start()
        if why is not None:
            self.refused.append((name, "missing" if why == "not installed" else "failed", why))
            return
        deadline = time.monotonic() + KERNEL_PROBE_S
        while True:
            self._held += child.lines(wait=0.0)
            refusal = self._refusal(name, child)
            if refusal is not None:
                child.stop()
                self._held = []
                self.refused.append(refusal)
                return
            if self._held or time.monotonic() >= deadline:
                break  # it answers, or it runs and has nothing to say yet
            time.sleep(0.02)
        self.child, self.via = child, name

    def _refusal(self, name, child):
        """(name, kind, text) when the command has refused or ended, else None."""
        err = child.stderr_text()
        low = err.lower()
        denied = JOURNAL_DENIED if name == "journalctl" else DMESG_DENIED
        for line in err.splitlines():
            if any(m in line.lower() for m in denied):
                return name, "denied", one_line(line)
        if name == "journalctl" and any(m in low for m in JOURNAL_NONE):
            return name, "missing", "No journal files were found"
        code = child.exited()
        if code is None:
            return None
        last = [x for x in err.splitlines() if x.strip()]
        said = ": " + one_line(last[-1]) if last else ""
        return name, "failed", "exited with status %s%s" % (code, said)

    def _try_files(self):
        for path in KERNEL_LOG_FILES:
            full = rooted(self.log_root, path)
            try:
                with open(full, "rb"):
                    pass
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    self.refused.append(("file:" + path, "denied", "Permission denied"))
                elif exc.errno != errno.ENOENT:
                    self.refused.append(("file:" + path, "failed", exc.strerror or str(exc)))
                continue
            self.tail = FileTail(full, at_end=True, lookback=KERNEL_FILE_LOOKBACK_BYTES)
            self.kernel_only = not path.endswith("kern.log")
            self.via = "file:" + path
            return
        if not any(r[0].startswith("file:") for r in self.refused):
            self.refused.append(("files", "missing", "none of %s exists" % ", ".join(
                KERNEL_LOG_FILES)))

    # -- reporting

    def state(self):
        if self.via is not None:
            return "ok"
        if any(kind == "denied" for _, kind, _ in self.refused):
            return "denied"
        return "unavailable"

    def detail(self):
        return "; ".join("%s: %s" % (name, text) for name, _, text in self.refused)[:1000]

    def fix(self):
        """What an operator could do about the refusals (text only: nothing is changed)."""
        denied = [name for name, kind, _ in self.refused if kind == "denied"]
        if not denied:
            return None
        user = _user_name()
        out = []
        if "journalctl" in denied:
            out.append("add %s to the systemd-journal or adm group (usermod -aG "
                       "systemd-journal %s) and reconnect" % (user, user))
        if "dmesg" in denied:
            out.append("allow dmesg for users: sysctl kernel.dmesg_restrict=0 (persist it in "
                       "/etc/sysctl.d/)")
        files = [name[5:] for name in denied if name.startswith("file:")]
        if files:
            out.append("let %s read %s (usermod -aG adm %s)" % (user, ", ".join(files), user))
        return "; or ".join(out)

    def message(self):
        return {"type": "logsource", "v": PROTOCOL_VERSION, "ts": time.time(),
                "source": "kernel", "state": self.state(), "via": self.via,
                "detail": self.detail(), "fix": self.fix()}

    # -- reading

    def poll(self):
        """Send what arrived since the last tick; fall back when the source gives out."""
        if self.tail is not None:
            now = time.time()
            for line in self.tail.lines(KERNEL_BYTES_PER_TICK):
                if self.kernel_only and not _SYSLOG_KERNEL.search(line):
                    continue
                self.send(self._event(line, syslog_ts(line, now)))
            return
        if self.child is None:
            return
        for raw in self.child.lines():
            self._emit(raw)
        refusal = self._refusal(self.via, self.child)
        if self.bad_json and not self._bad_reported:
            self._bad_reported = True
            self.error("kernel-log", "journalctl printed %d line(s) that are not JSON; they "
                                     "are skipped (counted, reported once)" % self.bad_json)
        if refusal is not None:
            self.child.stop()
            self.child = self.via = None
            self.refused.append(refusal)
            self.start()

    def _emit(self, raw):
        if self.via == "journalctl":
            if raw.startswith(b"-- "):  # "-- No entries --", "-- Boot …": not entries
                return
            try:
                entry = journal_entry(raw)
            except ValueError:
                self.bad_json += 1
                return
            if entry is None:
                return
            line, ts, boot, cursor = entry
            ev = self._event(line, ts if ts is not None else time.time())
            if boot:
                ev["boot"] = boot
            if cursor:
                ev["cursor"] = cursor
                self.after_cursor = cursor
            self.send(ev)
            return
        line = raw.decode("utf-8", "replace")
        ev = self._event(line, self._dmesg_ts(line))
        if self.boot:
            ev["boot"] = self.boot
        self.send(ev)

    def _dmesg_ts(self, line):
        now = time.time()
        m = _DMESG_MONO.match(line)
        up = (read_text(rooted(self.log_root, "/proc/uptime")) or "").split()
        try:
            ts = now - float(up[0]) + float(m.group(1)) if m else now
        except (IndexError, ValueError):
            return now
        return ts if ts <= now + 1.0 else now

    def _event(self, line, ts):
        return {"type": "event", "v": PROTOCOL_VERSION, "ts": ts, "source": "kernel",
                "line": line}

    def stop(self):
        if self.child is not None:
            self.child.stop()


# --------------------------------------------------------------------------- simulator

SIM_BUS_IDS = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
               "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0")
SIM_MEM_TOTAL = 81559.0
SIM_SM_MAX = 1980.0
SIM_POWER_LIMIT = 700.0
SIM_SCENARIOS = ("healthy", "leak", "throttle", "xid79", "nccl-timeout", "disk-saturated",
                 "link-downgrade", "low-ram", "driver-skew")
SIM_DEFAULT_GPU = {"leak": 3, "throttle": 5, "xid79": 6, "link-downgrade": 2}
SIM_DEFAULT_AT = {"xid79": 300.0, "nccl-timeout": 600.0}
LEAK_MIB_PER_H = 600.0
SIM_STARVE_PERIOD_S = 120.0
"""``disk-saturated``: the GPUs wait on the loader for 40 % of every two minutes."""
THROTTLE_TAU_S = 600.0
SIM_MEM_BYTES = 2 * 1024 ** 4
SIM_LOW_RAM_BYTES = 768 * 1024 ** 3
"""``low-ram``: 1.2x the GPUs' 637 GiB, under the 1.5x a preflight asks for."""
SIM_SOFTWARE = {"nvcc": "12.4.131", "nccl": "2.21.5", "torch": "2.4.0",
                "cuda_runtime": "12.4.127", "fabric_manager": "550.54.15",
                "container_runtimes": ["docker", "nvidia-container-cli"]}
SIM_SKEW = {"driver_version": "535.183.01", "cuda_version": "12.2",
            "fabric_manager": "535.183.01", "nccl": "2.18.3"}
"""``driver-skew``: an older driver stack than the rest of a simulated fleet."""
SIM_BLOCK_DEVICES = (
    {"name": "nvme0n1", "size_bytes": 3840755982336, "rotational": False,
     "model": "SAMSUNG MZQL23T8HCLS-00A07", "transport": "nvme"},
    {"name": "nvme1n1", "size_bytes": 3840755982336, "rotational": False,
     "model": "SAMSUNG MZQL23T8HCLS-00A07", "transport": "nvme"},
    {"name": "sda", "size_bytes": 480103981056, "rotational": False,
     "model": "SAMSUNG MZ7L3480HCHQ-00A07", "transport": "sata"},
)


def parse_scenarios(text):
    """'leak:3,xid79:6@120' -> [{'name': 'leak', 'gpu': 3, 'at': None}, ...]."""
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        m = re.match(r"^([a-z0-9-]+)(?::(\d+))?(?:@(\d+(?:\.\d+)?))?$", item)
        if not m or m.group(1) not in SIM_SCENARIOS:
            raise ValueError("unknown scenario %r (known: %s; form NAME[:GPU][@SECONDS])"
                             % (item, ", ".join(SIM_SCENARIOS)))
        name = m.group(1)
        gpu = int(m.group(2)) if m.group(2) else SIM_DEFAULT_GPU.get(name)
        if gpu is not None and not 0 <= gpu < len(SIM_BUS_IDS):
            raise ValueError("scenario %r: GPU index must be 0-%d" % (item, len(SIM_BUS_IDS) - 1))
        at = float(m.group(3)) if m.group(3) else SIM_DEFAULT_AT.get(name)
        out.append({"name": name, "gpu": gpu, "at": at})
    return out or [{"name": "healthy", "gpu": None, "at": None}]


def sim_topo_text():
    """``nvidia-smi topo -m`` of an HGX H100 with one NDR HCA per GPU."""
    n = 8
    head = ["GPU%d" % i for i in range(n)] + ["NIC%d" % i for i in range(n)]
    lines = ["\t" + "\t".join(head) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]

    def path(a, b):
        if a == b:
            return "X"
        return "NODE" if (a < 4) == (b < 4) else "SYS"

    for i in range(n):
        cells = ["X" if i == j else "NV18" for j in range(n)]
        cells += ["PIX" if i == j else path(i, j) for j in range(n)]
        aff = "0-55,112-167\t0" if i < 4 else "56-111,168-223\t1"
        lines.append("GPU%d\t" % i + "\t".join(cells) + "\t" + aff + "\t\tN/A")
    for i in range(n):
        cells = ["PIX" if i == j else path(i, j) for j in range(n)]
        cells += [path(i, j) for j in range(n)]
        lines.append("NIC%d\t" % i + "\t".join(cells))
    lines += ["", "Legend:", "", "  X    = Self",
              "  SYS  = Connection traversing PCIe as well as the SMP interconnect between "
              "NUMA nodes (e.g., QPI/UPI)",
              "  NODE = Connection traversing PCIe as well as the interconnect between PCIe "
              "Host Bridges within a NUMA node",
              "  PIX  = Connection traversing at most a single PCIe bridge",
              "  NV#  = Connection traversing a bonded set of # NVLinks", "", "NIC Legend:", ""]
    lines += ["  NIC%d: mlx5_%d" % (i, i) for i in range(n)]
    return "\n".join(lines) + "\n"


class Simulator(object):
    """A realistic 8x H100 host whose trouble follows its scenarios; deterministic per seed."""

    def __init__(self, scenarios, seed, hostname):
        self.scen = scenarios
        self.names = set(s["name"] for s in scenarios)
        self.seed = seed
        self.rng = random.Random(seed)
        self.hostname = hostname or "sim-%d" % seed
        ids = random.Random("uuid-%d" % seed)
        self.uuids = ["GPU-%08x-%04x-%04x-%04x-%012x" % (
            ids.getrandbits(32), ids.getrandbits(16), ids.getrandbits(16),
            ids.getrandbits(16), ids.getrandbits(48)) for _ in SIM_BUS_IDS]
        self.base_mem = [60000.0 + 512.0 * ((seed * 7 + i * 3) % 9) for i in range(8)]
        serials = random.Random("serial-%d" % seed).getrandbits(24)
        self.serials = ["1654%09d" % ((serials * 8 + i) % 10 ** 9) for i in range(8)]
        self.mem_bytes = SIM_LOW_RAM_BYTES if "low-ram" in self.names else SIM_MEM_BYTES
        self.fired = set()

    def _get(self, name):
        for s in self.scen:
            if s["name"] == name:
                return s
        return None

    def facts(self):
        """Two Xeon 8480+ sockets (112 cores: 14 per GPU), 2 TiB RAM (768 GiB with
        ``low-ram``), an HGX H100 board with NVSwitches (hence a fabric manager)."""
        skew = "driver-skew" in self.names
        software = dict(SIM_SOFTWARE, container_runtimes=list(SIM_SOFTWARE["container_runtimes"]))
        if skew:
            software.update(fabric_manager=SIM_SKEW["fabric_manager"], nccl=SIM_SKEW["nccl"])
        facts = {
            "hostname": self.hostname, "kernel": "5.15.0-119-generic",
            "os": "Ubuntu 22.04.4 LTS", "python": platform.python_version(),
            "driver_version": SIM_SKEW["driver_version"] if skew else "550.90.07",
            "cuda_version": SIM_SKEW["cuda_version"] if skew else "12.4",
            "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_cores_logical": 224,
            "cpu_cores_physical": 112, "mem_total_bytes": self.mem_bytes,
            "swap_total_bytes": 8 * 1024 ** 3, "swap_used_bytes": 0,
            "software": software, "block_devices": [dict(d) for d in SIM_BLOCK_DEVICES],
        }
        facts["numa_nodes"] = 2
        gpus = [{"index": i, "uuid": self.uuids[i], "bus_id": b, "name": "NVIDIA H100 80GB HBM3",
                 "mem_total_mib": SIM_MEM_TOTAL, "temp_slowdown_c": 90, "temp_shutdown_c": 92,
                 "pcie_gen_max_gpu": 5, "serial": self.serials[i], "vbios": "96.00.89.00.01",
                 "persistence_mode": True, "ecc_mode": True, "ecc_mode_pending": True,
                 "mig_mode": False, "power_limit_default_w": SIM_POWER_LIMIT}
                for i, b in enumerate(SIM_BUS_IDS)]
        return facts, gpus

    def _util(self, t):
        if "disk-saturated" in self.names:
            phase = t % SIM_STARVE_PERIOD_S
            return 97.0 if phase < 0.6 * SIM_STARVE_PERIOD_S else 3.0
        return 96.0

    def _chain(self, i, t):
        """GPU behind a PCIe switch behind a root port, as on an HGX baseboard."""
        bus = SIM_BUS_IDS[i]
        dn = self._get("link-downgrade")
        width = 8 if dn is not None and dn["gpu"] == i else 16
        node = 0 if i < 4 else 1
        cpus = "0-55,112-167" if node == 0 else "56-111,168-223"
        b = int(bus[5:7], 16)
        return [
            {"address": bus, "speed_gts": 32.0, "width": width, "max_speed_gts": 32.0,
             "max_width": 16, "numa_node": node, "local_cpulist": cpus},
            {"address": "0000:%02x:00.0" % (b - 1), "speed_gts": 32.0, "width": width,
             "max_speed_gts": 32.0, "max_width": 16, "numa_node": node, "local_cpulist": cpus},
            {"address": "0000:%02x:00.0" % (b - 2), "speed_gts": 32.0, "width": 16,
             "max_speed_gts": 32.0, "max_width": 16, "numa_node": node, "local_cpulist": cpus},
            {"address": "0000:%02x:01.0" % (b - 3), "speed_gts": 32.0, "width": 16,
             "max_speed_gts": 32.0, "max_width": 16, "numa_node": node, "local_cpulist": cpus},
        ]

    def pcie(self, t):
        return dict((SIM_BUS_IDS[i], self._chain(i, t)) for i in range(len(SIM_BUS_IDS)))

    def topology(self):
        """What a real HGX H100 host's hello carries beyond the GPU list."""
        nics = [{"name": "mlx5_%d" % i, "kind": "infiniband",
                 "address": "0000:%02x:00.0" % (int(SIM_BUS_IDS[i][5:7], 16) + 1),
                 "numa_node": 0 if i < 4 else 1,
                 "ports": [{"port": 1, "state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)",
                            "link_layer": "InfiniBand"}]} for i in range(8)]
        return {"pcie": self.pcie(0.0), "nics": nics, "topo_text": sim_topo_text(),
                "datasets": [{"path": "/data", "device": "nvme0n1", "free_bytes": 1911260446720,
                              "total_bytes": 3777893457920}]}

    def sample(self, t):
        r = self.rng
        lost = self._get("xid79")
        nccl = self._get("nccl-timeout")
        hung = nccl is not None and t >= nccl["at"]
        gpus = []
        for i in range(len(SIM_BUS_IDS)):
            if lost is not None and lost["gpu"] == i and t >= lost["at"]:
                continue
            util = min(100.0, max(0.0, self._util(t) + r.uniform(-2.5, 2.5)))
            if hung:
                util = 100.0
            temp = 52.0 + 14.0 * util / 100.0 + r.uniform(-1.0, 1.0)
            power = 150.0 + 480.0 * util / 100.0 + r.uniform(-20.0, 20.0)
            if hung:
                power = 160.0 + r.uniform(-5.0, 5.0)
            clock = SIM_SM_MAX
            reasons = [] if util > 5 else ["gpu_idle"]
            mem = self.base_mem[i]
            th = self._get("throttle")
            if th is not None and th["gpu"] == i:
                temp = 62.0 + 28.5 * (1.0 - math.exp(-t / THROTTLE_TAU_S)) + r.uniform(-0.5, 0.5)
                if temp >= 85.0:
                    reasons = ["sw_thermal_slowdown"]
                    if temp >= 88.0:
                        reasons.append("hw_thermal_slowdown")
                    clock = max(1100.0, SIM_SM_MAX - (temp - 84.0) * 110.0)
                    power *= clock / SIM_SM_MAX
            lk = self._get("leak")
            if lk is not None and lk["gpu"] == i:
                grown = LEAK_MIB_PER_H * t / 3600.0
                mem = min(SIM_MEM_TOTAL - 2.0, mem + 2.0 * math.floor(grown / 2.0))
            dn = self._get("link-downgrade")
            width = 8 if dn is not None and dn["gpu"] == i else 16
            gpus.append({
                "index": i, "uuid": self.uuids[i], "state": "ok",
                "mem_used_mib": mem, "mem_total_mib": SIM_MEM_TOTAL,
                "util_pct": round(util, 1), "mem_util_pct": round(util * 0.55, 1),
                "temp_c": round(temp, 1), "power_w": round(power, 1),
                "power_limit_w": SIM_POWER_LIMIT, "sm_clock_mhz": round(clock),
                "sm_clock_max_mhz": SIM_SM_MAX, "clock_reasons": reasons,
                "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": width, "pcie_width_max": 16,
                "temp_mem_c": round(temp + 6.0, 1), "mem_clock_mhz": 2619.0,
                "mem_clock_max_mhz": 2619.0, "pstate": "P0",
                "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
                "ecc_corrected_aggregate": 0, "ecc_uncorrected_aggregate": 0,
                "retired_pages_pending": None, "remap_correctable": 0,
                "remap_uncorrectable": 0, "remap_pending": False, "remap_failure": False,
                "nvlink_up": 18, "nvlink_links": 18, "persistence": True, "pcie_replay": 0,
                "processes": [{"pid": 41000 + i, "name": "python", "user": "train",
                               "used_mib": round(mem - 520.0, 1)}],
            })
        return gpus, self._host(t), self._disks(t)

    def _host(self, t):
        r = self.rng
        return {
            "cpu_pct": round(34.0 + r.uniform(-4.0, 4.0), 1),
            "load1": round(41.0 + r.uniform(-3, 3), 2), "load5": 40.5, "load15": 40.1,
            "mem_used_bytes": int(420 * 1024 ** 3 + r.uniform(0, 2) * 1024 ** 3),
            "mem_total_bytes": self.mem_bytes, "swap_used_bytes": 0,
            "swap_total_bytes": 8 * 1024 ** 3, "swap_in_pages_s": 0.0, "swap_out_pages_s": 0.0,
        }

    def _disks(self, t):
        r = self.rng
        if "disk-saturated" in self.names:
            data = {"r_s": round(24000 + r.uniform(-800, 800), 1), "w_s": 2.0,
                    "rkb_s": round(3.1e6 + r.uniform(-1e5, 1e5), 1), "wkb_s": 16.0,
                    "r_await": round(28.0 + r.uniform(-6, 6), 2), "w_await": 0.4,
                    "aqu_sz": round(31.0 + r.uniform(-4, 4), 2),
                    "util": round(min(100.0, 99.0 + r.uniform(0, 1)), 1)}
        else:
            data = {"r_s": round(820 + r.uniform(-60, 60), 1), "w_s": 3.0,
                    "rkb_s": round(2.1e5 + r.uniform(-1e4, 1e4), 1), "wkb_s": 24.0,
                    "r_await": round(0.4 + r.uniform(0, 0.1), 2), "w_await": 0.3,
                    "aqu_sz": 0.33, "util": round(18.0 + r.uniform(-3, 3), 1)}
        quiet = {"r_s": 0.0, "w_s": round(12 + r.uniform(-2, 2), 1), "rkb_s": 0.0,
                 "wkb_s": round(180 + r.uniform(-20, 20), 1), "r_await": 0.0, "w_await": 0.6,
                 "aqu_sz": 0.01, "util": 0.8}
        return {"nvme0n1": data, "nvme1n1": dict(quiet), "sda": dict(quiet)}

    def events(self, t):
        out = []
        lost = self._get("xid79")
        if lost is not None and t >= lost["at"] and "xid79" not in self.fired:
            self.fired.add("xid79")
            bus = SIM_BUS_IDS[lost["gpu"]]
            out.append(("kernel", "NVRM: Xid (PCI:%s): 79, pid='<unknown>', name=<unknown>, "
                                  "GPU has fallen off the bus." % bus[:-2]))
            out.append(("kernel", "NVRM: GPU %s: GPU has fallen off the bus." % bus))
        nccl = self._get("nccl-timeout")
        if nccl is not None and t >= nccl["at"] and "nccl" not in self.fired:
            self.fired.add("nccl")
            out.append(("job:/var/log/train/rank3.log",
                        "[rank3]:[E1202 03:14:07.123456 140213 ProcessGroupNCCL.cpp:616] "
                        "[Rank 3] Watchdog caught collective operation timeout: "
                        "WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=262144000, "
                        "NumelOut=262144000, Timeout(ms)=600000) ran for 600081 milliseconds "
                        "before timing out."))
        return out


# --------------------------------------------------------------------------- main loop

class Agent(object):
    def __init__(self, args, writer):
        self.args = args
        self.w = writer
        self.seq = 0
        self.sim = None
        self.gpu = None
        self.watchdog = GpuWatchdog(args.gpu_deadline)
        self.gpu_list = []
        self.tails = {}
        self._next_glob = 0.0
        self._scan_logs(first=True)
        self.errors_seen = {}
        self.extra_hello = {}
        self.t0 = time.time()
        self.klog = None

    def _scan_logs(self, first=False):
        """Expand the --tail globs; files that appear later are read from their start."""
        now = time.monotonic()
        if now < self._next_glob:
            return
        self._next_glob = now + LOG_GLOB_EVERY_S
        for pattern in self.args.tail:
            for path in sorted(glob.glob(pattern))[:MAX_TAILED_FILES]:
                if path not in self.tails and len(self.tails) < MAX_TAILED_FILES:
                    self.tails[path] = FileTail(path, at_end=first)

    def error(self, probe, message):
        """Report a probe error; the same message repeats at most once a minute."""
        key = (probe, message)
        now = time.monotonic()
        if now - self.errors_seen.get(key, -1e9) < 60.0:
            return
        self.errors_seen[key] = now
        self.w.send({"type": "error", "v": PROTOCOL_VERSION, "ts": time.time(), "probe": probe,
                     "message": message[:2000]})

    def hello(self):
        if self.args.simulate is not None:
            self.sim = Simulator(parse_scenarios(self.args.simulate), self.args.seed,
                                 self.args.hostname)
            self.t0 -= self.backlog_samples() * self.args.interval * self.args.speed
            facts, gpus = self.sim.facts()
            probes = {"simulator": {"available": True}}
            simulated = [s["name"] for s in self.sim.scen]
        else:
            facts = host_facts(self.args.log_root)
            if self.args.hostname:
                facts["hostname"] = self.args.hostname
            self.gpu, probes = open_gpu_backend()
            gpus = []
            if self.gpu is not None:
                ok, value = self.watchdog.call(self.gpu.facts)
                if ok:
                    facts["driver_version"] = value.get("driver_version")
                    facts["cuda_version"] = value.get("cuda_version")
                    gpus = value.get("gpus") or []
                else:
                    probes[self.gpu.name] = {"available": False, "reason": value}
                    self.error(self.gpu.name, value)
            simulated = []
            self.static_hello(facts, gpus)
            probes["psutil"] = {"available": _has_module("psutil")}
            probes["diskstats"] = ({"available": True} if os.path.exists("/proc/diskstats")
                                   else {"available": False, "reason": "no /proc/diskstats"})
        self.gpu_list = gpus
        if self.sim is None:
            self.extra_hello["pcie"] = self.pcie_links()
        else:
            self.extra_hello.update(self.sim.topology())
        hello = {"type": "hello", "v": PROTOCOL_VERSION, "agent": AGENT_VERSION,
                 "ts": time.time(), "host": facts, "gpus": gpus, "probes": probes,
                 "simulated": simulated}
        hello.update(self.extra_hello)
        self.w.send(hello)
        self.start_kernel_log()

    def start_kernel_log(self):
        """Pick the kernel-log source and say which (the logsource message)."""
        mode = kernel_log_mode(self.args)
        if mode is None:
            return
        if self.sim is not None or mode == "off":
            state = "simulated" if self.sim is not None else "off"
            if self.sim is not None:
                detail = "simulated kernel events"
            elif self.args.kernel_log is None:
                detail = "not asked for (a bare run: pass --kernel-log auto)"
            else:
                detail = "--kernel-log off"
            self.w.send({"type": "logsource", "v": PROTOCOL_VERSION, "ts": time.time(),
                         "source": "kernel", "state": state, "via": None, "detail": detail,
                         "fix": None})
            return
        self.klog = KernelLog(mode, self.w.send, self.error, lookback=self.args.kernel_lookback,
                              log_root=self.args.log_root,
                              after_cursor=self.args.kernel_after_cursor)
        self.klog.start()

    def static_hello(self, facts, gpus):
        """Facts that change with hardware or installs: PCIe chains, NICs, NUMA, disks,
        datasets, software versions."""
        root = self.args.sys_root
        facts["numa_nodes"] = numa_nodes(root)
        facts["block_devices"] = read_block_devices(root)
        facts["software"] = software_versions(self.args.log_root)
        self.extra_hello["pcie"] = self.pcie_links()
        self.extra_hello["nics"] = read_nics(root)
        smi = shutil.which("nvidia-smi") if gpus else None
        self.extra_hello["topo_text"] = capture_topology(smi)
        self.extra_hello["datasets"] = datasets_facts(root, self.args.dataset)

    def pcie_links(self):
        return dict((g["bus_id"], pci_chain(self.args.sys_root, g["bus_id"]))
                    for g in self.gpu_list if g.get("bus_id"))

    def sim_time(self):
        return self.seq * self.args.interval * self.args.speed

    def backlog_samples(self):
        """Samples of --sim-history, sent before the live ones; their clock ends at now."""
        step = self.args.interval * self.args.speed
        if self.sim is None or step <= 0:
            return 0
        return int(self.args.sim_history // step)

    def gpus_now(self):
        if self.gpu is None:
            return []
        per_gpu = getattr(self.gpu, "sample_gpu", None)
        if per_gpu is None:
            ok, value = self.watchdog.call(self.gpu.sample)
            if ok:
                return value
            self.error(self.gpu.name, value)
            return [self._not_answered(g, value) for g in self.gpu_list]
        indices = self.gpu.gpu_indices()
        results = self.watchdog.call_many(
            [(i, functools.partial(per_gpu, i)) for i in indices])
        gpus = []
        for i in indices:
            ok, value = results[i]
            if ok:
                gpus.append(value)
                continue
            self.error(self.gpu.name, "GPU %d: %s" % (i, value))
            known = next((g for g in self.gpu_list if g.get("index") == i), {"index": i})
            gpus.append(self._not_answered(known, value))
        return gpus

    def _not_answered(self, gpu, message):
        hung = "hung" in message or "timed out" in message
        return {"index": gpu["index"], "uuid": gpu.get("uuid"),
                "state": "unresponsive" if hung else "unknown"}

    def sample(self, host_reader):
        ts = time.time()
        if self.sim is not None:
            t = self.sim_time()
            ts = self.t0 + t  # simulated clock: a leak reads in simulated MiB/h
            for source, line in self.sim.events(t):
                self.w.send({"type": "event", "v": PROTOCOL_VERSION, "ts": ts, "source": source,
                             "line": line})
            gpus, host, disks = self.sim.sample(t)
        else:
            gpus = self.gpus_now()
            host, disks = host_reader.sample()
        if self.klog is not None:
            self.klog.poll()
        self._scan_logs()
        for tail in self.tails.values():
            for line in tail.lines():
                self.w.send({"type": "event", "v": PROTOCOL_VERSION, "ts": ts,
                             "source": "job:" + tail.path, "line": line})
        msg = {"type": "sample", "v": PROTOCOL_VERSION, "seq": self.seq, "ts": ts,
               "gpus": gpus, "host": host, "disks": disks}
        if self.seq > 0 and self.seq % PCIE_EVERY_TICKS == 0:
            msg["pcie"] = self.pcie_links() if self.sim is None else self.sim.pcie(t)
        self.w.send(msg)
        self.seq += 1

    def run(self):
        host_reader = HostReader() if self.args.simulate is None else None
        self.hello()
        if self.args.once:
            if host_reader is not None:
                time.sleep(0.25)
            self.sample(host_reader)
            return
        count = 0
        for _ in range(self.backlog_samples()):
            self.sample(host_reader)
        next_tick = time.monotonic() + (self.args.interval if host_reader else 0.0)
        while self.args.count is None or count < self.args.count:
            delay = next_tick - time.monotonic()
            if delay > 0 and not self.args.fast:
                time.sleep(delay)
            self.sample(host_reader)
            count += 1
            next_tick += self.args.interval
            if next_tick < time.monotonic():
                next_tick = time.monotonic() + self.args.interval


def _has_module(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def kernel_log_mode(args):
    """The kernel-log mode to run, or None for none and no logsource message.

    Asked for with --kernel-log; otherwise ``auto`` when the console runs the agent
    (--stdin-eof-exit, which its bootstrap always passes) and ``off`` for a bare run.
    ``--once`` (one hello, one sample) and a simulated host send no logsource message
    unless --kernel-log asks (a simulated host's is then ``simulated``).
    """
    if args.kernel_log is not None:
        return args.kernel_log
    if args.once or args.simulate is not None:
        return None
    return "auto" if args.stdin_eof_exit else "off"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="rigwatch-agent",
                                description="Stream a GPU host's state as NDJSON (read-only).")
    p.add_argument("--once", action="store_true", help="print one hello and one sample, then exit")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--count", type=int, default=None,
                   help="stop after N live samples (--sim-history's come on top)")
    p.add_argument("--simulate", metavar="SCENARIO[,SCENARIO...]", default=None,
                   help="emit a simulated 8-GPU host: " + ", ".join(SIM_SCENARIOS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    p.add_argument("--fast", action="store_true",
                   help="do not wait between samples (simulator and tests: time is simulated)")
    p.add_argument("--sim-history", type=float, default=0.0, metavar="SECONDS",
                   help="simulated seconds already run at start, sent at once (the demo's "
                        "charts and soak detectors then have the history a watcher would)")
    p.add_argument("--hostname", default=None, help="name to report instead of the real one")
    p.add_argument("--tail", action="append", default=[], metavar="GLOB",
                   help="follow job logs matching GLOB read-only; new lines become events")
    p.add_argument("--gpu-deadline", type=float, default=GPU_DEADLINE_S,
                   help="seconds before a GPU probe call counts as hung")
    p.add_argument("--dataset", action="append", default=[], metavar="PATH",
                   help="report which block device holds PATH (repeatable)")
    p.add_argument("--kernel-log", choices=KERNEL_LOG_MODES, default=None,
                   help="where to read the kernel log: auto tries journalctl, dmesg, then "
                        "/var/log/kern.log|messages|syslog (default: auto when the console "
                        "runs the agent, off otherwise)")
    p.add_argument("--kernel-lookback", type=int, default=KERNEL_LOOKBACK_LINES, metavar="N",
                   help="journal lines of the current boot to send first (default %(default)s)")
    p.add_argument("--kernel-after-cursor", default=None, metavar="CURSOR",
                   help="start the journal after this cursor instead (no repeats on reconnect)")
    p.add_argument("--sys-root", default="/sys", help=argparse.SUPPRESS)
    p.add_argument("--log-root", default="/", help=argparse.SUPPRESS)
    p.add_argument("--stdin-eof-exit", action="store_true",
                   help="exit when stdin closes (the console went away)")
    args = p.parse_args(argv)
    if args.interval < 0 or args.speed <= 0:
        p.error("--interval must be >= 0 and --speed > 0")
    if args.sim_history < 0 or (args.sim_history and args.simulate is None):
        p.error("--sim-history needs --simulate and a value >= 0")
    if args.kernel_lookback < 0:
        p.error("--kernel-lookback must be >= 0")
    if args.simulate is not None:
        try:
            parse_scenarios(args.simulate)
        except ValueError as exc:
            p.error(str(exc))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.stdin_eof_exit:
        watch_stdin_eof()
    try:
        Agent(args, Writer(sys.stdout)).run()
    except KeyboardInterrupt:
        pass
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
    exit_now(0)


if __name__ == "__main__":
    main()
