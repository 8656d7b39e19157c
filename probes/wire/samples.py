"""Typed samples decoded from the agent's wire protocol (see ``probes/wire/PROTOCOL.md``).

Every quantity carries its unit in its name; ``None`` means "not available on this
host or GPU", never zero.  Docstrings name the command-line equivalent, which is
also what the agent's nvidia-smi fallback reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from msgspec import Struct


class GpuState(str, Enum):
    """Whether a GPU answered this tick."""

    OK = "ok"
    LOST = "lost"
    """NVML says GpuIsLost, or nvidia-smi cannot determine the device handle."""
    UNKNOWN = "unknown"
    """The GPU probe timed out or failed this tick; the GPU may be fine."""
    UNRESPONSIVE = "unresponsive"
    """A probe call is still hung from an earlier tick."""


@dataclass(frozen=True)
class GpuInfo:
    """A GPU as listed in the agent's hello (``nvidia-smi -L`` plus bus id and memory)."""

    index: int
    uuid: str | None
    bus_id: str | None
    name: str | None
    mem_total_mib: float | None
    temp_slowdown_c: float | None = None
    """Where the driver starts slowing the GPU for heat (NVML slowdown threshold)."""
    temp_shutdown_c: float | None = None
    pcie_gen_max_gpu: int | None = None
    """The GPU's own best PCIe generation; ``GpuSample.pcie_gen_max`` also counts the slot."""
    serial: str | None = None
    vbios: str | None = None
    persistence_mode: bool | None = None
    """``persistence_mode``: off means every job start pays the driver's init."""
    ecc_mode: bool | None = None
    """``ecc.mode.current``; None where the GPU has no ECC."""
    ecc_mode_pending: bool | None = None
    """``ecc.mode.pending``: differs from current until the next reset."""
    mig_mode: bool | None = None
    """``mig.mode.current``; None where the GPU has no MIG."""
    power_limit_default_w: float | None = None


@dataclass(frozen=True)
class PcieLink:
    """One PCI function's link as sysfs shows it (``current_link_speed`` … ``numa_node``)."""

    address: str | None
    speed_gts: float | None = None
    width: int | None = None
    max_speed_gts: float | None = None
    max_width: int | None = None
    numa_node: int | None = None
    local_cpulist: str | None = None


@dataclass(frozen=True)
class NicPort:
    """An InfiniBand port (``/sys/class/infiniband/<hca>/ports/<n>``)."""

    port: int | None
    state: str | None
    rate: str | None
    link_layer: str | None
    phys_state: str | None = None
    """``5: LinkUp``, ``3: Disabled``, ``2: Polling`` as sysfs prints it."""


@dataclass(frozen=True)
class Nic:
    """A physical NIC or HCA with where it sits on the PCI tree."""

    name: str
    kind: str
    """``infiniband`` (an HCA) or ``net`` (a network interface)."""
    address: str | None
    numa_node: int | None
    state: str | None = None
    speed_mbps: int | None = None
    ports: tuple[NicPort, ...] = ()
    node_guid: str | None = None
    """An HCA's ``node_guid`` (``a088:c203:00ad:eab8``): what ``ibnetdiscover`` names it by."""
    hca_type: str | None = None
    """``MT4129`` (ConnectX-7): ports of one model are compared with each other."""
    bridges: tuple[str, ...] = ()
    """The PCI bridges above the HCA, nearest first: a GPU under the same switch is beside it."""


