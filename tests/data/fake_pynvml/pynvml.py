"""A stand-in for nvidia-ml-py's ``pynvml`` with the same names and error classes.

Shaped after nvidia-ml-py 13.x: ``NVMLError`` subclasses per return code, bytes or str
returns, ``nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)``.  Behaviour is chosen
by FAKE_NVML: comma-separated flags
  lost2        GPU 2 raises NVMLError_GpuIsLost on every call
  nopower1     GPU 1 raises NVMLError_NotSupported for power
  oldreasons   no nvmlDeviceGetCurrentClocksEventReasons (pre-12.535 binding)
  hangutil     nvmlDeviceGetUtilizationRates blocks (a hung driver)
  noinit       nvmlInit raises NVMLError_DriverNotLoaded
"""
import os
import time
from collections import namedtuple

FLAGS = set(filter(None, os.environ.get("FAKE_NVML", "").split(",")))
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
nvmlMemory_v2 = 0x02000028


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


Memory = namedtuple("Memory", "total reserved free used")
Util = namedtuple("Util", "gpu memory")
Pci = namedtuple("Pci", "busId")


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
    if "hangutil" in FLAGS:
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
