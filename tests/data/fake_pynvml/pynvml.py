"""A stand-in for nvidia-ml-py's ``pynvml`` with the same names and error classes.

Shaped after nvidia-ml-py 13.x: ``NVMLError`` subclasses per return code, bytes or str
returns, ``nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)``.  Behaviour is chosen
by FAKE_NVML: comma-separated flags
  lost2        GPU 2 raises NVMLError_GpuIsLost on every call
  nopower1     GPU 1 raises NVMLError_NotSupported for power
  oldreasons   no nvmlDeviceGetCurrentClocksEventReasons (pre-12.535 binding)
  hangutil     nvmlDeviceGetUtilizationRates blocks (a hung driver)
  hangutil1    the same, on GPU 1 only
  memtrouble1  GPU 1 has uncorrectable ECC errors, a row-remap failure, pages pending
  noinit       nvmlInit raises NVMLError_DriverNotLoaded
  nvlinkok     every NVLink is active (else GPU 2's link 5 is not)
  nvlinkerr2   GPU 2 link 7 counts 12 replays, 1 recovery, 2 flit and 1 data CRC errors
Every GPU has 18 NVLinks at 26.562 GB/s (H100 SXM, as ``nvidia-smi nvlink -s`` prints it);
GPU 2's link 5 is inactive.
FAKE_NVML_PIDS ("PID@GPU,PID@GPU"), when set, lists those processes instead of its own pid
on GPU 0 (a test's real processes, e.g. a Slurm job's ranks, shown as GPU processes).
"""
import os
import time
from collections import namedtuple

FLAGS = set(filter(None, os.environ.get("FAKE_NVML", "").split(",")))
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_NVLINK_MAX_LINKS = 18
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
nvmlMemory_v2 = 0x02000028


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


class NVMLError_InvalidArgument(NVMLError):
    pass


Memory = namedtuple("Memory", "total reserved free used")
Util = namedtuple("Util", "gpu memory")
Pci = namedtuple("Pci", "busId")
Proc = namedtuple("Proc", "pid usedGpuMemory")


def _check(h):
    if "lost2" in FLAGS and h == 2:
        raise NVMLError_GpuIsLost("GPU is lost")


def nvmlInit():
    if "noinit" in FLAGS:
        raise NVMLError_DriverNotLoaded("Driver Not Loaded")


def nvmlDeviceGetCount():
    return 4


def nvmlDeviceGetHandleByIndex(i):
    return i


def nvmlSystemGetDriverVersion():
    return b"550.90.07"


def nvmlSystemGetCudaDriverVersion():
    return 12040


def nvmlDeviceGetPciInfo(h):
    return Pci(("00000000:%02X:00.0" % (0x18 + h)).encode())


def nvmlDeviceGetUUID(h):
    return "GPU-0000000%d-aaaa-bbbb-cccc-dddddddddddd" % h


def nvmlDeviceGetName(h):
    return b"NVIDIA H100 80GB HBM3"


def nvmlDeviceGetMemoryInfo(h, version=None):
    _check(h)
    mib = 1024 * 1024
    return Memory(81559 * mib, 479 * mib, (81559 - 1000 * (h + 1)) * mib, 1000 * (h + 1) * mib)


def nvmlDeviceGetUtilizationRates(h):
    _check(h)
    if "hangutil" in FLAGS or ("hangutil1" in FLAGS and h == 1):
        time.sleep(3600)
    return Util(90 + h, 40)


def nvmlDeviceGetTemperature(h, sensor):
    _check(h)
    return 60 + h


def nvmlDeviceGetPowerUsage(h):
    _check(h)
    if "nopower1" in FLAGS and h == 1:
        raise NVMLError_NotSupported("Not Supported")
    return 612345


def nvmlDeviceGetEnforcedPowerLimit(h):
    _check(h)
    return 700000


def nvmlDeviceGetClockInfo(h, kind):
    _check(h)
    return 1410 if h == 3 else 1980


def nvmlDeviceGetMaxClockInfo(h, kind):
    _check(h)
    return 1980


def _reasons(h):
    _check(h)
    return 0x20 | 0x40 if h == 3 else 0


if "oldreasons" not in FLAGS:
    nvmlDeviceGetCurrentClocksEventReasons = _reasons
nvmlDeviceGetCurrentClocksThrottleReasons = _reasons


def nvmlDeviceGetCurrPcieLinkGeneration(h):
    _check(h)
    return 5


def nvmlDeviceGetMaxPcieLinkGeneration(h):
    _check(h)
    return 5


def nvmlDeviceGetCurrPcieLinkWidth(h):
    _check(h)
    return 8 if h == 0 else 16


def nvmlDeviceGetMaxPcieLinkWidth(h):
    _check(h)
    return 16


def nvmlDeviceGetGpuMaxPcieLinkGeneration(h):
    _check(h)
    return 5


def nvmlDeviceGetPerformanceState(h):
    _check(h)
    return 0


def nvmlDeviceGetTemperatureThreshold(h, kind):
    _check(h)
    return {NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 89}[kind]


def _trouble(h):
    return "memtrouble1" in FLAGS and h == 1


def nvmlDeviceGetTotalEccErrors(h, error_type, counter_type):
    _check(h)
    if error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
        return 3 if _trouble(h) else 0
    return 12 if counter_type == NVML_AGGREGATE_ECC else 1


def nvmlDeviceGetRetiredPagesPendingStatus(h):
    _check(h)
    if not _trouble(h):
        raise NVMLError_NotSupported("Not Supported")  # Hopper: row remapping instead
    return 1


def nvmlDeviceGetRemappedRows(h):
    _check(h)
    return (0, 2, 0, 1) if _trouble(h) else (0, 0, 0, 0)


def nvmlDeviceGetNvLinkState(h, link):
    _check(h)
    if link >= 18:
        raise NVMLError_InvalidArgument("Invalid Argument")
    return 0 if (h == 2 and link == 5 and "nvlinkok" not in FLAGS) else 1


NVML_FI_DEV_NVLINK_GET_SPEED = 164
FieldValue = namedtuple("FieldValue", "fieldId scopeId nvmlReturn value")
Value = namedtuple("Value", "uiVal")


def nvmlDeviceGetNvLinkErrorCounter(h, link, counter):
    _check(h)
    if "nvlinkerr2" in FLAGS and h == 2 and link == 7:
        return (12, 1, 2, 1, 0)[counter]
    return 0


def nvmlDeviceGetFieldValues(h, ids):
    _check(h)
    out = []
    for fid in ids:
        fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
        ok = fid == NVML_FI_DEV_NVLINK_GET_SPEED
        out.append(FieldValue(fid, scope, 0 if ok else 3, Value(26562 if ok else 0)))
    return out


def nvmlDeviceGetPersistenceMode(h):
    _check(h)
    return 1


def nvmlDeviceGetPcieReplayCounter(h):
    _check(h)
    return 7 if h == 0 else 0


def nvmlDeviceGetPcieThroughput(h, counter):
    _check(h)
    return 1200 if counter == NVML_PCIE_UTIL_TX_BYTES else 3400


def _pids():
    out = {}
    for item in filter(None, os.environ.get("FAKE_NVML_PIDS", "").split(",")):
        pid, _, gpu = item.partition("@")
        out.setdefault(int(gpu), []).append(int(pid))
    return out


def nvmlDeviceGetComputeRunningProcesses(h):
    _check(h)
    if os.environ.get("FAKE_NVML_PIDS"):
        return [Proc(pid, 2048 * 1024 * 1024) for pid in _pids().get(h, [])]
    return [Proc(os.getpid(), 900 * 1024 * 1024)] if h == 0 else []