@dataclass(frozen=True)
class IbPortSample:
    """One InfiniBand/RoCE port over the agent's fabric interval (``/sys/class/infiniband/
    <hca>/ports/<n>``; ``ibstat``, ``perfquery`` read the same counters)."""

    hca: str
    port: int | None = None
    state: str | None = None
    """``ACTIVE``, ``DOWN``, ``INIT``, ``ARMED`` (sysfs ``state`` after its number)."""
    phys_state: str | None = None
    """``LinkUp``, ``Disabled``, ``Polling`` …"""
    rate_gbs: float | None = None
    """``rate``: ``400 Gb/sec (4X NDR)`` -> 400."""
    link_layer: str | None = None
    """``InfiniBand`` or ``Ethernet`` (RoCE)."""
    errors: Mapping[str, int] = field(default_factory=dict)
    """How much each error counter rose in the interval (only those that rose)."""
    rx_bytes_s: float | None = None
    """``port_rcv_data`` × 4 per second; None when a reset or saturation hid it."""
    tx_bytes_s: float | None = None
    xmit_wait_s: float | None = None
    """``port_xmit_wait`` ticks per second: the port had data but no credit (congestion)."""
    unknown: tuple[str, ...] = ()
    """Counters whose increase could not be known (reset, wrap, stuck at the top)."""


@dataclass(frozen=True)
class NvLinkSample:
    """One NVLink of one GPU (``nvidia-smi nvlink -s`` / ``-e``; NVML ``GetNvLinkState``,
    ``GetNvLinkErrorCounter``); the counters are totals since the driver loaded."""

    gpu: int
    link: int
    active: bool | None = None
    speed_gbs: float | None = None
    replay: int | None = None
    recovery: int | None = None
    crc: int | None = None


@dataclass(frozen=True)
class FabricSample:
    """A host's fabric: its IB/RoCE ports and its GPUs' NVLinks (the ``fabric`` message;
    sent on a change, after errors, else every 30 samples)."""

    ts: float
    interval_s: float | None = None
    """What the ports' rates and increases cover; None in the first message."""
    ports: tuple[IbPortSample, ...] = ()
    nvlinks: tuple[NvLinkSample, ...] | None = None
    """From NVML; None when this message does not say (the text below may)."""
    nvlink_text: str | None = None
    """``nvidia-smi nvlink -s`` and ``-e`` as printed, when they changed (hosts without
    NVML); the console parses them as ``rigwatch explain`` does."""


@dataclass(frozen=True)
class DatasetDevice:
    """Which block device holds a configured dataset path (None: could not tell)."""

    path: str
    device: str | None
    free_bytes: int | None = None
    """``statvfs`` space available to unprivileged users on the path's file system."""
    total_bytes: int | None = None


@dataclass(frozen=True)
class BlockDevice:
    """A whole disk (``/sys/block``, partitions, loop and ram devices left out)."""

    name: str
    size_bytes: int | None = None
    rotational: bool | None = None
    model: str | None = None
    transport: str | None = None
    """``nvme``, ``sata``, ``sas``, ``virtio``…; ``nvme`` for an ``nvme*`` device."""


@dataclass(frozen=True)
class SoftwareVersions:
    """Versions the preflight and the manifest compare, looked up without running training
    code: package metadata, library file names, ``--version`` of a tool (None: not found)."""

    nvcc: str | None = None
    """``nvcc --version`` release, e.g. ``12.4.131`` (PATH, then /usr/local/cuda/bin)."""
    nccl: str | None = None
    """From ``nvidia-nccl-cu*`` package metadata, else a ``libnccl.so.2.x.y`` file name."""
    torch: str | None = None
    """``torch`` package metadata of the host's python3 (never imported)."""
    cuda_runtime: str | None = None
    """``nvidia-cuda-runtime-cu*`` package metadata or ``/usr/local/cuda/version.json``."""
    container_runtimes: tuple[str, ...] = ()
    """Runtimes found on PATH: docker, podman, containerd, nvidia-container-cli, enroot,
    apptainer, singularity."""
    fabric_manager: str | None = None
    """``nv-fabricmanager --version`` where installed (NVSwitch systems)."""


@dataclass(frozen=True)
class ProbeStatus:
    """Whether one probe (nvml, nvidia-smi, psutil, diskstats, …) is usable, and why not."""

    name: str
    available: bool
    reason: str | None = None


