"""Reference copy (session 14, start14) of probes/wire/decode_fields.py before the hello's
PCIe chains and NICs were decoded once per text: for tests/wire/test_hello_parts.py.

A parsed agent message's fields, each checked by its type: the typed decode of wire v1.

Split from ``protocol`` (which reads a host's stream into lines and lines into messages):
here is only what one parsed object becomes.  Every field is checked by its type and
bounds, so a number that is NaN, ±Inf, 10**400 or a bool reads as unknown, a GPU with an
index no host could have is dropped, and a timestamp before 1970 or past ``MAX_TS`` is a
lie; nothing a host sends can raise anything but the caller's ``ValueError``/``TypeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from probes.wire import fields
from probes.wire.fabric_fast import (
    MAX_FABRIC_PORTS,
    MAX_NAME,
    MAX_NVLINK_GPUS,
    MAX_NVLINK_ROWS,
    MAX_NVLINK_TEXT,
    MAX_PORT_COUNTERS,
)
from probes.wire.fastfill import MAX_AMOUNT, Filler
from probes.wire.fields import Type
from probes.wire.samples import (
    AgentMessage,
    BlockDevice,
    ClockFacts,
    DatasetDevice,
    DiskStats,
    FabricSample,
    GpuInfo,
    GpuProcess,
    GpuSample,
    GpuState,
    Hello,
    HostFacts,
    HostSample,
    HostStats,
    IbPortSample,
    LogEvent,
    LogSourceState,
    LogSourceStatus,
    Nic,
    NicPort,
    NvLinkSample,
    PcieLink,
    ProbeError,
    ProbeStatus,
    SoftwareVersions,
)
from probes.wire.shared import known, remember, shared

MAX_TOPO_CHARS = 64 * 1024
MAX_CLOCK_SPEED = 1e6
"""A hello's clock speed above this is no simulation rigwatch runs: read as real time."""
MAX_UTC_OFFSET_S = 14 * 3600
"""Zones run from UTC-12 to UTC+14."""


def _num(value: Any) -> float | None:
    """A finite number within ±``MAX_AMOUNT``; NaN, ±Inf, 10**400, ``true`` are None."""
    t = type(value)  # exact types: bool is no number here
    if t is float:
        return value if -MAX_AMOUNT <= value <= MAX_AMOUNT else None  # NaN fails both
    if t is int:
        return float(value) if -MAX_AMOUNT <= value <= MAX_AMOUNT else None
    return None


def _int(value: Any) -> int | None:
    t = type(value)
    if t is int:
        return value if -MAX_AMOUNT <= value <= MAX_AMOUNT else None
    if t is float:
        return int(value) if -MAX_AMOUNT <= value <= MAX_AMOUNT else None
    return None


def _pnum(value: Any) -> float | None:
    """A sample amount (MiB, W, %, MHz, a rate): never negative."""
    f = _num(value)
    return f if f is not None and f >= 0 else None


def _pint(value: Any) -> int | None:
    """A count or a size in bytes: never negative."""
    i = _int(value)
    return i if i is not None and i >= 0 else None


MAX_GPU_INDEX = 1023
MAX_TS = 1e11
"""The year 5138: a timestamp past it (or before 1970) is a lie and reads as unknown."""


def _index(value: Any) -> int | None:
    """A GPU index a host could have; a GPU with another is dropped."""
    i = _int(value)
    return i if i is not None and 0 <= i <= MAX_GPU_INDEX else None


