"""Hardware during the run: GPUs dropping out, links narrowing, ECC and remap counters.
"""

from __future__ import annotations

from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import STATE_CODES, HostHistory, StepSeries, gpu_key
from probes.triage import Code, Severity, Step
from probes.wire.samples import GpuState, Hello, HostSample


def detect_gpu_dropout(host: str, history: HostHistory, hello: Hello | None,
                       sample: HostSample | None = None,
                       limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A GPU gone from the samples (vs the hello or earlier samples), lost or hung."""
    sample = sample or history.last_sample
    if sample is None:
        return []
    expected = set(history.gpu_indices())
    bus_of: dict[int, str | None] = {}
    if hello is not None:
        for info in hello.facts.gpus:
            expected.add(info.index)
            bus_of[info.index] = info.bus_id
    by_bus = {b.lower(): i for i, b in bus_of.items() if b}
    present = {g.index for g in sample.gpus if g.index >= 0}
    missing_since = history.gpus_missing_since()
    answering = sum(1 for g in sample.gpus if g.state is GpuState.OK)
    n_expected = max(len(expected), len(present))
    out = []
    reported: set[int] = set()
    action = ("Drain the node; check the kernel log for Xid 79/fallen off the bus, 48/94/95 "
              "and AER errors; reset the GPU (nvidia-smi -r) or reboot, and reseat/RMA it if "
              "it drops out again")
    for g in sample.gpus:
        if g.state not in (GpuState.LOST, GpuState.UNRESPONSIVE):
            continue
        idx = g.index if g.index >= 0 else by_bus.get((g.bus_id or "").lower())
        if idx is not None:
            reported.add(idx)
        st = history.steps(gpu_key(idx, "state")) if idx is not None else None
        since = st.latest() if st is not None else None
        name = f"GPU{idx}" if idx is not None else f"GPU {g.bus_id or '?'}"
        out.append(Finding(
            Step.GPU, Code.GPU_DROPOUT, Severity.CRITICAL,
            f"{name} is {g.state.value}: {answering} of {n_expected} GPUs answer",
            host, gpu=idx, ts=since.t if since is not None and
            since.mean == STATE_CODES[g.state] else sample.ts, action=action,
            extra={"state": g.state.value, "answering": answering, "expected": n_expected}))
    for idx in sorted(expected - present - reported):
        ts = missing_since.get(idx, history.first_ts)
        bus = bus_of.get(idx)
        out.append(Finding(
            Step.GPU, Code.GPU_DROPOUT, Severity.CRITICAL,
            f"GPU{idx}{f' ({bus})' if bus else ''} dropped out of the samples: "
            f"{answering} of {n_expected} GPUs answer", host, gpu=idx, ts=ts, action=action,
            extra={"answering": answering, "expected": n_expected}))
    return out


def detect_link_downgrade_appeared(host: str, history: HostHistory, hello: Hello | None,
                                   sample: HostSample | None = None,
                                   limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """A PCIe link that trained narrower during the run than it was earlier in the run.

    Width only: links drop speed (generation) when idle, but lanes lost stay lost.  A link
    that has been narrow since boot is the layout check's finding, not this one.
    """
    out = []
    for idx in history.gpu_indices():
        st = history.steps(gpu_key(idx, "pcie_width"))
        now = st.latest() if st is not None else None
        if st is None or now is None or st.peak is None or now.mean >= st.peak:
            continue
        out.append(Finding(
            Step.GPU, Code.LINK_DOWNGRADE_APPEARED, Severity.WARNING,
            f"GPU{idx} PCIe link fell from x{st.peak:.0f} to x{now.mean:.0f} during the run",
            host, gpu=idx, ts=now.t,
            action=(f"Watch GPU{idx} for AER/Xid errors in the kernel log; reseat the GPU or "
                    "riser at the next maintenance window (lspci -vv shows LnkSta)"),
            extra={"width": int(now.mean), "earlier_width": int(st.peak)}))
    return out


def detect_counters_increasing(host: str, history: HostHistory, hello: Hello | None,
                               sample: HostSample | None = None,
                               limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """ECC error and row-remap counters that grew during the run (resets not counted)."""
    out = []
    for idx in history.gpu_indices():
        unc = history.steps(gpu_key(idx, "ecc_uncorrected_volatile"))
        cor = history.steps(gpu_key(idx, "ecc_corrected_volatile"))
        if unc is not None and unc.increase_total > 0:
            out.append(Finding(
                Step.GPU, Code.ECC_INCREASING, Severity.CRITICAL,
                f"GPU{idx}: uncorrectable ECC errors grew by {unc.increase_total:.0f} during "
                f"the run (now {_latest_value(unc):.0f})", host, gpu=idx,
                ts=unc.first_increase_ts,
                action=(f"Drain the node: jobs on GPU{idx} may have read corrupt memory; "
                        "reset the GPU to retire/remap the rows, run a memory test, RMA it if "
                        "errors come back"),
                extra={"increase": unc.increase_total, "kind": "uncorrectable"}))
        elif cor is not None and cor.increase_total >= limits.ecc_corrected_min_increase:
            out.append(Finding(
                Step.GPU, Code.ECC_INCREASING, Severity.WARNING,
                f"GPU{idx}: corrected ECC errors grew by {cor.increase_total:,.0f} during the "
                f"run (now {_latest_value(cor):,.0f})", host, gpu=idx,
                ts=cor.first_increase_ts,
                action=(f"Watch GPU{idx}'s memory: a climbing corrected count often precedes "
                        "uncorrectable errors; schedule a reset and a memory test"),
                extra={"increase": cor.increase_total, "kind": "corrected"}))
        grew = []
        first: float | None = None
        for field in ("remap_uncorrectable", "remap_correctable"):
            st = history.steps(gpu_key(idx, field))
            if st is not None and st.increase_total > 0:
                grew.append(f"{st.increase_total:.0f} {field.split('_')[1]}")
                if st.first_increase_ts is not None and (first is None
                                                         or st.first_increase_ts < first):
                    first = st.first_increase_ts
        if grew:
            out.append(Finding(
                Step.GPU, Code.REMAP_INCREASING, Severity.WARNING,
                f"GPU{idx}: rows remapped during the run ({', '.join(grew)})", host, gpu=idx,
                ts=first,
                action=(f"Reset GPU{idx} when the job allows so pending remaps apply; RMA it if "
                        "remapping keeps growing or a remap fails"),
                extra={"remapped": grew}))
    return out


def _latest_value(st: StepSeries) -> float:
    p = st.latest()
    return p.mean if p is not None else 0.0