@dataclass(frozen=True)
class HostFacts:
    """What a host is: sent once in ``hello``."""

    hostname: str
    kernel: str | None
    os_name: str | None
    python: str | None
    driver_version: str | None
    cuda_version: str | None
    cpu_model: str | None
    cpu_cores_logical: int | None
    cpu_cores_physical: int | None
    mem_total_bytes: int | None
    swap_total_bytes: int | None
    gpus: tuple[GpuInfo, ...] = ()
    numa_nodes: int | None = None
    probes: tuple[ProbeStatus, ...] = ()
    simulated: tuple[str, ...] = ()
    """Simulator scenarios; empty for a real host."""
    software: SoftwareVersions = field(default_factory=SoftwareVersions)
    block_devices: tuple[BlockDevice, ...] = ()
    swap_used_bytes: int | None = None
    """Swap in use when the hello was sent (``SwapTotal - SwapFree``)."""


@dataclass(frozen=True)
class ClockFacts:
    """How a host's times read (the hello's ``clock``)."""

    speed: float = 1.0
    """Host seconds per real second: a simulated host lives faster (the demo's 60)."""
    utc_offset_s: float | None = None
    """The host's local time minus UTC, for log stamps that name no zone; None: unknown."""
    boot_time: float | None = None
    """When the host booted (its clock), for the kernel's ``[sec.usec]`` stamps."""