def _ts(value: Any) -> float | None:
    f = _num(value)
    return f if f is not None and 0 <= f <= MAX_TS else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _decode_hello(obj: dict[str, Any]) -> Hello:
    host = _dict(obj.get("host"))
    gpus = tuple(
        GpuInfo(
            index=idx,
            uuid=_str(g.get("uuid")),
            bus_id=_str(g.get("bus_id")),
            name=shared(_str(g.get("name"))),
            mem_total_mib=_pnum(g.get("mem_total_mib")),
            temp_slowdown_c=_pnum(g.get("temp_slowdown_c")),
            temp_shutdown_c=_pnum(g.get("temp_shutdown_c")),
            pcie_gen_max_gpu=_pint(g.get("pcie_gen_max_gpu")),
            serial=_str(g.get("serial")),
            vbios=shared(_str(g.get("vbios"))),
            persistence_mode=_bool(g.get("persistence_mode")),
            ecc_mode=_bool(g.get("ecc_mode")),
            ecc_mode_pending=_bool(g.get("ecc_mode_pending")),
            mig_mode=_bool(g.get("mig_mode")),
            power_limit_default_w=_pnum(g.get("power_limit_default_w")),
        )
        for g in _list(obj.get("gpus"))
        if isinstance(g, dict) and (idx := _index(g.get("index"))) is not None
    )
    probes = tuple(
        shared(ProbeStatus(name=name, available=bool(_dict(p).get("available")),
                           reason=_str(_dict(p).get("reason"))))
        for name, p in _dict(obj.get("probes")).items()
    )
    facts = HostFacts(
        hostname=_str(host.get("hostname")) or "?",
        kernel=_str(host.get("kernel")),
        os_name=_str(host.get("os")),
        python=_str(host.get("python")),
        driver_version=_str(host.get("driver_version")),
        cuda_version=_str(host.get("cuda_version")),
        cpu_model=_str(host.get("cpu_model")),
        cpu_cores_logical=_pint(host.get("cpu_cores_logical")),
        cpu_cores_physical=_pint(host.get("cpu_cores_physical")),
        mem_total_bytes=_pint(host.get("mem_total_bytes")),
        swap_total_bytes=_pint(host.get("swap_total_bytes")),
        gpus=gpus,
        numa_nodes=_int(host.get("numa_nodes")),
        probes=probes,
        simulated=tuple(s for s in _list(obj.get("simulated")) if isinstance(s, str)),
        software=_decode_software(host.get("software")),
        block_devices=tuple(_decode_block_device(d) for d in _list(host.get("block_devices"))
                            if isinstance(d, dict) and _str(d.get("name"))),
        swap_used_bytes=_pint(host.get("swap_used_bytes")),
    )
    protocol = _int(obj.get("v"))
    if protocol is None:
        raise ValueError("hello without protocol version 'v'")
    topo = _str(obj.get("topo_text"))
    clock = _dict(obj.get("clock"))
    speed = _pnum(clock.get("speed"))
    offset = _num(clock.get("utc_offset_s"))
    return Hello(ts=_ts(obj.get("ts")) or 0.0, protocol=protocol,
                 clock=ClockFacts(
                     speed=speed if speed is not None and 0.0 < speed <= MAX_CLOCK_SPEED
                     else 1.0,
                     utc_offset_s=offset if offset is not None
                     and abs(offset) <= MAX_UTC_OFFSET_S else None,
                     boot_time=_ts(clock.get("boot_time"))),
                 agent_version=_str(obj.get("agent")) or "?", facts=facts,
                 pcie=_decode_chains(obj.get("pcie")) or {},
                 nics=tuple(_decode_nic(n) for n in _list(obj.get("nics"))
                            if isinstance(n, dict) and _str(n.get("name"))),
                 topo_text=shared(topo[:MAX_TOPO_CHARS]) if topo else None,
                 datasets=tuple(DatasetDevice(path=d["path"], device=_str(d.get("device")),
                                              free_bytes=_pint(d.get("free_bytes")),
                                              total_bytes=_pint(d.get("total_bytes")))
                                for d in _list(obj.get("datasets"))
                                if isinstance(d, dict) and _str(d.get("path"))))


def _decode_software(value: Any) -> SoftwareVersions:
    """An older agent sends no ``software``: every version is then unknown."""
    d = _dict(value)
    return shared(SoftwareVersions(
        nvcc=_str(d.get("nvcc")), nccl=_str(d.get("nccl")), torch=_str(d.get("torch")),
        cuda_runtime=_str(d.get("cuda_runtime")),
        container_runtimes=tuple(r for r in _list(d.get("container_runtimes"))
                                 if isinstance(r, str)),
        fabric_manager=_str(d.get("fabric_manager"))))


def _decode_block_device(d: dict[str, Any]) -> BlockDevice:
    return shared(BlockDevice(name=str(d["name"]), size_bytes=_pint(d.get("size_bytes")),
                              rotational=_bool(d.get("rotational")),
                              model=_str(d.get("model")), transport=_str(d.get("transport"))))


