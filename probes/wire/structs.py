"""The sample line decoded in one pass: msgspec into typed Structs, then the frozen samples.

``decode_line``'s orjson + :class:`~probes.wire.fastfill.Filler` path walks 300-odd fields
in Python per 8-GPU sample.  Here msgspec parses the line straight into Structs whose
field types carry the checked decoders' bounds (``Meta(ge=0, le=MAX_AMOUNT)``: a negative
or unbelievable number is a validation error), and the public frozen dataclasses are
built from each Struct's ``asdict`` (its fields are named as the dataclass's).

This path only answers for lines it can judge whole: any line it refuses (an odd value,
a wrong type, a field this console would null rather than trust, PCIe chains) raises, and
the caller falls back to the checked path, whose answer is then the answer.  So both
paths agree on every line by construction; tests/test_decode_paths.py holds them to it
on the agent's lines and on mutated ones.

The Structs are ``gc=False``: they hold no cycles and are dropped right after conversion.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct
from msgspec.structs import asdict

from probes.wire.fastfill import MAX_AMOUNT
from probes.wire.samples import DiskStats, GpuProcess, GpuSample, GpuState, HostSample, HostStats

MAX_COUNT = 2**53
MAX_GPU_INDEX = 1023
MAX_TS = 1e11

Amount = Annotated[float, Meta(ge=0, lt=MAX_AMOUNT)]
"""A sample amount (MiB, W, %, MHz, a rate): ``probes.wire.protocol._pnum``'s bounds, less
the edge: msgspec rounds an int to a float before the bound, so 2**53 + 1 would pass."""
Count = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
"""A count or a size in bytes: ``_pint``'s bounds."""
Index = Annotated[int, Meta(ge=0, le=MAX_GPU_INDEX)]
Stamp = Annotated[float, Meta(ge=0, le=MAX_TS)]
Seq = Annotated[int, Meta(ge=-MAX_COUNT, le=MAX_COUNT)]


class ProcessS(Struct, frozen=True, gc=False):
    """:class:`GpuProcess` on the wire."""

    pid: Count | None = None
    name: str | None = None
    user: str | None = None
    used_mib: Amount | None = None
    slurm_job: str | None = None
    slurm_step: str | None = None
    slurm_task: Count | None = None
    rank: Count | None = None
    local_rank: Count | None = None
    world_size: Count | None = None
    master_addr: str | None = None
    cuda_visible_devices: str | None = None
    container: str | None = None
    runtime: str | None = None
    pod: str | None = None
    environ: bool | None = None


class GpuS(Struct, gc=False):
    """:class:`GpuSample` on the wire, fields in the dataclass's order (a test checks)."""

    index: Index
    uuid: str | None = None
    state: GpuState = GpuState.OK
    bus_id: str | None = None
    mem_used_mib: Amount | None = None
    mem_total_mib: Amount | None = None
    util_pct: Amount | None = None
    mem_util_pct: Amount | None = None
    temp_c: Amount | None = None
    power_w: Amount | None = None
    power_limit_w: Amount | None = None
    sm_clock_mhz: Amount | None = None
    sm_clock_max_mhz: Amount | None = None
    clock_reasons: tuple[str, ...] = ()
    pcie_gen: Count | None = None
    pcie_gen_max: Count | None = None
    pcie_width: Count | None = None
    pcie_width_max: Count | None = None
    temp_mem_c: Amount | None = None
    mem_clock_mhz: Amount | None = None
    mem_clock_max_mhz: Amount | None = None
    pstate: str | None = None
    ecc_corrected_volatile: Count | None = None
    ecc_uncorrected_volatile: Count | None = None
    ecc_corrected_aggregate: Count | None = None
    ecc_uncorrected_aggregate: Count | None = None
    retired_pages_pending: bool | None = None
    remap_correctable: Count | None = None
    remap_uncorrectable: Count | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    nvlink_up: Count | None = None
    nvlink_links: Count | None = None
    persistence: bool | None = None
    pcie_replay: Count | None = None
    pcie_tx_kbs: Amount | None = None
    pcie_rx_kbs: Amount | None = None
    processes: tuple[ProcessS, ...] | None = None


class HostS(Struct, gc=False):
    """:class:`HostStats` on the wire, same order."""

    cpu_pct: Amount | None = None
    load1: Amount | None = None
    load5: Amount | None = None
    load15: Amount | None = None
    mem_used_bytes: Count | None = None
    mem_total_bytes: Count | None = None
    swap_used_bytes: Count | None = None
    swap_total_bytes: Count | None = None
    swap_in_pages_s: Amount | None = None
    swap_out_pages_s: Amount | None = None


class DiskS(Struct, gc=False):
    """:class:`DiskStats` less its name (the key of ``disks``), same order."""

    r_s: Amount | None = None
    w_s: Amount | None = None
    rkb_s: Amount | None = None
    wkb_s: Amount | None = None
    r_await: Amount | None = None
    w_await: Amount | None = None
    aqu_sz: Amount | None = None
    util: Amount | None = None


class SampleS(Struct, gc=False):
    """A v1 ``sample`` line.  ``pcie`` is only looked at: a line with chains falls back."""

    type: str
    ts: Stamp
    seq: Seq | None = None
    gpus: list[GpuS] = []
    host: HostS | None = None
    disks: dict[str, DiskS] = {}
    pcie: Any = None


GPU_FIELDS = tuple(f.name for f in fields(GpuSample))
HOST_FIELDS = tuple(f.name for f in fields(HostStats))
DISK_FIELDS = tuple(f.name for f in fields(DiskStats))[1:]
PROCESS_FIELDS = tuple(f.name for f in fields(GpuProcess))

_DECODER = msgspec.json.Decoder(SampleS)
_new = object.__new__
_set = object.__setattr__
EMPTY_HOST = HostStats()


class Refused(ValueError):
    """The fast path will not judge this line; the checked path will."""


def process(p: ProcessS) -> GpuProcess:
    obj = _new(GpuProcess)
    _set(obj, "__dict__", asdict(p))
    return obj


def gpu(g: GpuS) -> GpuSample:
    """The frozen sample of one GPU Struct (no ``__init__``: its guarded setattrs cost)."""
    values = asdict(g)
    procs = values["processes"]
    if procs is not None:
        values["processes"] = tuple([process(p) for p in procs])
    obj = _new(GpuSample)
    _set(obj, "__dict__", values)
    return obj


def host(h: HostS | None) -> HostStats:
    if h is None:
        return EMPTY_HOST
    obj = _new(HostStats)
    _set(obj, "__dict__", asdict(h))
    return obj


def disk(name: str, d: DiskS) -> DiskStats:
    values = asdict(d)
    values["name"] = name
    obj = _new(DiskStats)
    _set(obj, "__dict__", values)
    return obj


def sample(seq: int, ts: float, gpus: tuple[GpuSample, ...], stats: HostStats,
           disks: tuple[DiskStats, ...]) -> HostSample:
    obj = _new(HostSample)
    _set(obj, "__dict__", {"ts": ts, "seq": seq, "gpus": gpus, "host": stats, "disks": disks,
                           "pcie": None})
    return obj


def decode_sample(line: bytes) -> HostSample:
    """A v1 sample line the agent wrote, decoded in one pass.

    The caller has checked the line needs no cleaning and is not nested too deep.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError, Refused: the checked path decides.
    """
    s = _DECODER.decode(line)
    if s.type != "sample" or s.pcie is not None:
        raise Refused(s.type)
    return sample(s.seq or 0, s.ts, tuple([gpu(g) for g in s.gpus]), host(s.host),
                  tuple([disk(n, d) for n, d in s.disks.items()]))