@dataclass(frozen=True)
class Hello:
    """The first line from an agent."""

    ts: float
    protocol: int
    agent_version: str
    facts: HostFacts
    pcie: Mapping[str, tuple[PcieLink, ...]] = field(default_factory=dict)
    """GPU bus id -> its link and the bridges above it, GPU first."""
    nics: tuple[Nic, ...] = ()
    topo_text: str | None = None
    """``nvidia-smi topo -m`` as the host printed it (parsed by ``probes.rules.parsers.topo``)."""
    datasets: tuple[DatasetDevice, ...] = ()
    clock: ClockFacts = field(default_factory=lambda: ClockFacts())
    """How the host's times read: how fast its clock runs, its zone, its boot."""


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU (``--query-compute-apps``) with its owner from /proc."""

    pid: int | None
    name: str | None
    user: str | None
    used_mib: float | None
    # Who it works for (the agent's ``attribution``: cgroup and whitelisted environment);
    # None where the host could not tell.
    slurm_job: str | None = None
    slurm_step: str | None = None
    slurm_task: int | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    master_addr: str | None = None
    cuda_visible_devices: str | None = None
    container: str | None = None
    """The container's short id (12 hex digits, as ``docker ps`` shows it)."""
    runtime: str | None = None
    pod: str | None = None
    """The Kubernetes pod's UID."""
    environ: bool | None = None
    """Whether the agent could read the process's environment (its owner or root only)."""


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one tick (``nvidia-smi --query-gpu=…``)."""

    index: int
    """``index``; -1 when a lost GPU is known only by its bus id."""
    uuid: str | None = None
    state: GpuState = GpuState.OK
    bus_id: str | None = None
    """Set when the GPU is known by bus id only (a lost GPU reported by nvidia-smi)."""
    mem_used_mib: float | None = None
    """``memory.used``"""
    mem_total_mib: float | None = None
    """``memory.total``"""
    util_pct: float | None = None
    """``utilization.gpu``"""
    mem_util_pct: float | None = None
    """``utilization.memory``"""
    temp_c: float | None = None
    """``temperature.gpu``"""
    power_w: float | None = None
    """``power.draw``"""
    power_limit_w: float | None = None
    """``enforced.power.limit``"""
    sm_clock_mhz: float | None = None
    """``clocks.sm``"""
    sm_clock_max_mhz: float | None = None
    """``clocks.max.sm``"""
    clock_reasons: tuple[str, ...] = ()
    """Active clock-event (throttle) reasons by name, ``clocks_event_reasons.active`` decoded."""
    pcie_gen: int | None = None
    """``pcie.link.gen.gpucurrent``"""
    pcie_gen_max: int | None = None
    """``pcie.link.gen.max``"""
    pcie_width: int | None = None
    """``pcie.link.width.current``"""
    pcie_width_max: int | None = None
    """``pcie.link.width.max``"""
    temp_mem_c: float | None = None
    """``temperature.memory`` (HBM)"""
    mem_clock_mhz: float | None = None
    """``clocks.mem``"""
    mem_clock_max_mhz: float | None = None
    """``clocks.max.mem``"""
    pstate: str | None = None
    """``pstate``: P0 is full performance, P8 idle."""
    ecc_corrected_volatile: int | None = None
    """``ecc.errors.corrected.volatile.total`` (since the driver loaded)"""
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    """``ecc.errors.corrected.aggregate.total`` (lifetime)"""
    ecc_uncorrected_aggregate: int | None = None
    retired_pages_pending: bool | None = None
    """``retired_pages.pending``: a page waits for the next driver reload to be retired."""
    remap_correctable: int | None = None
    """``remapped_rows.correctable``"""
    remap_uncorrectable: int | None = None
    remap_pending: bool | None = None
    """``remapped_rows.pending``: the GPU needs a reset to apply a remap."""
    remap_failure: bool | None = None
    """``remapped_rows.failure``: no spare rows left; the GPU needs service."""
    nvlink_up: int | None = None
    nvlink_links: int | None = None
    persistence: bool | None = None
    """``persistence_mode``"""
    pcie_replay: int | None = None
    """PCIe replay counter: link-level retransmissions since boot."""
    pcie_tx_kbs: float | None = None
    pcie_rx_kbs: float | None = None
    processes: tuple[GpuProcess, ...] | None = None
    """Compute processes; None when the probe cannot list them."""

    @property
    def mem_used_pct(self) -> float | None:
        """Memory used as a percentage of total."""
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib


@dataclass(frozen=True)
class HostStats:
    """CPU, load, memory and swap of the host (``top``, ``/proc/loadavg``, ``free -b``)."""

    cpu_pct: float | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_in_pages_s: float | None = None
    """``vmstat`` si: pages swapped in per second; steady swapping starves a training job."""
    swap_out_pages_s: float | None = None


@dataclass(frozen=True)
class DiskStats:
    """One block device over the last interval (``iostat -x``), from ``/proc/diskstats`` deltas."""

    name: str
    r_s: float | None = None
    w_s: float | None = None
    rkb_s: float | None = None
    wkb_s: float | None = None
    r_await: float | None = None
    w_await: float | None = None
    aqu_sz: float | None = None
    util: float | None = None
    """%util: share of the interval the device was busy."""


class _RowGpus:
    """``HostSample.gpus`` of a sample the wire v2's fast path left unbuilt (issue 38: no
    object per GPU on the hot path): built on first read from the sample's ``wire_row`` and
    ``static_epoch`` (``StaticEpoch.row_gpus``), then kept in the sample's ``__dict__`` in
    the key order an eager sample has; from then on the instance's value wins
    over this non-data descriptor, so a sample built any other way (``__init__``, the
    decoders, ``dataclasses.replace``) reads its own ``gpus`` as before, at the same cost.

    A descriptor on ``HostSample`` itself rather than a subclass: the sample stays a
    ``HostSample`` (the recorder and others test ``type(x) is HostSample``), and equality,
    ``repr``, ``dataclasses.replace``/``asdict``/``fields``, pickling and the snapshot's
    ``_plain`` all read the field by attribute, which builds it.  Two threads reading it at
    once both build equal tuples; one of them is kept (a field another thread built
    meanwhile may then be built again, equal).  ``_RowHost`` and ``_RowDisks`` do the same
    for ``host`` and ``disks``."""

    def __get__(self, obj: HostSample | None, cls: type | None = None
                ) -> tuple[GpuSample, ...]:
        if obj is None:
            return ()  # the field's default, as dataclasses reads it from the class
        d = obj.__dict__
        row = d.get("wire_row")
        if row is None:  # made without __init__ and without a row: no GPUs
            return ()
        gpus: tuple[GpuSample, ...] = d["static_epoch"].row_gpus(row)
        values = {"ts": d["ts"], "seq": d["seq"], "gpus": gpus}
        values.update(d)  # "host" and "disks", built or not, then the rest: an eager order
        object.__setattr__(obj, "__dict__", values)
        return gpus


def _host_disks(obj: HostSample) -> tuple[HostStats, tuple[DiskStats, ...]] | None:
    """Build a row sample's ``host`` and ``disks`` together (one reader of either reads the
    other, the whole judging and the recorder's first sample of an epoch), kept in its
    ``__dict__`` in an eager sample's key order; None: a sample with no row."""
    d = obj.__dict__
    row = d.get("wire_row")
    if row is None:
        return None
    epoch = d["static_epoch"]
    host: HostStats = epoch.row_host(row)
    disks: tuple[DiskStats, ...] = epoch.row_disks(row)
    values = {"ts": d["ts"], "seq": d["seq"], "gpus": d["gpus"], "host": host,
              "disks": disks} if "gpus" in d else \
        {"ts": d["ts"], "seq": d["seq"], "host": host, "disks": disks}
    values.update(d)
    object.__setattr__(obj, "__dict__", values)
    return host, disks


