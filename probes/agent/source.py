"""The one seam Agent reads a host through: RealHost here, the Simulator in simulator.py.

Agent never asks which it has.  A real host is sent the agent without simulator.py
(``probes/transport/bootstrap.py`` leaves it out), so nothing here names the Simulator: it
offers itself through ``register_simulator`` when it is part of the source.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
import warnings

from .fabric import NVLINK_TEXT_EVERY_TICKS, FabricReader, nvlink_text
from .kernel_log import KernelLog, QuietLog
from .nvml import NvmlBackend
from .pci import datasets_facts, numa_nodes, pci_chain, read_block_devices, read_nics
from .proc import HostReader, host_facts
from .smi import SmiBackend
from .software import capture_topology, software_versions
from .watchdog import GpuWatchdog


def local_utc_offset():
    """This host's local time minus UTC now, in seconds (DST included)."""
    now = time.localtime()
    off = getattr(now, "tm_gmtoff", None)
    if off is None:  # pragma: no cover - every Linux Python has tm_gmtoff
        off = -(time.altzone if now.tm_isdst > 0 else time.timezone)
    return int(off)


def boot_time():
    """When this host booted (``btime`` of /proc/stat, epoch seconds), None if unknown."""
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


ONCE_WAIT_S = 0.25
"""``--once`` on a real host: how long the CPU and disk counters run before the sample."""


class HostSource(object):
    """What Agent reads a host through; every method returns protocol-ready values.

    The defaults are a real host's: wall-clock time, no scenarios, no events of its own.
    """

    def facts(self):
        """(host facts, GPU list) for the hello."""
        raise NotImplementedError

    def probes(self):
        """The hello's ``probes``: what each way of reading the host could do (after facts)."""
        raise NotImplementedError

    def scenarios(self):
        """The hello's ``simulated``: names of the scenarios played."""
        return []

    def topology(self):
        """The hello's sections beside the facts: ``pcie``, ``nics``, ``topo_text``,
        ``datasets``."""
        raise NotImplementedError

    def sample(self, t):
        """(gpus, host, disks) of the sample ``t`` seconds into the run."""
        raise NotImplementedError

    def events(self, t):
        """[(source, line)] that happened by ``t`` besides the logs Agent follows."""
        return []

    def pcie(self, t):
        """{bus id: PCIe chain, GPU first} now (sent every PCIE_EVERY_TICKS samples)."""
        raise NotImplementedError

    def fabric(self, t):
        """The ``fabric`` message's body (IB ports, NVLink) when one is due, else None."""
        return None

    def timestamp(self, start, t):
        """The ``ts`` of the sample at ``t`` for a run that started at ``start``."""
        return time.time()

    def clock(self, speed):
        """The hello's ``clock``: how this host's times read (its zone for stamps that name
        none, its boot for the kernel's ``[sec.usec]``, how fast its clock runs)."""
        return {"speed": speed, "utc_offset_s": local_utc_offset(), "boot_time": boot_time()}

    def first_wait(self, interval, once):
        """Seconds before the first sample, so that its rates span a real interval."""
        return 0.0

    def kernel_log(self, mode, send, error):
        """The kernel-log reader for ``mode`` (start(), poll(), stop())."""
        raise NotImplementedError


class RealHost(HostSource):
    """This machine, read-only: NVML or nvidia-smi under a watchdog, /proc, sysfs, logs."""

    def __init__(self, args, error):
        self.args = args
        self.error = error
        self.watchdog = GpuWatchdog(args.gpu_deadline)
        self.gpu = None
        self.gpu_list = []
        self._probes = {}
        self.reader = HostReader()  # the CPU, disk and swap counters start here
        self.fabric_reader = FabricReader(args.sys_root)
        self.links = None
        self.nv_text = None
        self.nv_ticks = 0

    def facts(self):
        args = self.args
        facts = host_facts(args.log_root)
        if args.hostname:
            facts["hostname"] = args.hostname
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
        facts["numa_nodes"] = numa_nodes(args.sys_root)
        facts["block_devices"] = read_block_devices(args.sys_root)
        facts["software"] = software_versions(args.log_root)
        probes["psutil"] = {"available": _has_module("psutil")}
        probes["diskstats"] = ({"available": True} if os.path.exists("/proc/diskstats")
                               else {"available": False, "reason": "no /proc/diskstats"})
        self._probes = probes
        self.gpu_list = gpus
        return facts, gpus

    def probes(self):
        return self._probes

    def topology(self):
        """Facts that change with hardware or installs: PCIe chains, NICs, the GPU
        topology matrix and the datasets' disks."""
        root = self.args.sys_root
        smi = shutil.which("nvidia-smi") if self.gpu_list else None
        return {"pcie": self.pcie(0.0), "nics": read_nics(root),
                "topo_text": capture_topology(smi),
                "datasets": datasets_facts(root, self.args.dataset)}

    def pcie(self, t):
        return dict((g["bus_id"], pci_chain(self.args.sys_root, g["bus_id"]))
                    for g in self.gpu_list if g.get("bus_id"))

    def sample(self, t):
        gpus = self.gpus_now()
        links = [{"gpu": g.get("index"), "links": g.pop("nvlink")} for g in gpus
                 if g.get("nvlink") is not None]
        self.links = links or self.links
        host, disks = self.reader.sample()
        return gpus, host, disks

    def fabric(self, t):
        smi = shutil.which("nvidia-smi") if self.gpu_list and not isinstance(
            self.gpu, NvmlBackend) else None
        if smi and self.nv_ticks % NVLINK_TEXT_EVERY_TICKS == 0:
            ok, text = self.watchdog.call(functools.partial(nvlink_text, smi), key="nvlink")
            self.nv_text = text if ok else self.nv_text
        self.nv_ticks += 1
        return self.fabric_reader.tick(time.time(), self.links, self.nv_text)

    def gpus_now(self):
        """Every GPU, each under the watchdog: a hung one is reported, the rest go on."""
        if self.gpu is None:
            return []
        per_gpu = getattr(self.gpu, "sample_gpu", None)
        if per_gpu is None:
            ok, value = self.watchdog.call(self.gpu.sample)
            if ok:
                return value
            self.error(self.gpu.name, value)
            return [_not_answered(g, value) for g in self.gpu_list]
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
            gpus.append(_not_answered(known, value))
        return gpus

    def first_wait(self, interval, once):
        return ONCE_WAIT_S if once else interval

    def kernel_log(self, mode, send, error):
        if mode == "off":
            detail = ("not asked for (a bare run: pass --kernel-log auto)"
                      if self.args.kernel_log is None else "--kernel-log off")
            return QuietLog(send, "off", detail)
        return KernelLog(mode, send, error, lookback=self.args.kernel_lookback,
                         log_root=self.args.log_root, after_cursor=self.args.kernel_after_cursor)


def _not_answered(gpu, message):
    hung = "hung" in message or "timed out" in message
    return {"index": gpu["index"], "uuid": gpu.get("uuid"),
            "state": "unresponsive" if hung else "unknown"}


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


def _has_module(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


_SIMULATOR = []  # type: list


def register_simulator(cls):
    """Class decorator of the Simulator: offers it to open_source and the command line."""
    _SIMULATOR[:] = [cls]
    return cls


def simulator_class():
    """The Simulator when this agent was sent with it, else None."""
    return _SIMULATOR[0] if _SIMULATOR else None


def open_source(args, error):
    """RealHost, or the Simulator for ``--simulate`` (parse_args checked that it is here)."""
    if args.simulate is None:
        return RealHost(args, error)
    return simulator_class().from_args(args)
