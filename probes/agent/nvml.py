"""GPUs through NVML (``pynvml`` from nvidia-ml-py), the cheap path when the host has it."""

from __future__ import annotations

from .attribution import attribute
from .proc import process_owner
from .values import decode_reasons, normalise_bus_id

MAX_PROCESSES = 64
NVML_SLOW_EVERY = 10
NVML_PROCS_EVERY = 5

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
        self.attr = {}
        """pid -> its attribution, read once while the pid lives."""

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
        """(links up, links present, [[link, up, GB/s, replay, recovery, CRC]]); (None,
        None, None) on GPUs without NVLink.  Counters are totals since the driver loaded."""
        links = []
        for link in range(self._const("NVML_NVLINK_MAX_LINKS", 18)):
            state = self._q("nvmlDeviceGetNvLinkState", h, link)
            if state is None:
                continue
            err = [self._q("nvmlDeviceGetNvLinkErrorCounter", h, link, c) for c in range(4)]
            crc = None if err[2] is None and err[3] is None else (err[2] or 0) + (err[3] or 0)
            links.append([link, 1 if state else 0, None, err[0], err[1], crc])
        if not links:
            return None, None, None
        fid = self._const("NVML_FI_DEV_NVLINK_GET_SPEED", 164)
        values = self._q("nvmlDeviceGetFieldValues", h, [(fid, ln[0]) for ln in links]) or []
        for ln, v in zip(links, values):
            mbps = getattr(getattr(v, "value", None), "uiVal", None)
            if getattr(v, "nvmlReturn", 1) == 0 and mbps:
                ln[2] = round(mbps / 1000.0, 3)
        return sum(ln[1] for ln in links), len(links), links

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
        out["nvlink_up"], out["nvlink_links"], out["nvlink"] = self._nvlink(h)
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
            info = {"pid": pid, "name": name, "user": user,
                    "used_mib": round(used / 1048576.0, 1) if isinstance(used, int) else None}
            info.update(self._attribution(pid))
            out.append(info)
        return out

    def _attribution(self, pid):
        """The job, container and rank of a GPU process, read once while the pid lives
        (its cgroup and environment do not change under it)."""
        cache = self.attr
        if pid not in cache:
            if len(cache) > 4 * MAX_PROCESSES * max(1, len(self.handles)):
                cache.clear()
            cache[pid] = attribute(pid)
        return cache[pid]

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


class GpuLost(Exception):
    pass
