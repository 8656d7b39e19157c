"""The host from /proc: CPU, load, memory, swap and iostat-style disk rates, and its facts."""

from __future__ import annotations

import os
import platform
import re
import socket
import time

from .commands import read_text, rooted


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


def read_vmstat():
    """Pages swapped in and out since boot (pswpin, pswpout)."""
    text = read_text("/proc/vmstat") or ""
    found = dict(re.findall(r"^(pswpin|pswpout) (\d+)$", text, re.M))
    if "pswpin" not in found:
        return None
    return int(found["pswpin"]), int(found.get("pswpout", 0))


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
