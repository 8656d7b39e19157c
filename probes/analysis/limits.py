"""Every limit the operator can set: the detectors', preflight's and the ladder's thresholds.

The sections of ``settings.yaml`` (``detectors:``, ``preflight:``, ``ladder:``) fill these
dataclasses;
the judgements in ``probes.analysis.judge``, the detectors and preflight all read them, so a
changed limit changes every screen at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from probes.triage import DISK_SATURATED_UTIL


@dataclass(frozen=True)
class DetectorLimits:
    """Every threshold the detectors use."""

    min_coverage: float = 0.8
    """Share of a detector's window that must hold data before it judges "sustained"."""

    leak_window_s: float = 3600.0
    """Window over which GPU (and process) memory growth is fitted."""
    leak_min_data_s: float = 1800.0
    """No leak verdict before this much of the window has data."""
    leak_min_mib_h: float = 256.0
    """Growth below this (MiB/h) is not reported."""
    leak_max_hours_to_full: float = 72.0
    """Only growth that would fill the GPU within this many hours is reported."""
    leak_critical_hours: float = 6.0
    """A leak that fills the GPU sooner than this is critical."""
    leak_half_share: float = 0.5
    """Each half of the window must grow at least this share of ``leak_min_mib_h``, so one
    step (an allocator reserving a block, then flat) is not a leak."""
    leak_bins: int = 40
    """Bins the window is merged into; the fit is Theil–Sen over their lower envelope."""
    leak_process_share: float = 0.5
    """A process growing at least this share of its GPU's rate is named as the cause."""

    power_cap_busy_util_pct: float = 50.0
    """The power cap counts as throttling in a single sample only from this utilisation:
    an idle GPU parked at its cap is not slowed down."""

    throttle_window_s: float = 300.0
    """Window for throttled-while-busy."""
    throttle_busy_util_pct: float = 80.0
    """Utilisation at which a GPU counts as busy; idle GPUs with low clocks are fine."""
    throttle_clock_share: float = 0.85
    """SM clock below this share of its maximum counts as throttled (when busy)."""
    throttle_min_share: float = 0.6
    """Share of the window a busy GPU must be throttled to report it."""

    temp_margin_c: float = 5.0
    """Temperature within this many °C of the GPU's slowdown threshold reads hot (and, held
    for ``temp_min_share`` of ``temp_window_s``, is a finding)."""
    temp_warm_margin_c: float = 15.0
    """Temperature within this many °C of the slowdown threshold reads warm."""
    temp_hot_c: float = 85.0
    """Hot from this temperature on a board that reports no slowdown threshold (and for
    memory temperatures, which have none in the hello)."""
    temp_warm_c: float = 75.0
    """Warm from this temperature when there is no slowdown threshold."""
    temp_window_s: float = 300.0
    temp_min_share: float = 0.8
    """Share of the window the GPU must be near its slowdown threshold."""

    power_pinned_share: float = 0.98
    """Power draw at or above this share of the enforced limit counts as pinned."""
    power_near_share: float = 0.95
    """Power draw at or above this share of the enforced limit reads near the limit (the
    thermal panel highlights it); pinned there for a while is ``power_pinned_share``'s."""
    mem_high_pct: float = 95.0
    """GPU memory (and host RAM) used at or above this share reads high."""
    disk_saturated_util_pct: float = DISK_SATURATED_UTIL
    """Disk %util at or above this reads saturated (``disk-saturated``); ``explain`` keeps
    ``probes.triage.DISK_SATURATED_UTIL``, since pasted output comes with no settings."""
    power_window_s: float = 600.0
    power_min_share: float = 0.8
    """Share of the window the GPU must be pinned at its limit."""

    ecc_corrected_min_increase: int = 100
    """Corrected (volatile) ECC errors gained during the run before it is worth a warning;
    uncorrectable ones count from the first."""

    starve_window_s: float = 600.0
    """Window for the data-starvation saw-tooth."""
    starve_idle_util_pct: float = 10.0
    """Utilisation below which a sample counts as an idle gap."""
    starve_busy_util_pct: float = 50.0
    """Utilisation from which a sample counts as a busy stretch."""
    starve_min_idle_share: float = 0.3
    """Share of the window a GPU must sit in idle gaps."""
    starve_min_busy_share: float = 0.2
    """…and in busy stretches (a GPU that is idle throughout is not starving, just idle)."""
    starve_min_gaps: int = 3
    """Idle gaps (busy-to-idle transitions) the window must hold to count as a saw-tooth."""
    starve_min_gpu_share: float = 0.5
    """Share of the host's GPUs that must show the saw-tooth."""
    starve_disk_util_pct: float = 80.0
    """Disk %util (window mean) that makes the disk a suspect."""
    starve_disk_await_ms: float = 50.0
    """Disk await (window mean, the worse of read and write) that makes the disk a suspect."""
    starve_cpu_pct: float = 90.0
    """Host CPU (window mean) that points at a CPU-bound input pipeline."""

    swap_pages_s: float = 32.0
    """Swap-in or swap-out rate (pages/s) that counts as swapping."""
    swap_window_s: float = 60.0
    swap_min_share: float = 0.8
    """Share of the window the host must be swapping."""

    alloc_idle_s: float = 1800.0
    """How long a job's GPUs may sit at ~0 % before ``gpu-allocated-idle`` (from when the
    job was first seen on them)."""
    alloc_idle_util_pct: float = 1.0
    """The busiest 15 s of that window at or below this counts as idle."""
    stray_min_mib: float = 256.0
    """GPU memory a process outside any job must hold to be reported on a Slurm node."""

    throughput_drop_share: float = 0.2
    """A job's training throughput this far below the run's own median is a drop."""
    throughput_drop_s: float = 300.0
    """…held this long (every reading since the drop began below it) is ``throughput-drop``."""
    throughput_cause_s: float = 600.0
    """A finding on the same host that began up to this long before the drop (or during it)
    is what changed at the same time, and names the drop's likely cause."""

    clock_skew_s: float = 30.0
    """A host whose clock is further than this off the console's gets ``clock-skew`` (its
    times are corrected either way)."""

    hang_util_pct: float = 95.0
    """Utilisation from which a GPU counts as busy for ``collective-hang``."""
    hang_power_share: float = 0.5
    """…while drawing at most this share of its usual busy power (its busy power over the
    hour before, never taken under 60 % of its limit): NCCL kernels spinning."""
    hang_window_s: float = 300.0
    """How long every GPU of a job must read busy at that power."""

    ib_errors_window_s: float = 600.0
    """Window over which an IB/RoCE port's error counters are summed (``ib-errors-rising``)."""
    ib_errors_min: int = 10
    """Errors a port must count in the window; a ``link_downed`` step (a flap) counts from 1."""
    fabric_group_min_hosts: int = 3
    """Hosts of one leaf switch (or rack) with fabric (or thermal) findings that make one
    ``switch-suspect`` (``rack-suspect``) instead of a finding per host."""
    fabric_group_window_s: float = 600.0
    """…whose findings began within this long of each other."""