class _RowHost:
    """``HostSample.host`` of a sample the wire v2's fast path left unbuilt: its
    ``HostStats`` from ``wire_row`` and ``static_epoch`` (``StaticEpoch.row_host``), built
    with the disks on first read (issue 38: the per-tick readers, judges, history and
    recorder, read the row; a ``HostStats`` and the ``DiskStats`` made and freed each tick
    cost ~3 µs).  Set on the class after the dataclass is made, so ``__init__`` keeps its
    ``default_factory``."""

    def __get__(self, obj: HostSample | None, cls: type | None = None) -> HostStats:
        built = None if obj is None else _host_disks(obj)
        if built is None:  # as before: a factory default, no class attribute
            raise AttributeError("host")
        return built[0]


class _RowDisks:
    """``HostSample.disks`` of a sample the wire v2's fast path left unbuilt: a
    ``DiskStats`` per disk row of ``wire_row`` (``StaticEpoch.row_disks``), built with the
    host on first read."""

    def __get__(self, obj: HostSample | None, cls: type | None = None
                ) -> tuple[DiskStats, ...]:
        built = None if obj is None else _host_disks(obj)
        return () if built is None else built[1]  # () the default, as dataclasses reads it


@dataclass(frozen=True)
class HostSample:
    """Everything about one host at one tick, with one timestamp."""

    ts: float
    seq: int
    gpus: tuple[GpuSample, ...] = _RowGpus()  # type: ignore[assignment]
    """Built on first read for a sample of the wire v2's fast path (``_RowGpus``)."""
    host: HostStats = field(default_factory=HostStats)
    """Built on first read for a sample of the wire v2's fast path (``_RowHost``)."""
    disks: tuple[DiskStats, ...] = _RowDisks()  # type: ignore[assignment]
    """Built on first read as ``host`` is (``_RowDisks``)."""
    pcie: Mapping[str, tuple[PcieLink, ...]] | None = None
    """Refreshed PCIe chains, on the ticks that carry them (None on the others)."""
    static_epoch: object | None = field(default=None, init=False, compare=False, repr=False)
    """Set by the wire v2's fast path (``probes.wire.compact``): a ``StaticEpoch`` made anew
    with each ``static`` message of each stream.  Two samples with the same object (``is``)
    share every static field (GPUs, their processes' static half, the host's), so the
    recorder need not compare them (``probes.store.columns.split``) and the per-tick findings
    judge them once (``StaticEpoch.findings``).  Not compared, not stored by the codecs,
    not kept by ``dataclasses.replace`` (not an ``__init__`` argument): a sample built any
    other way has None."""
    wire_row: Struct | None = field(default=None, init=False, compare=False, repr=False)
    """Set by the same path (like ``static_epoch``): the tick's decoded row (a
    ``probes.wire.compact.SampleRow``, whose class the table builds), on samples whose
    every GPU and process list came from it unchanged.  The recorder reads the moving numbers
    from it (a few compact Structs) instead of from the sample's dicts, which are cold in
    memory by the time the writer gets to them: at a thousand hosts that is most of what
    reading a sample costs.  Nothing is computed for it: the Structs are the decoder's own.
    Such a sample's ``gpus``, ``host`` and ``disks`` are built from it on first read
    (``_RowGpus``, ``_RowHost``, ``_RowDisks``), and the history folds it from the row
    without reading its GPUs (``probes.history.staged.stage_row``)."""

    def __getstate__(self) -> dict[str, object]:
        """Pickled with its GPUs, host and disks built (a copy never depends on the
        decoder's epoch), in an eager sample's key order."""
        self.gpus, self.host, self.disks  # noqa: B018 (builds what the fast path left)
        return self.__dict__


