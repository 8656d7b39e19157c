"""The history's vocabulary: which fields are series, their keys, and how each is stored.

Keys are strings (``gpu/3/temp_c``) built only by the functions here, whose field arguments
are ``Literal`` types: a misspelt field is a mypy error, not an empty chart.  A charted GPU
metric is one with a ``chart`` codec in the wire's field table (``probes.wire.fields``):
``GPU_FIELDS`` and its coarse codecs are derived from it; ``GpuField`` is the same names
for mypy (``tests/wire/test_metric_table.py`` checks that they agree).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, NewType, cast

from probes.wire import fields
from probes.wire.clock_reasons import REASON_BITS
from probes.wire.samples import GpuState
from tests.history.before_s13.storage import F32, HALF, PCT, Codec

SeriesKey = NewType("SeriesKey", str)
"""A series' key, as built by ``gpu_key`` and friends."""

GpuField = Literal["mem_used_mib", "util_pct", "temp_c", "power_w", "sm_clock_mhz"]
GpuStepField = Literal["state", "clock_reasons", "ecc_corrected_volatile",
                       "ecc_uncorrected_volatile", "remap_correctable", "remap_uncorrectable",
                       "pcie_width", "pcie_gen", "power_limit_w", "sm_clock_max_mhz",
                       "mem_total_mib"]
HostField = Literal["cpu_pct", "mem_used_bytes", "swap_in_pages_s", "swap_out_pages_s",
                    "gpu_count"]
DiskField = Literal["util", "await", "aqu_sz"]
ProcField = Literal["used_mib"]

GPU_FIELDS: tuple[GpuField, ...] = cast(
    "tuple[GpuField, ...]", tuple(s.name for s in fields.charted(fields.GPU_TABLE)))
"""Dense per-GPU series (a value every sample): the table's charted fields."""
GPU_STEP_FIELDS: tuple[GpuStepField, ...] = (
    "state", "clock_reasons", "ecc_corrected_volatile", "ecc_uncorrected_volatile",
    "remap_correctable", "remap_uncorrectable", "pcie_width", "pcie_gen", "power_limit_w",
    "sm_clock_max_mhz", "mem_total_mib")
"""Per-GPU step series: recorded on change only.  ``clock_reasons`` is a ``REASON_BITS``
mask, ``state`` a ``STATE_CODES`` code."""
HOST_FIELDS: tuple[HostField, ...] = ("cpu_pct", "mem_used_bytes", "swap_in_pages_s",
                                      "swap_out_pages_s", "gpu_count")
"""``gpu_count`` counts the GPUs that answered (state ok) in a sample."""
DISK_FIELDS: tuple[DiskField, ...] = ("util", "await", "aqu_sz")
"""``await`` is the worse of ``r_await`` and ``w_await`` (ms)."""

REASON_OTHER = 0x8000
"""The bit stored for a clock-event reason name not in ``REASON_BITS``."""
STATE_CODES = {GpuState.OK: 0, GpuState.UNKNOWN: 1, GpuState.UNRESPONSIVE: 2, GpuState.LOST: 3}
"""A GPU's state as the number its step series holds."""

MIB16 = Codec("H", 1 / 16)
"""MiB in 16 MiB steps, up to 1 TiB: a bucket's memory, where a leak shows as hundreds of
MiB an hour (the raw tier keeps float32)."""
CHART_CODECS: Mapping[fields.Chart, Codec] = {
    "pct": PCT, "mib16": MIB16, "w10": Codec("H", 10.0), "mhz": Codec("H", 1.0)}
"""A charted GPU field's coarse codec by the table's name for it."""
COARSE_CODECS: Mapping[GpuField | HostField | DiskField | ProcField, Codec] = {
    **{cast(GpuField, s.name): CHART_CODECS[s.chart] for s in fields.charted(fields.GPU_TABLE)
       if s.chart is not None},
    "cpu_pct": PCT, "mem_used_bytes": F32,
    "swap_in_pages_s": HALF, "swap_out_pages_s": HALF, "gpu_count": Codec("B", 1.0),
    "util": PCT, "await": HALF, "aqu_sz": HALF, "used_mib": MIB16}
"""How each dense field is stored in the bucket tiers (lo, hi, mean)."""
RAW_F32 = frozenset({*(s.name for s in fields.charted(fields.GPU_TABLE) if s.chart == "mib16"),
                     "mem_used_bytes", "used_mib"})
"""Raw series that need float32's range (MiB: a GPU's memory passes half precision's
65504); the others are half precision."""


KEYS_SHARED_MAX = 65536
"""Keys kept for sharing (``_shared``); past it new keys are built each time."""
_shared: dict[tuple[str, object, str], SeriesKey] = {}
"""One string per key for every host: each host's rings, step series and key lists hold
the same ~100 keys, ~6 KB a host when each built its own (issue 38)."""


def _key(kind: str, part: object, field: str) -> SeriesKey:
    exact = type(part) is int or type(part) is str  # True or 1.0 would find 1's key
    key = _shared.get((kind, part, field)) if exact else None
    if key is None:
        key = SeriesKey(f"{kind}/{part}/{field}" if kind != "host" else f"host/{field}")
        if exact and len(_shared) < KEYS_SHARED_MAX:
            _shared[(kind, part, field)] = key
    return key


def gpu_key(index: int, field: GpuField | GpuStepField) -> SeriesKey:
    """The key of a per-GPU series (``GPU_FIELDS`` or ``GPU_STEP_FIELDS``)."""
    return _key("gpu", index, field)


def host_key(field: HostField) -> SeriesKey:
    """The key of a host series (``HOST_FIELDS``)."""
    return _key("host", "", field)


def disk_key(name: str, field: DiskField) -> SeriesKey:
    """The key of a disk series (``DISK_FIELDS``)."""
    return _key("disk", name, field)


def proc_key(gpu: int, pid: int) -> SeriesKey:
    """The key of a process's GPU memory (MiB) on one GPU."""
    return SeriesKey(f"proc/{gpu}/{pid}/used_mib")


def reason_mask(reasons: Iterable[str]) -> int:
    """Clock-event reason names as a ``REASON_BITS`` mask."""
    mask = 0
    for r in reasons:
        mask |= REASON_BITS.get(r, REASON_OTHER)
    return mask


def codec_for(key: str, tier: int) -> Codec:
    """How series ``key`` is stored in ``tier`` (0: raw)."""
    field = key.rsplit("/", 1)[1]
    if tier == 0:
        return F32 if field in RAW_F32 else HALF
    return COARSE_CODECS[field]  # type: ignore[index]


def codecs_of(key: str) -> tuple[Codec, Codec]:
    """``key``'s raw codec and its codec in every coarser tier (``codec_for``'s two
    answers, from one split: a host's ~62 series are added at once, ``TierSet.add_many``)."""
    field = key.rsplit("/", 1)[1]
    return (F32 if field in RAW_F32 else HALF), COARSE_CODECS[field]  # type: ignore[index]