def _decode_link(d: dict[str, Any]) -> PcieLink:
    """``shared`` of the link, looked up by its typed values first (``hello_shared._link``'s
    key: each field's type is fixed here, so equal values are equal fields but for a float
    zero's sign, which goes to ``shared``): a hello's 32 links cost the collector's start-up
    a dataclass and a key walk each (issue 38, start-up)."""
    address, speed = _str(d.get("address")), _num(d.get("speed_gts"))
    width, max_speed = _int(d.get("width")), _num(d.get("max_speed_gts"))
    max_width, numa, cpus = _int(d.get("max_width")), _int(d.get("numa_node")), \
        _str(d.get("local_cpulist"))
    if speed == 0.0 or max_speed == 0.0:
        return shared(PcieLink(address, speed, width, max_speed, max_width, numa, cpus))
    key = (PcieLink, address, speed, width, max_speed, max_width, numa, cpus)
    got = known(key)
    return got if type(got) is PcieLink else remember(
        key, PcieLink(address, speed, width, max_speed, max_width, numa, cpus))


def _decode_chains(value: Any) -> dict[str, tuple[PcieLink, ...]] | None:
    if not isinstance(value, dict):
        return None
    return {bus: tuple(_decode_link(d) for d in _list(chain) if isinstance(d, dict))
            for bus, chain in value.items() if isinstance(bus, str)}


def _decode_nic_port(p: dict[str, Any]) -> NicPort:
    """``shared`` of the port, by its typed values first (an int and texts: no sign)."""
    key = (NicPort, _int(p.get("port")), _str(p.get("state")), _str(p.get("rate")),
           _str(p.get("link_layer")), _str(p.get("phys_state")))
    got = known(key)
    return got if type(got) is NicPort else remember(key, NicPort(*key[1:]))


def _decode_nic(n: dict[str, Any]) -> Nic:
    ports = tuple(_decode_nic_port(p) for p in _list(n.get("ports")) if isinstance(p, dict))
    # A NIC's GUID is its own; its name, slot, type and bridges are its model's (shared)
    return Nic(name=shared(str(n["name"])), kind=shared(_str(n.get("kind")) or "net"),
               address=shared(_str(n.get("address"))), numa_node=_int(n.get("numa_node")),
               state=shared(_str(n.get("state"))), speed_mbps=_int(n.get("speed_mbps")),
               ports=shared(ports), node_guid=_str(n.get("node_guid")),
               hca_type=shared(_str(n.get("hca_type"))),
               bridges=shared(tuple(b for b in _list(n.get("bridges")) if isinstance(b, str))[:16]))




def _decode_port(p: dict[str, Any]) -> IbPortSample:
    return IbPortSample(
        hca=str(p["hca"])[:MAX_NAME], port=_pint(p.get("port")), state=_str(p.get("state")),
        phys_state=_str(p.get("phys_state")), rate_gbs=_pnum(p.get("rate_gbs")),
        link_layer=_str(p.get("link_layer")),
        errors={k[:MAX_NAME]: n for k, v in list(_dict(p.get("errors")).items())
                [:MAX_PORT_COUNTERS] if isinstance(k, str) and (n := _pint(v)) is not None},
        rx_bytes_s=_pnum(p.get("rx_bytes_s")), tx_bytes_s=_pnum(p.get("tx_bytes_s")),
        xmit_wait_s=_pnum(p.get("xmit_wait_s")),
        unknown=tuple(u[:MAX_NAME] for u in _list(p.get("unknown"))[:MAX_PORT_COUNTERS]
                      if isinstance(u, str)))


def _decode_links(value: Any) -> tuple[NvLinkSample, ...] | None:
    """NVML's links, ``[{"gpu", "links": [[link, up, GB/s, replay, recovery, crc]]}]``."""
    if not isinstance(value, list):
        return None
    out = []
    for g in value[:MAX_NVLINK_GPUS]:
        gpu = _index(_dict(g).get("gpu"))
        for row in _list(_dict(g).get("links"))[:MAX_NVLINK_ROWS]:
            if gpu is None or not isinstance(row, list) or len(row) < 6:
                continue
            link = _pint(row[0])
            if link is not None:
                out.append(NvLinkSample(gpu, link, active=bool(row[1]) if row[1] in (0, 1)
                                        else None, speed_gbs=_pnum(row[2]),
                                        replay=_pint(row[3]), recovery=_pint(row[4]),
                                        crc=_pint(row[5])))
    return tuple(out)


