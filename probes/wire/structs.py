"""The sample line decoded in one pass: msgspec into typed Structs, then the frozen samples.

``decode_line``'s orjson + :class:`~probes.wire.fastfill.Filler` path walks 300-odd fields
in Python per 8-GPU sample.  Here msgspec parses the line straight into Structs whose
field types carry the checked decoders' bounds (``Meta(ge=0, le=MAX_AMOUNT)``: a negative
or unbelievable number is a validation error), and the public frozen dataclasses are
built from each Struct's ``asdict`` (its fields are named as the dataclass's).

This path only answers for lines it can judge whole: any line it refuses (an odd value,
a wrong type, a field this console would null rather than trust, PCIe chains) raises, and
the caller falls back to the checked path, whose answer is then the answer.  So both
paths agree on every line by construction; tests/wire/test_decode_paths.py holds them to it
on the agent's lines and on mutated ones.

The Structs are ``gc=False``: they hold no cycles and are dropped right after conversion.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct
from msgspec.structs import asdict, astuple

from probes.wire import fields
from probes.wire.fastfill import MAX_AMOUNT
from probes.wire.fields import MAX_COUNT, Amount, Count, Index, Type
from probes.wire.samples import (
    DiskStats,
    GpuProcess,
    GpuSample,
    GpuState,
    HostSample,
    HostStats,
    PcieLink,
)
from probes.wire.shared import known, remember, shared

MAX_TS = 1e11

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


def _struct_field(spec: fields.GpuFieldSpec) -> tuple[str, Any, Any]:
    """A table field as a v1 Struct field: its checked type and the dataclass's default."""
    t = spec.type
    if t is Type.INDEX:
        return spec.name, Index, msgspec.NODEFAULT
    if t is Type.STATE:
        return spec.name, GpuState, GpuState.OK
    if t is Type.REASONS:
        return spec.name, tuple[str, ...], ()
    if t is Type.PROCESSES:
        return spec.name, tuple[ProcessS, ...] | None, None
    return spec.name, _SCALAR[t] | None, None


_SCALAR: dict[Type, Any] = {Type.AMOUNT: Amount, Type.COUNT: Count, Type.FLAG: bool,
                            Type.TEXT: str}


def gpu_struct(table: tuple[fields.GpuFieldSpec, ...]) -> type[Struct]:
    """:class:`GpuSample` on the wire, from the table: the dataclass's fields in its order
    (a test checks), then any the table has beyond them."""
    declared = [f.name for f in dataclass_fields(GpuSample)]
    first: dict[str, fields.GpuFieldSpec] = {}
    for spec in table:
        if spec.type is not Type.PROCESS_MIB:  # the moving half of ``processes``
            first.setdefault(spec.name, spec)
    order = [n for n in declared if n in first] + [n for n in first if n not in declared]
    return msgspec.defstruct("GpuS", [_struct_field(first[n]) for n in order], gc=False)


GpuS = gpu_struct(fields.GPU_TABLE)


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
    gpus: list[GpuS] = []  # type: ignore[valid-type]
    host: HostS | None = None
    disks: dict[str, DiskS] = {}
    pcie: Any = None


SignedAmount = Annotated[float, Meta(gt=-MAX_AMOUNT, lt=MAX_AMOUNT)]
"""``probes.wire.decode_fields._num``'s bounds less the edges (as ``fields.Amount``: msgspec rounds
an int to a float before the bound)."""
SignedCount = Annotated[int, Meta(ge=-MAX_COUNT, le=MAX_COUNT)]
"""``probes.wire.decode_fields._int``'s bounds for an int (a float there refuses the line)."""


class PcieLinkS(Struct, gc=False):
    """:class:`PcieLink` on the wire (a tick's PCIe chains), same order; typed as v1's
    checked decoder bounds it (``_decode_link``): any value it would null (a float for a
    width, a number for an address, NaN, 1e300) refuses the line, whose checked path then
    decides, so both paths agree."""

    address: str | None = None
    speed_gts: SignedAmount | None = None
    width: SignedCount | None = None
    max_speed_gts: SignedAmount | None = None
    max_width: SignedCount | None = None
    numa_node: SignedCount | None = None
    local_cpulist: str | None = None


Chains = dict[str, list[PcieLinkS]]
"""A tick's PCIe chains: {bus id: the links from the GPU up}."""


def chains(value: Chains) -> dict[str, tuple[PcieLink, ...]]:
    """The sample's ``pcie`` of typed chains, equal to ``_decode_chains``' (each link
    shared as there: a fleet's chains are alike).

    A link is looked up by its values first (``shared.known``): ``shared``'s key walk was
    most of a tick's cost (32 links a tick).  The struct fixes each field's type, so equal
    values are the same values, but for a float zero (``-0.0 == 0.0``): a link with one
    goes to ``shared`` alone.
    """
    out = {}
    for bus, links in value.items():
        made = []
        for d in links:
            key = (PcieLinkS, astuple(d))
            zero = d.speed_gts == 0.0 or d.max_speed_gts == 0.0
            link = known(key)
            if type(link) is not PcieLink or zero:
                link = _new(PcieLink)
                _set(link, "__dict__", asdict(d))
                link = shared(link) if zero else remember(key, link)
            made.append(link)
        out[bus] = tuple(made)
    return out


def chain_texts(value: Chains) -> list[str]:
    """Every text in typed chains (bus ids, addresses, CPU lists): what must be printable."""
    texts = list(value)
    for links in value.values():
        for d in links:
            if d.address is not None:
                texts.append(d.address)
            if d.local_cpulist is not None:
                texts.append(d.local_cpulist)
    return texts


GPU_FIELDS = tuple(f.name for f in dataclass_fields(GpuSample))
HOST_FIELDS = tuple(f.name for f in dataclass_fields(HostStats))
DISK_FIELDS = tuple(f.name for f in dataclass_fields(DiskStats))[1:]
PROCESS_FIELDS = tuple(f.name for f in dataclass_fields(GpuProcess))

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


def gpu(g: Struct) -> GpuSample:
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
           disks: tuple[DiskStats, ...], static_epoch: object | None = None,
           wire_row: Any = None, pcie: dict[str, tuple[PcieLink, ...]] | None = None
           ) -> HostSample:
    """The frozen sample (``static_epoch``, ``wire_row``: the wire v2's, see
    :class:`HostSample`)."""
    obj = _new(HostSample)
    _set(obj, "__dict__", {"ts": ts, "seq": seq, "gpus": gpus, "host": stats, "disks": disks,
                           "pcie": pcie, "static_epoch": static_epoch, "wire_row": wire_row})
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
