"""Findings: what rigwatch tells the operator, tagged with the triage step it belongs to.

Instant checks on one sample, the host's layout (topology, PCIe chains), and the log rules'
hits turned into the console's findings.  Codes and steps follow
``shared/EXPLAIN-CONTRACT.md`` and are the ones ``rigwatch explain`` reports; detectors over
history (leaks, starvation) build on this.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from probes.analysis import actions as acts
from probes.analysis.finding_extra import FindingExtra
from probes.analysis.judge import (
    NO_PEERS,
    POWER_CAP,
    disk_saturated,
    gpu_link_shortfall,
    is_busy,
    link_caps,
    link_short,
    peer_link,
    slowing_reasons,
    swapping,
)
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.analysis.static_verdicts import GpuStatic, StaticVerdicts, dated, loaded_of
from probes.analysis.tick_gpus import MovingGpu, tick_gpus
from probes.rules.busid import normalize_bus_id
from probes.rules.parsers import topo
from probes.rules.parsers.pcie import link_shortfall
from probes.triage import Code, OnsetClock, Severity, Step
from probes.wire.compact import StaticEpoch
from probes.wire.samples import GpuSample, GpuState, Hello, HostSample, PcieLink

if TYPE_CHECKING:
    from probes.rules.logrules.live import LiveHit


@dataclass(frozen=True)
class Finding:
    """One thing wrong (or worth knowing) on one host."""

    step: Step
    code: Code
    severity: Severity
    summary: str
    host: str
    gpu: int | None = None
    xid: int | None = None
    evidence: str | None = None
    ts: float | None = None
    """Agent time the finding was first seen (the log line's, or the first sample showing it)."""
    action: str | None = None
    """What the operator should do next, from the rule or the Xid catalog."""
    source: str | None = None
    """Where the evidence came from: ``kernel``, ``job:<path>``; None for samples."""
    count: int = 1
    extra: Mapping[str, object] = field(default_factory=dict, compare=False, hash=False)
    """Details a rule parsed (ranks, timeouts, amounts), for the triage screen and reports."""
    context: tuple[str, ...] = field(default=(), compare=False)
    """Log lines just before the evidence line, as the operator would see them in the log."""
    clock: OnsetClock | None = field(default=None, compare=False)
    """Which clock ``ts`` was read from (the line's own stamp, the kernel's, line order …);
    None where it was never said (older recordings: the agent's time)."""
    line: int | None = field(default=None, compare=False)
    """The evidence line's number in its source (a job log, the kernel log), counted from
    the first line the console read: within one source, line order is time order."""

    @property
    def timeout_ms(self) -> float | None:
        """``extra["timeout_ms"]``: a watchdog's configured timeout (``nccl-timeout``)."""
        return _number(self.extra, "timeout_ms")

    @property
    def ran_ms(self) -> float | None:
        """``extra["ran_ms"]``: how long the timed-out collective had run."""
        return _number(self.extra, "ran_ms")

    @property
    def slope_mib_h(self) -> float | None:
        """``extra["slope_mib_h"]``: a leak's growth rate (``memory-leak``)."""
        return _number(self.extra, "slope_mib_h")

    @property
    def hours_to_full(self) -> float | None:
        """``extra["hours_to_full"]``: when a leak would fill the GPU."""
        return _number(self.extra, "hours_to_full")

    @property
    def details(self) -> FindingExtra:
        """``extra`` read through typed accessors (``finding_extra``)."""
        return FindingExtra(self.extra)

    @property
    def key(self) -> tuple[str, str, int | None, int | None]:
        """Identity for de-duplication: one incident on many lines is one finding."""
        # ``_value_``: ``value`` itself without the enum's descriptor (a sixth of the cost;
        # every fold asks for the key of every finding it keeps)
        return (self.step._value_, self.code, self.gpu, self.xid)


def _default_action(code: str) -> str | None:
    """The code's own action, for a finding whose rule gave none (``actions``)."""
    return acts.default_actions().get(code)


def _number(extra: Mapping[str, object], key: str) -> float | None:
    """A number a rule put in ``extra``; None when absent or not a number (JSON unchanged)."""
    v = extra.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def sample_findings(host: str, hello: Hello | None, sample: HostSample,
                    limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """Instant findings from one sample (and the GPU list the hello promised).

    A wire v2 sample's static facts (``static_epoch``: a GPU lost or hung, ECC, remapping,
    NVLinks, the PCIe link, the hello's GPUs it lacks) are judged once per epoch and kept
    on it; each tick judges only its moving numbers (clocks, load, disks), read from the
    tick's decoded row where the sample has one (``tick_gpus``: never ``sample.gpus``).
    The findings are ``judge_whole_sample``'s, in its order (``test_sample_findings_cache``,
    ``test_judges_read_the_row``).

    Args:
        host: the host's name in the fleet.
        hello: the agent's hello, for the GPUs that should be there; None if not seen yet.
        sample: the newest sample.
        limits: the operator's thresholds (when the power cap counts as throttling).

    Returns:
        Findings, worst first.
    """
    epoch = sample.static_epoch
    if not isinstance(epoch, StaticEpoch):
        return judge_whole_sample(host, hello, sample, limits)
    moving, fixed, _ = tick_gpus(sample)  # the decoded row where the sample has it
    static = epoch.findings
    if not (isinstance(static, StaticVerdicts) and static.fits(host, hello, len(fixed), limits)):
        static = epoch.findings = _static_verdicts(host, hello, fixed, sample.ts, limits)
    return _judge_moving(host, sample, limits, static, moving, fixed)


def judge_whole_sample(host: str, hello: Hello | None, sample: HostSample,
                       limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """``sample_findings`` judging every field of the sample (a sample without an epoch:
    wire v1, the checked path, a replay)."""
    out = _missing(host, hello, sample.gpus, sample.ts)
    peers = peer_link(g for g in sample.gpus if g.index >= 0)
    for gpu in sample.gpus:
        out.extend(_gpu_findings(host, gpu, sample.ts, limits, peers))
    _disk_findings(host, sample, limits, out)
    out.sort(key=lambda f: -f.severity.rank)
    return out


def _missing(host: str, hello: Hello | None, gpus: Sequence[GpuSample], ts: float
             ) -> list[Finding]:
    """The hello's GPUs that a sample of these GPUs lacks."""
    out: list[Finding] = []
    if hello is None:
        return out
    seen = {g.index for g in gpus}
    for info in hello.facts.gpus:
        if info.index not in seen:
            # named as last seen: what the person at the rack and the RMA form ask for
            named = {k: v for k, v in (("bus_id", info.bus_id), ("serial", info.serial),
                                       ("uuid", info.uuid)) if v}
            out.append(Finding(Step.GPU, Code.GPU_LOST, Severity.CRITICAL,
                               f"GPU {info.index} ({info.bus_id or '?'}) is missing from "
                               "the samples", host, gpu=info.index, ts=ts,
                               action=acts.ACTION_GPU_LOST, extra=named))
    return out


def _disk_findings(host: str, sample: HostSample, limits: DetectorLimits,
                   out: list[Finding]) -> None:
    for disk in sample.disks:
        if disk_saturated(disk.util, limits):
            out.append(Finding(Step.GPU, Code.DISK_SATURATED, Severity.WARNING,
                               f"{disk.name} {disk.util:.0f}% busy, queue {disk.aqu_sz or 0:.1f}",
                               host, ts=sample.ts, action=acts.ACTION_DISK))


def _static_verdicts(host: str, hello: Hello | None, fixed: Sequence[GpuSample], ts: float,
                     limits: DetectorLimits) -> StaticVerdicts:
    """What the GPUs' static fields say (``fixed``: a sample's GPUs or its epoch's static
    halves, the same static fields), dated ``ts``."""
    peers = peer_link(g for g in fixed if g.index >= 0)
    gpus: list[GpuStatic | None] = []
    for gpu in fixed:
        alone = _state_findings(host, gpu, ts)
        short = None if alone else link_short(gpu, peers)
        after = () if alone else tuple(_static_findings(host, gpu, ts))
        gpus.append(GpuStatic(tuple(alone), short, None if short is None else
                               _link_finding(host, gpu, ts, short, peers), after)
                    if alone or short is not None or after else None)
    verdicts = tuple(gpus)
    return StaticVerdicts(host, hello, limits, tuple(_missing(host, hello, fixed, ts)),
                          verdicts, loaded_of(verdicts))


def _judge_moving(host: str, sample: HostSample, limits: DetectorLimits,
                  static: StaticVerdicts, moving: Sequence[MovingGpu],
                  fixed: Sequence[GpuSample]) -> list[Finding]:
    """The per-tick half: ``judge_whole_sample``'s order, the static verdicts re-dated, the
    moving numbers read from ``moving`` (the tick's row where the sample has one)."""
    ts = sample.ts
    out = dated(static.missing, ts) if static.missing else []
    for now, gpu, known in zip(moving, fixed, static.gpus, strict=True):
        if known is not None and known.alone:
            out += dated(known.alone, ts)
            continue
        if now.clock_reasons:
            throttled = _throttled(host, gpu, now, ts, limits)
            if throttled is not None:
                out.append(throttled)
        if known is None:
            continue
        short = known.short
        if known.link is not None and (short is not Severity.INFO
                                       or is_busy(now.util_pct, limits)):
            out += dated((known.link,), ts)
        if known.after:
            out += dated(known.after, ts)
    _disk_findings(host, sample, limits, out)
    out.sort(key=lambda f: -f.severity.rank)
    return out


def _gpu_findings(host: str, gpu: GpuSample, ts: float, limits: DetectorLimits,
                  peers: tuple[int | None, int | None] = NO_PEERS) -> list[Finding]:
    out = _state_findings(host, gpu, ts)
    if out:
        return out
    # Every check below is skipped at the cost of one comparison when its inputs are
    # healthy: this runs for every GPU of every host every second.
    if gpu.clock_reasons:
        throttled = _throttled(host, gpu, gpu, ts, limits)
        if throttled is not None:
            out.append(throttled)
    link = gpu_link_shortfall(gpu, limits, peers)
    if link is not None:
        out.append(_link_finding(host, gpu, ts, link, peers))
    out.extend(_static_findings(host, gpu, ts))
    return out


def _state_findings(host: str, gpu: GpuSample, ts: float) -> list[Finding]:
    """A lost or hung GPU: its only finding."""
    if gpu.state is GpuState.LOST:
        name = str(gpu.index) if gpu.index >= 0 else (gpu.bus_id or "?")
        return [Finding(Step.GPU, Code.GPU_LOST, Severity.CRITICAL,
                        f"GPU {name} is lost", host, gpu=gpu.index, ts=ts,
                        action=acts.ACTION_GPU_LOST)]
    if gpu.state is GpuState.UNRESPONSIVE:
        return [Finding(Step.GPU, Code.GPU_UNRESPONSIVE, Severity.WARNING,
                        f"GPU {gpu.index}: probe call hung", host, gpu=gpu.index, ts=ts,
                        action=acts.ACTION_UNRESPONSIVE)]
    return []


def _throttled(host: str, gpu: GpuSample, now: MovingGpu, ts: float,
               limits: DetectorLimits) -> Finding | None:
    """Clocks held down while it matters: ``now``'s reasons, load and clock against ``gpu``'s
    index and maximum clock (one GPU sample as both, or a row's GPU and its static half)."""
    active = slowing_reasons(now.clock_reasons, now.util_pct, limits)
    if not active:
        return None
    clocks = ""
    sm_clock = now.sm_clock_mhz
    if sm_clock is not None and gpu.sm_clock_max_mhz:
        clocks = f" at {sm_clock:.0f}/{gpu.sm_clock_max_mhz:.0f} MHz"
    # ``Finding(...)`` as its ``__init__`` sets it, field by field in order, without the
    # frozen class's ``__setattr__`` per field (issue 38: a throttling GPU's finding is
    # built every tick, its clock printed; half of this function's cost)
    f = _new(Finding)
    _set(f, "__dict__", {
        "step": Step.GPU, "code": Code.CLOCKS_THROTTLED, "severity": Severity.WARNING,
        "summary": f"GPU {gpu.index} throttled: {', '.join(sorted(active))}{clocks}",
        "host": host, "gpu": gpu.index, "xid": None, "evidence": None, "ts": ts,
        "action": acts.ACTION_POWER_CAPPED if set(active) == {POWER_CAP}
        else acts.ACTION_THROTTLED, "source": None, "count": 1, "extra": {}, "context": (),
        "clock": None, "line": None})
    return f


_new = object.__new__
_set = object.__setattr__


def _static_findings(host: str, gpu: GpuSample, ts: float) -> list[Finding]:
    """Memory health and NVLinks: static fields only."""
    out: list[Finding] = []
    if (gpu.ecc_uncorrected_volatile or gpu.ecc_uncorrected_aggregate or gpu.remap_failure
            or gpu.remap_pending or gpu.retired_pages_pending):
        out.extend(_memory_health(host, gpu, ts))
    if gpu.nvlink_links and gpu.nvlink_up is not None and gpu.nvlink_up < gpu.nvlink_links:
        # a link down beside live ones is critical (the contract); the fabric message, when
        # the agent sends one, judges each link and its peers (``probes.analysis.fabric``)
        out.append(Finding(Step.GPU, Code.NVLINK_DOWN,
                           Severity.CRITICAL if gpu.nvlink_up else Severity.WARNING,
                           f"GPU {gpu.index}: {gpu.nvlink_links - gpu.nvlink_up} of "
                           f"{gpu.nvlink_links} NVLinks down", host, gpu=gpu.index, ts=ts,
                           action=acts.ACTION_NVLINK))
    return out


def _link_finding(host: str, gpu: GpuSample, ts: float, link: Severity,
                  peers: tuple[int | None, int | None]) -> Finding:
    """Lanes lost (warning) or a lower generation under load (info), against the GPU's own
    maximum, else (not collected) against its siblings' best link."""
    gen_cap, width_cap = link_caps(gpu, peers)
    if link is Severity.WARNING:
        held = "capable" if gpu.pcie_width_max is not None else "its siblings"
        return Finding(Step.GPU, Code.PCIE_LINK_DOWNGRADED, Severity.WARNING,
                       f"GPU {gpu.index} PCIe x{gpu.pcie_width} ({held} x{width_cap})",
                       host, gpu=gpu.index, ts=ts, action=acts.ACTION_LINK_WIDTH)
    held = "capable" if gpu.pcie_gen_max is not None else "its siblings"
    return Finding(Step.GPU, Code.PCIE_LINK_DOWNGRADED, Severity.INFO,
                   f"GPU {gpu.index} PCIe Gen{gpu.pcie_gen} under load ({held} "
                   f"Gen{gen_cap})", host, gpu=gpu.index, ts=ts, action=acts.ACTION_LINK_GEN)


def _memory_health(host: str, gpu: GpuSample, ts: float) -> list[Finding]:
    """ECC, row remapping and page retirement: the card's memory is failing or needs a reset."""
    out = []
    if gpu.ecc_uncorrected_volatile:
        out.append(Finding(Step.GPU, Code.ECC_UNCORRECTABLE, Severity.CRITICAL,
                           f"GPU {gpu.index}: {gpu.ecc_uncorrected_volatile} uncorrectable ECC "
                           "errors since the driver loaded", host, gpu=gpu.index, ts=ts,
                           action=acts.ACTION_ECC))
    elif gpu.ecc_uncorrected_aggregate:
        out.append(Finding(Step.GPU, Code.ECC_UNCORRECTABLE, Severity.INFO,
                           f"GPU {gpu.index}: {gpu.ecc_uncorrected_aggregate} uncorrectable ECC "
                           "errors in its lifetime (none since the driver loaded)",
                           host, gpu=gpu.index, ts=ts, action=acts.ACTION_ECC))
    if gpu.remap_failure:
        out.append(Finding(Step.GPU, Code.ROW_REMAP_FAILURE, Severity.CRITICAL,
                           f"GPU {gpu.index}: row remapping failed (no spare rows); the card "
                           "needs service", host, gpu=gpu.index, ts=ts,
                           action=acts.ACTION_REMAP_FAIL))
    elif gpu.remap_pending:
        out.append(Finding(Step.GPU, Code.ROW_REMAP_PENDING, Severity.WARNING,
                           f"GPU {gpu.index}: a row remap waits for a GPU reset",
                           host, gpu=gpu.index, ts=ts, action=acts.ACTION_PENDING))
    if gpu.retired_pages_pending:
        out.append(Finding(Step.GPU, Code.RETIRED_PAGES_PENDING, Severity.WARNING,
                           f"GPU {gpu.index}: retired pages wait for a driver reload",
                           host, gpu=gpu.index, ts=ts, action=acts.ACTION_PENDING))
    return out


def host_findings(host: str, sample: HostSample) -> list[Finding]:
    """Host-level trouble that starves GPUs: swapping."""
    swap = sample.host.swap_in_pages_s
    if swap is not None and swapping(swap):
        return [Finding(Step.GPU, Code.HOST_SWAPPING, Severity.WARNING,
                        f"host swapping in {swap:.0f} pages/s", host, ts=sample.ts,
                        action=acts.ACTION_SWAPPING)]
    return []


def link_chain_findings(host: str, hello: Hello,
                        chains: Mapping[str, tuple[PcieLink, ...]]) -> list[Finding]:
    """A GPU's link or a bridge above it trained narrower than it can (sysfs, no root).

    Only width counts here: links train down in speed when idle, which the per-sample
    check judges with the GPU's load; lanes lost stay lost.
    """
    index = {g.bus_id: g.index for g in hello.facts.gpus if g.bus_id}
    out = []
    for bus, chain in chains.items():
        for link in chain:
            if link_shortfall(None, link.max_width, None, link.width) is not Severity.WARNING:
                continue
            what = "its link" if link.address == bus else f"bridge {link.address} above it"
            out.append(Finding(Step.GPU, Code.PCIE_LINK_DOWNGRADED, Severity.WARNING,
                               f"GPU {index.get(bus, '?')} ({bus}): {what} runs x{link.width} "
                               f"of x{link.max_width}", host, gpu=index.get(bus),
                               action=acts.ACTION_LINK_WIDTH))
            break
    return out


def topology_findings(host: str, hello: Hello) -> list[Finding]:
    """``nvidia-smi topo -m`` from the hello, judged by the same parser as ``explain``.

    Live, the whole matrix is known.  The normal HGX layout (each GPU with a NIC on its own
    PCIe switch or socket, the far NICs across the socket link) is how the host is built,
    not trouble: it is no finding at all, only a word in triage's "checked" line
    (:func:`normal_topology`), so 1000 healthy hosts do not bring 1000 lines.  A GPU with
    no local NIC, or GPUs that cross the socket link to each other without NVLink, stay a
    warning on the host.
    """
    if not hello.topo_text or normal_topology(hello.topo_text):
        return []
    result = topo.explain(hello.topo_text.splitlines())
    return [Finding(Step.GPU, f.code, f.severity, f.summary, host, evidence=f.evidence,
                    action=f.action or _default_action(f.code)) for f in result.findings]


@functools.lru_cache(maxsize=64)
def normal_topology(topo_text: str | None) -> bool | None:
    """Whether a ``topo -m`` matrix is the normal layout: every GPU has a local NIC and no
    two GPUs meet only across the socket link; None when there is no matrix or no NIC.

    Cached by text: a fleet of one model sends the same matrix from every host, and triage
    asks on every redraw.
    """
    if not topo_text:
        return None
    matrix = topo.parse_topo(topo_text.splitlines())
    if not matrix.gpus or not matrix.nics:
        return None
    if not _every_gpu_has_a_local_nic(matrix):
        return False
    cells = [(row, col, cell) for row, r in matrix.links.items() for col, cell in r.items()]
    nvlink = any(_NVLINK.match(cell) for _, _, cell in cells)
    gpu_gpu_far = any(cell in _FAR and row != col and _GPU.match(row) and _GPU.match(col)
                      for row, col, cell in cells)
    return nvlink or not gpu_gpu_far


_LOCAL_PATHS = frozenset({"PIX", "PXB", "PHB", "NODE"})
_FAR = frozenset({"SYS", "SOC"})
_NVLINK = re.compile(r"^NV\d+$")
_GPU = re.compile(r"^GPU\d+$")


def _every_gpu_has_a_local_nic(matrix: topo.TopoMatrix) -> bool:
    if not matrix.nics:
        return False
    for gpu in matrix.gpus:
        row = matrix.links.get(gpu, {})
        if not any(row.get(nic) in _LOCAL_PATHS for nic in matrix.nics):
            return False
    return True


def _gpu_index(hello: Hello | None, gpu: str | None) -> int | None:
    """A rule's GPU (a bus id, possibly without its function, or ``GPU3``) as a GPU index."""
    if gpu is None:
        return None
    m = _GPU_NAME.match(gpu)
    if m:
        return int(m.group(1))
    if hello is None:
        return None
    want = normalize_bus_id(gpu) or gpu.lower()
    for info in hello.facts.gpus:
        have = normalize_bus_id(info.bus_id or "")
        if have and (have == want or have.startswith(want.rstrip(".") + ".")):
            return info.index
    return None


_GPU_NAME = re.compile(r"^GPU\s?(\d+)$")


def log_findings(host: str, hello: Hello | None, hits: list[LiveHit]) -> list[Finding]:
    """Live findings from the log rules' hits on one host's kernel and job logs.

    Args:
        host: the host's name in the fleet.
        hello: the host's hello, to turn a rule's bus id into a GPU index.
        hits: what ``LiveLogScanner.scan`` returned.

    Returns:
        One finding per hit, carrying the rule's summary, action, evidence and source.
    """
    out = []
    for hit in hits:
        f = hit.finding
        out.append(Finding(f.step, f.code, f.severity, f.summary, host,
                           gpu=_gpu_index(hello, f.gpu), xid=f.xid, evidence=f.evidence,
                           ts=hit.ts, action=f.action or _default_action(f.code),
                           source=hit.source, count=f.count,
                           extra=with_rank(f.extra), context=hit.context, clock=hit.clock,
                           line=hit.line))
    return out


def with_rank(extra: Mapping[str, object]) -> dict[str, object]:
    """A rule's ``extra`` with ``rank`` set when it names exactly one rank (``ranks: [1]``):
    that rank is the finding's, to be placed on its host and GPU."""
    out = dict(extra)
    ranks = out.get("ranks")
    if "rank" not in out and isinstance(ranks, list | tuple) and len(ranks) == 1 \
            and isinstance(ranks[0], int):
        out["rank"] = ranks[0]
    return out