def _decode_fabric(obj: dict[str, Any]) -> FabricSample:
    ts = _ts(obj.get("ts"))
    if ts is None:
        raise ValueError("fabric without a believable 'ts'")
    text = _str(obj.get("nvlink_text"))
    return FabricSample(
        ts=ts, interval_s=_pnum(obj.get("interval_s")),
        ports=tuple(_decode_port(p) for p in _list(obj.get("ports"))[:MAX_FABRIC_PORTS]
                    if isinstance(p, dict) and _str(p.get("hca"))),
        nvlinks=_decode_links(obj.get("nvlink")),
        nvlink_text=text[:MAX_NVLINK_TEXT] if text is not None else None)


def _gpu_state(value: Any) -> GpuState:
    try:
        return GpuState(value)
    except ValueError:
        return GpuState.UNKNOWN


def _decode_gpu(g: dict[str, Any]) -> GpuSample:
    """One GPU, every field checked by its type in the table (``_GPU_CHECKED``)."""
    values = {name: check(g.get(name)) for name, check in _GPU_CHECKED}
    values["index"] = _index(g.get("index")) or 0  # callers keep only GPUs with a valid index
    values["state"] = _gpu_state(g.get("state", "ok"))
    values["clock_reasons"] = tuple(r for r in _list(g.get("clock_reasons"))
                                    if isinstance(r, str))
    values["processes"] = _decode_processes(g.get("processes"))
    obj = object.__new__(GpuSample)  # every field is given: what ``__init__`` would do
    object.__setattr__(obj, "__dict__", values)
    return obj


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _decode_processes(value: Any) -> tuple[GpuProcess, ...] | None:
    return tuple(_decode_process(p) for p in value if isinstance(p, dict)) \
        if isinstance(value, list) else None


def _decode_process(p: dict[str, Any]) -> GpuProcess:
    return GpuProcess(
        pid=_pint(p.get("pid")), name=_str(p.get("name")), user=_str(p.get("user")),
        used_mib=_pnum(p.get("used_mib")), slurm_job=_str(p.get("slurm_job")),
        slurm_step=_str(p.get("slurm_step")), slurm_task=_pint(p.get("slurm_task")),
        rank=_pint(p.get("rank")), local_rank=_pint(p.get("local_rank")),
        world_size=_pint(p.get("world_size")), master_addr=_str(p.get("master_addr")),
        cuda_visible_devices=_str(p.get("cuda_visible_devices")), pod=_str(p.get("pod")),
        container=_str(p.get("container")), runtime=_str(p.get("runtime")),
        environ=_bool(p.get("environ")))


def _decode_disk(name: str, d: dict[str, Any]) -> DiskStats:
    return DiskStats(
        name=name,
        **{k: _pnum(d.get(k)) for k in
           ("r_s", "w_s", "rkb_s", "wkb_s", "r_await", "w_await", "aqu_sz", "util")},
    )


def _decode_sample(obj: dict[str, Any]) -> HostSample:
    host = _dict(obj.get("host"))
    stats = HostStats(
        cpu_pct=_pnum(host.get("cpu_pct")),
        load1=_pnum(host.get("load1")),
        load5=_pnum(host.get("load5")),
        load15=_pnum(host.get("load15")),
        mem_used_bytes=_pint(host.get("mem_used_bytes")),
        mem_total_bytes=_pint(host.get("mem_total_bytes")),
        swap_used_bytes=_pint(host.get("swap_used_bytes")),
        swap_total_bytes=_pint(host.get("swap_total_bytes")),
        swap_in_pages_s=_pnum(host.get("swap_in_pages_s")),
        swap_out_pages_s=_pnum(host.get("swap_out_pages_s")),
    )
    gpus = tuple(_decode_gpu(g) for g in _list(obj.get("gpus"))
                 if isinstance(g, dict) and _index(g.get("index")) is not None)
    disks = tuple(_decode_disk(n, d) for n, d in _dict(obj.get("disks")).items()
                  if isinstance(d, dict))
    ts = _ts(obj.get("ts"))
    if ts is None:
        raise ValueError("sample without a believable 'ts'")
    return HostSample(ts=ts, seq=_int(obj.get("seq")) or 0, gpus=gpus, host=stats, disks=disks,
                      pcie=_decode_chains(obj.get("pcie")))


