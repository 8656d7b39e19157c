"""The triage vocabulary every rule shares: the four steps, how urgent a finding is, its code.

Kept apart from the rules themselves so parsers, log rules and the live findings can all
import it without importing each other.
"""

from __future__ import annotations

from enum import Enum


class Step(str, Enum):
    """The fixed triage order: GPU state, then system log, then NCCL, then model code."""

    GPU = "gpu"
    SYSLOG = "syslog"
    NCCL = "nccl"
    MODEL = "model"


class Severity(str, Enum):
    """How urgent a finding is."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is worse; for sorting and "worst finding" columns."""
        return {"critical": 3, "warning": 2, "info": 1}[self.value]


class Code(str, Enum):
    """Every finding code rigwatch produces: live findings, detectors and ``rigwatch explain``.

    The values are the wire strings of JSON, recordings, alerts and the explain contract
    (``shared/EXPLAIN-CONTRACT.md``); a member compares and hashes equal to its string, so
    a finding read back from an old recording matches ``Code.GPU_LOST`` as it always did.
    ``str()`` and f-strings give the bare value on every Python the console supports.
    """

    # gpu: devices, clocks, links, memory health, disks, layout
    GPU_LOST = "gpu-lost"
    GPU_SENSOR_UNREADABLE = "gpu-sensor-unreadable"
    GPU_UNRESPONSIVE = "gpu-unresponsive"
    GPU_DROPOUT = "gpu-dropout"
    CLOCKS_THROTTLED = "clocks-throttled"
    THROTTLED_WHILE_BUSY = "throttled-while-busy"
    TEMP_NEAR_SLOWDOWN = "temp-near-slowdown"
    POWER_PINNED = "power-pinned"
    PCIE_LINK_DOWNGRADED = "pcie-link-downgraded"
    LINK_DOWNGRADE_APPEARED = "link-downgrade-appeared"
    NVLINK_DOWN = "nvlink-down"
    NVLINK_SLOW = "nvlink-slow"
    NVLINK_ERRORS = "nvlink-errors"
    IB_PORT_DOWN = "ib-port-down"
    IB_LINK_DEGRADED = "ib-link-degraded"
    IB_ERRORS_RISING = "ib-errors-rising"
    """Error counters of an IB/RoCE port rose within the window; a ``link_downed`` step is a
    flap."""
    SWITCH_SUSPECT = "switch-suspect"
    """Several hosts of one leaf switch lost ports or count errors together: the switch (or
    its uplinks) first, not N hosts."""
    RACK_SUSPECT = "rack-suspect"
    """Several hosts of one rack throttle or run hot together: the rack's power or cooling."""
    DCGM_DIAG_FAIL = "dcgm-diag-fail"
    DCGM_DIAG_INCOMPLETE = "dcgm-diag-incomplete"
    FABRIC_MANAGER_ERROR = "fabric-manager-error"
    ECC_UNCORRECTABLE = "ecc-uncorrectable"
    ECC_INCREASING = "ecc-increasing"
    ROW_REMAP_FAILURE = "row-remap-failure"
    ROW_REMAP_PENDING = "row-remap-pending"
    REMAP_INCREASING = "remap-increasing"
    RETIRED_PAGES_PENDING = "retired-pages-pending"
    MEMORY_LEAK = "memory-leak"
    DISK_SATURATED = "disk-saturated"
    DATA_STARVATION = "data-starvation"
    HOST_SWAPPING = "host-swapping"
    SWAP_ACTIVITY = "swap-activity"
    TOPOLOGY_CROSS_NUMA = "topology-cross-numa"
    GPU_COUNT_SHORT = "gpu-count-short"
    # gpu, live only: allocation against use (a job's idle GPUs, a process outside any job)
    GPU_ALLOCATED_IDLE = "gpu-allocated-idle"
    GPU_STRAY_PROCESS = "gpu-stray-process"
    # gpu, live only (never in ``explain``): the host itself cannot be watched
    HOST_UNREACHABLE = "host-unreachable"
    HOST_AUTH_FAILED = "host-auth-failed"
    HOST_KEY_CHANGED = "host-key-changed"
    HOST_KEY_REFUSED = "host-key-refused"
    AGENT_FAILED = "agent-failed"
    HOST_DOWN = "host-down"
    HOST_STALE = "host-stale"
    FLEET_DOWN = "fleet-down"
    HOST_FLAPPING = "flapping"
    """A host that went down and came back several times in a few minutes: one finding
    with the count, in place of a page per outage."""
    # gpu, live only: the watcher's own faults (``probes.errors.WatcherFault``), one finding
    # per source ("collector 2", "prometheus"), never one per host it covers
    COLLECTOR_STALLED = "collector-stalled"
    COLLECTOR_DIED = "collector-died"
    SOURCE_DOWN = "source-down"
    SOURCE_SLOW = "source-slow"
    RECOVERED = "recovered"
    """Not a condition: the mark an outage's recovery leaves in alerts and recordings."""
    METRIC_NOT_COLLECTED = "metric-not-collected"
    CLOCK_SKEW = "clock-skew"
    """A host's clock is off the console's by more than the limit (its times are corrected)."""
    COLLECTIVE_HANG = "collective-hang"
    """Every GPU of a job busy at a fraction of its usual power: NCCL kernels spinning in a
    collective that never completes."""
    """Read from Prometheus: the exporters leave out a metric a check needs."""
    # syslog: kernel and system log
    XID = "xid"
    GPU_FALLEN_OFF_BUS = "gpu-fallen-off-bus"
    PCIE_AER = "pcie-aer"
    OOM_KILLER = "oom-killer"
    GSP_TIMEOUT = "gsp-timeout"
    CPU_THERMAL = "cpu-thermal"
    NVRM_API_MISMATCH = "nvrm-api-mismatch"
    RM_INIT_ADAPTER_FAILED = "rm-init-adapter-failed"
    KERNEL_LOG_UNREADABLE = "kernel-log-unreadable"
    # nccl: collective communication
    JOB_LOG_REFUSED = "job-log-refused"
    """A file a job named that the agent will not follow (a link, a FIFO, another user's)."""
    NCCL_TIMEOUT = "nccl-timeout"
    NCCL_NET_ERROR = "nccl-net-error"
    NCCL_ERROR = "nccl-error"
    RANK_FAILED = "rank-failed"
    NCCL_TESTS_WRONG = "nccl-tests-wrong"
    NCCL_BANDWIDTH_LOW = "nccl-bandwidth-low"
    # model: the training program
    CUDA_OOM = "cuda-oom"
    ILLEGAL_MEMORY_ACCESS = "illegal-memory-access"
    DEVICE_SIDE_ASSERT = "device-side-assert"
    LOSS_NAN = "loss-nan"
    LOSS_SCALE_OVERFLOW = "loss-scale-overflow"
    THROUGHPUT_DROP = "throughput-drop"
    """Placed under the step of its likely cause (throttling → gpu …), else here."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class OnsetClock(str, Enum):
    """Which clock a finding's onset was read from, so a timeline says how far to trust it."""

    LINE = "line"
    """The log line's own timestamp (syslog, ISO 8601, torch/glog, journald), on the host's
    clock corrected for its skew."""
    KERNEL = "kernel"
    """The kernel's time for the line (dmesg's monotonic stamp through the host's boot time,
    or the journal's), as the agent read it."""
    ORDER = "order"
    """No time of its own: placed after the line above it in the same file."""
    READ = "read"
    """No time of its own and nothing above it: when the agent read the line."""
    SAMPLE = "sample"
    """The first sample that showed it (the host's clock, corrected)."""
    CONSOLE = "console"
    """The console's own clock (a connection that failed, a source that stopped)."""


DISK_SATURATED_UTIL = 90.0
"""%util at which a disk counts as saturated (``disk-saturated``), live and in ``explain``."""