DEFAULT_LIMITS = DetectorLimits()


@dataclass(frozen=True)
class PreflightLimits:
    """Thresholds, each settable under ``preflight:`` in the settings YAML."""

    mem_ratio_warn: float = 2.0
    """System memory per GPU memory below which a host warns (page cache, pinned buffers)."""
    mem_ratio_fail: float = 1.5
    cores_per_gpu_min: float = 8.0
    """Physical cores per GPU: data loaders and the launcher need them."""
    cores_per_gpu_max: float = 16.0
    swap_used_warn_bytes: int = 256 * 1024**2
    """Swap in use above this is a warning: a training host that swaps stalls its GPUs."""
    require_swap: bool = True
    dataset_free_warn_pct: float = 10.0
    dataset_free_fail_pct: float = 2.0
    power_pinned_pct: float = 98.0
    """Draw at or above this share of the limit under load: the GPU is power-capped."""
    ethernet_min_mbps: int = 25_000
    """The fastest Ethernet link that is up, when there is no InfiniBand."""
    require_ib: bool = True
    """Multi-node training needs InfiniBand or RoCE; set false for single-node fleets."""
    ib_rate_gbs: float | None = None
    """The rate every compute IB/RoCE port must run at (400 for NDR); None: its siblings'."""
    expect_gpu_model: str | None = None
    """A substring every GPU name must contain (``H100``); None: all equal is enough."""
    mig_expected: bool = False
    consistent: tuple[str, ...] = ("driver", "cuda", "kernel", "os", "nccl", "torch")
    """Versions that must agree across the fleet."""
    must_agree: tuple[str, ...] = ("driver", "cuda")
    """Of ``consistent``, those whose odd one out fails rather than warns."""


DEFAULT_PREFLIGHT = PreflightLimits()


@dataclass(frozen=True)
class LadderLimits:
    """``rigwatch ladder``'s thresholds, settable under ``ladder:`` in the settings YAML."""

    good_efficiency: float = 0.9
    """Scaling efficiency (per-GPU throughput over the smallest run's) from which a step
    scales well; below it the verdict looks for a cause."""


DEFAULT_LADDER = LadderLimits()


@dataclass(frozen=True)
class Limits:
    """Both sets of limits, as the console hands them to its judgements and view builders."""

    detectors: DetectorLimits = field(default_factory=DetectorLimits)
    preflight: PreflightLimits = field(default_factory=PreflightLimits)