def _decode_event(obj: dict[str, Any]) -> LogEvent:
    line = obj["line"]
    if not isinstance(line, str):
        raise TypeError("event 'line' is not a string")
    return LogEvent(ts=_ts(obj.get("ts")) or 0.0, source=_str(obj.get("source")) or "?", line=line,
                    boot=_str(obj.get("boot")), cursor=_str(obj.get("cursor")))


def _log_status(value: Any) -> LogSourceStatus:
    try:
        return LogSourceStatus(value)
    except ValueError:
        return LogSourceStatus.UNAVAILABLE


def _decode_logsource(obj: dict[str, Any]) -> LogSourceState:
    state = obj["state"]
    if not isinstance(state, str):
        raise TypeError("logsource 'state' is not a string")
    return LogSourceState(ts=_ts(obj.get("ts")) or 0.0, source=_str(obj.get("source")) or "?",
                          state=_log_status(state), via=_str(obj.get("via")),
                          detail=_str(obj.get("detail")) or "", fix=_str(obj.get("fix")),
                          note=_str(obj.get("note")))


def _decode_error(obj: dict[str, Any]) -> ProbeError:
    return ProbeError(ts=_ts(obj.get("ts")) or 0.0, probe=_str(obj.get("probe")) or "?",
                      message=_str(obj.get("message")) or "")


_CHECKS: dict[Type, Callable[[Any], Any]] = {Type.AMOUNT: _pnum, Type.COUNT: _pint,
                                             Type.FLAG: _bool, Type.TEXT: _str}
_GPU_CHECKED = tuple((s.name, _CHECKS[s.type]) for s in fields.GPU_TABLE if s.type in _CHECKS)
"""The table's plain GPU fields with their checked decoders (index, state, reasons and
processes have their own)."""
_FILL_TYPES = {Type.AMOUNT: "float | None", Type.COUNT: "int | None", Type.FLAG: "bool | None",
               Type.TEXT: "str | None"}
_GPU = Filler(GpuSample, skip=("index",),
              more={s.name: _FILL_TYPES[s.type] for s in fields.GPU_TABLE if s.type in _CHECKS})
_HOST = Filler(HostStats)
_DISK = Filler(DiskStats)
_EMPTY_HOST = HostStats()


def _fast_gpu(g: dict[str, Any]) -> GpuSample | None:
    index = g.get("index")
    if type(index) is not int or not 0 <= index <= MAX_GPU_INDEX:
        index = _index(index)
        if index is None:
            return None
    reasons = g.get("clock_reasons")
    state = g.get("state", "ok")
    return _GPU.fill(
        g, index=index,
        state=GpuState.OK if state == "ok" else _gpu_state(state),
        clock_reasons=tuple(r for r in reasons if type(r) is str)
        if type(reasons) is list else (),
        processes=_decode_processes(g.get("processes")))


def _fast_sample(obj: dict[str, Any]) -> HostSample:
    """``_decode_sample`` for a line parsed by orjson (every float finite)."""
    ts = obj.get("ts")
    if type(ts) is not float or not 0 <= ts <= MAX_TS:
        ts = _ts(ts)
        if ts is None:
            raise ValueError("sample without a believable 'ts'")
    host = obj.get("host")
    gpus = obj.get("gpus")
    disks = obj.get("disks")
    return HostSample(
        ts=ts, seq=_int(obj.get("seq")) or 0,
        gpus=tuple(s for g in gpus if type(g) is dict and (s := _fast_gpu(g)) is not None)
        if type(gpus) is list else (),
        host=_HOST.fill(host) if type(host) is dict else _EMPTY_HOST,
        disks=tuple(_DISK.fill(d, name=n) for n, d in disks.items() if type(d) is dict)
        if type(disks) is dict else (),
        pcie=_decode_chains(obj.get("pcie")))


_FAST_DECODERS: dict[str, Callable[[dict[str, Any]], AgentMessage]] = {"sample": _fast_sample}
_DECODERS: dict[str, Callable[[dict[str, Any]], AgentMessage]] = {
    "hello": _decode_hello,
    "sample": _decode_sample,
    "event": _decode_event,
    "error": _decode_error,
    "logsource": _decode_logsource,
    "fabric": _decode_fabric,
}