HostSample.host = _RowHost()  # type: ignore[assignment]
"""After the dataclass is made: its ``__init__`` keeps the ``default_factory``."""


KERNEL_SOURCE = "kernel"
"""``LogEvent.source`` (and ``LogSourceState.source``) of the host's kernel log.  The agent
writes the same literal: it imports nothing of ours."""
JOB_SOURCE_PREFIX = "job:"
"""Every other source is a job log the agent follows: ``job:<path on the host>``."""


def job_source(path: str) -> str:
    """The source name of a job log at ``path`` on the host."""
    return JOB_SOURCE_PREFIX + path


def job_path(source: str) -> str | None:
    """The host path of a job-log source; None for the kernel log or anything else."""
    return source[len(JOB_SOURCE_PREFIX):] if source.startswith(JOB_SOURCE_PREFIX) else None


@dataclass(frozen=True)
class LogEvent:
    """A log line the agent saw, with where it came from (``KERNEL_SOURCE``, ``job_source``)."""

    ts: float
    source: str
    line: str
    boot: str | None = None
    """The boot the line belongs to (``_BOOT_ID`` / ``/proc/sys/kernel/random/boot_id``)."""
    cursor: str | None = None
    """The journal's ``__CURSOR`` of the entry (kernel lines read through journalctl)."""


class LogSourceStatus(str, Enum):
    """Whether the agent can read a log (``logsource`` message ``state``)."""

    OK = "ok"
    """One source works; ``via`` names it."""
    DENIED = "denied"
    """At least one source refused this user and none works; ``fix`` says what to grant."""
    UNAVAILABLE = "unavailable"
    """No source exists or every one failed (or a newer agent's state this console lacks)."""
    OFF = "off"
    """Not read: ``--kernel-log off``, or a bare run that did not ask."""
    SIMULATED = "simulated"
    """A simulated host: its kernel lines come from the simulator."""


@dataclass(frozen=True)
class LogSourceState:
    """How the agent reads a log (``kernel``), sent after the hello and on every change."""

    ts: float
    source: str
    state: LogSourceStatus
    via: str | None = None
    """``journalctl``, ``dmesg`` or ``file:<path>``; None unless ``state`` is ok."""
    detail: str = ""
    """What each refused source said, on one line (also set when ``state`` is ok)."""
    fix: str | None = None
    """What an operator could grant (group membership, sysctl): text, never applied."""
    note: str | None = None
    """A caveat about the source in use (a syslog file local users can write to)."""


@dataclass(frozen=True)
class ProbeError:
    """A probe failed or timed out on the host; the stream goes on."""

    ts: float
    probe: str
    message: str


AgentMessage = Hello | HostSample | LogEvent | LogSourceState | ProbeError | FabricSample
