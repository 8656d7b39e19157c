"""Every judgement about a GPU or a host, made once, from the limits the operator set.

Findings, detectors, preflight and every view builder call these functions; widgets only
render the verdicts they are handed.  So an idle GPU at its power cap reads the same on the
wall, the GPU table and the thermal panel (not throttled), a leak is urgent by the operator's
``leak_critical_hours`` everywhere, and "hot" means one thing: near this board's own slowdown
threshold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from probes.analysis.limits import (
    DEFAULT_LADDER,
    DEFAULT_LIMITS,
    DEFAULT_PREFLIGHT,
    DetectorLimits,
    LadderLimits,
    PreflightLimits,
)
from probes.analysis.not_collected import field_notes
from probes.rules.parsers.pcie import gen_shortfall
from probes.triage import Code, Severity
from probes.wire.clock_reasons import POWER_CAP, SLOWDOWN_REASONS
from probes.wire.samples import GpuSample, GpuState, Hello, HostSample, HostStats

if TYPE_CHECKING:
    from probes.analysis.findings import Finding

THROTTLE_REASONS = SLOWDOWN_REASONS
"""Clock-event reasons that slow a GPU whatever its load (the wire's vocabulary says which)."""
SLOWING_REASONS = THROTTLE_REASONS | {POWER_CAP}
"""Every reason that can count as throttling; ``gpu_idle`` and application clocks never do."""
SWAP_PAGES_S = 256.0
"""Swap-in above this (1 MiB/s of 4 KiB pages) in one sample stalls data loaders."""

THROTTLE_CODES = frozenset({Code.CLOCKS_THROTTLED, Code.THROTTLED_WHILE_BUSY})
LEAK_CODES = frozenset({Code.MEMORY_LEAK})
HOT_CODES = frozenset({Code.TEMP_NEAR_SLOWDOWN})
LOST_CODES = frozenset({Code.GPU_LOST, Code.GPU_DROPOUT})
SPIN_CODES = frozenset({Code.COLLECTIVE_HANG})
"""Busy at idle power with every GPU of the host: a hung collective's NCCL spin (the
finding names its GPUs in ``extra["gpus"]``)."""


class TempLevel(str, Enum):
    """A temperature against the board's own slowdown threshold."""

    HOT = "hot"
    WARM = "warm"
    OK = "ok"
    UNKNOWN = "unknown"
    """No reading."""

    @property
    def rank(self) -> int:
        """Higher is hotter; for "the hottest GPU of a host"."""
        return {"unknown": 0, "ok": 1, "warm": 2, "hot": 3}[self.value]


class GpuVerdict(str, Enum):
    """One word per GPU, the same on every screen: the worst of what the findings say."""

    LOST = "lost"
    """Reported once (in the hello or a sample), now gone from the samples or lost."""
    MISSING = "missing"
    """Expected (``expect_gpus``) but never reported by the host at all."""
    UNRESPONSIVE = "unresponsive"
    LEAKING = "leaking"
    THROTTLED = "throttled"
    HOT = "hot"
    SPINNING = "spinning"
    """Busy at idle power with its host's other GPUs: waiting in a hung collective."""
    OK = "ok"


class CoreCount(str, Enum):
    """Physical cores per GPU against preflight's ``cores_per_gpu_min``/``max``."""

    FEW = "few"
    OK = "ok"
    MANY = "many"
    UNKNOWN = "unknown"


# ---- one judgement per function ------------------------------------------------------


def is_busy(util_pct: float | None, limits: DetectorLimits = DEFAULT_LIMITS) -> bool:
    """Busy enough that the power cap costs work (``power_cap_busy_util_pct``)."""
    return util_pct is not None and util_pct >= limits.power_cap_busy_util_pct


def slowing_reasons(reasons: Iterable[str], util_pct: float | None,
                    limits: DetectorLimits = DEFAULT_LIMITS) -> tuple[str, ...]:
    """The active clock-event reasons that throttle this GPU now, in the order given."""
    busy = is_busy(util_pct, limits)
    return tuple(r for r in reasons
                 if r in THROTTLE_REASONS or (r == POWER_CAP and busy))


def temp_thresholds(slowdown_c: float | None,
                    limits: DetectorLimits = DEFAULT_LIMITS) -> tuple[float, float]:
    """(hot, warm) in °C: margins below the board's slowdown threshold.

    A board that reports no slowdown threshold (and a memory temperature) falls back to
    the absolute ``temp_hot_c`` / ``temp_warm_c``.
    """
    if slowdown_c is None:
        return limits.temp_hot_c, limits.temp_warm_c
    return slowdown_c - limits.temp_margin_c, slowdown_c - limits.temp_warm_margin_c


def temp_level(temp_c: float | None, slowdown_c: float | None,
               limits: DetectorLimits = DEFAULT_LIMITS) -> TempLevel:
    """Hot, warm or ok against this board's own slowdown threshold."""
    if temp_c is None or temp_c != temp_c:
        return TempLevel.UNKNOWN
    hot, warm = temp_thresholds(slowdown_c, limits)
    return TempLevel.HOT if temp_c >= hot else TempLevel.WARM if temp_c >= warm \
        else TempLevel.OK


def leak_urgency(hours_to_full: float, limits: DetectorLimits = DEFAULT_LIMITS) -> Severity:
    """A leak filling the GPU sooner than ``leak_critical_hours`` is critical."""
    return Severity.CRITICAL if hours_to_full < limits.leak_critical_hours \
        else Severity.WARNING


def cores_per_gpu(cores_physical: int | None, gpu_count: int | None) -> float | None:
    """Physical cores per GPU; None without both counts."""
    if not cores_physical or not gpu_count:
        return None
    return cores_physical / gpu_count


def core_count(per_gpu: float | None,
               limits: PreflightLimits = DEFAULT_PREFLIGHT) -> CoreCount:
    """Cores per GPU against preflight's configured range."""
    if per_gpu is None:
        return CoreCount.UNKNOWN
    if per_gpu < limits.cores_per_gpu_min:
        return CoreCount.FEW
    return CoreCount.MANY if per_gpu > limits.cores_per_gpu_max else CoreCount.OK


NO_PEERS: tuple[int | None, int | None] = (None, None)


def peer_link(gpus: Iterable[GpuSample]) -> tuple[int | None, int | None]:
    """(generation, lanes): the best link any of a host's GPUs trained at.

    A GPU whose own maximum is not collected (an exporter that publishes the current link
    only, as dcgm-exporter does) is held to its siblings': an x8 beside seven x16 is short.
    """
    links = [(g.pcie_gen, g.pcie_width) for g in gpus]
    gens = [gen for gen, _ in links if gen]
    widths = [width for _, width in links if width]
    return (max(gens) if gens else None, max(widths) if widths else None)


def link_caps(gpu: GpuSample, peers: tuple[int | None, int | None] = NO_PEERS
              ) -> tuple[int | None, int | None]:
    """(generation, lanes) the GPU's link is held to: its own maximum, else its peers'."""
    return (gpu.pcie_gen_max if gpu.pcie_gen_max is not None else peers[0],
            gpu.pcie_width_max if gpu.pcie_width_max is not None else peers[1])


def gpu_link_shortfall(gpu: GpuSample, limits: DetectorLimits = DEFAULT_LIMITS,
                   peers: tuple[int | None, int | None] = NO_PEERS) -> Severity | None:
    """A GPU's PCIe link below what it can do (or, its maximum unknown, below its siblings'
    best, ``peer_link``): lanes lost (warning) whatever the load; a lower generation (info)
    only while busy, since idle GPUs train down to save power."""
    short = link_short(gpu, peers)
    if short is Severity.INFO and not is_busy(gpu.util_pct, limits):
        return None
    return short


def link_short(gpu: GpuSample, peers: tuple[int | None, int | None] = NO_PEERS
               ) -> Severity | None:
    """``gpu_link_shortfall`` before its load check: reads only the link's static facts
    (generation, lanes and their maxima), so a v2 stream's verdict holds until its next
    ``static`` message; the load check (a lower generation counts only while busy) is the
    caller's, per tick."""
    gen_cap, width_cap = link_caps(gpu, peers)
    if gpu.pcie_width == width_cap and gpu.pcie_gen == gen_cap:
        return None
    return gen_shortfall(gen_cap, width_cap, gpu.pcie_gen, gpu.pcie_width)


@dataclass(frozen=True)
class LinkVerdict:
    """A GPU's PCIe link now against what it can do, as every screen shows it."""

    gen_low: bool
    """Trained below its generation (idle GPUs do, to save power)."""
    width_low: bool
    """Fewer lanes than it can use."""
    shortfall: Severity | None
    """``gpu_link_shortfall``'s verdict: lanes lost (warning), a lower generation under load
    (info), else None."""
    gen_cap: int | None = None
    """The generation it is held to: its maximum, else its siblings' best."""
    width_cap: int | None = None


def link_verdict(gpu: GpuSample, limits: DetectorLimits = DEFAULT_LIMITS,
                 peers: tuple[int | None, int | None] = NO_PEERS) -> LinkVerdict:
    """The link's marks and verdict, for the GPU table's and topology panel's PCIe column."""
    gen_cap, width_cap = link_caps(gpu, peers)
    return LinkVerdict(
        gpu.pcie_gen is not None and gen_cap is not None and gpu.pcie_gen < gen_cap,
        gpu.pcie_width is not None and width_cap is not None and gpu.pcie_width < width_cap,
        gpu_link_shortfall(gpu, limits, peers), gen_cap, width_cap)


def disk_saturated(util: float | None, limits: DetectorLimits = DEFAULT_LIMITS) -> bool:
    """%util at or above ``disk_saturated_util_pct``: busy nearly all the time."""
    return util is not None and util == util and util >= limits.disk_saturated_util_pct


def mem_high(used_pct: float | None, limits: DetectorLimits = DEFAULT_LIMITS) -> bool:
    """Memory (a GPU's, or host RAM) used at or above ``mem_high_pct``."""
    return used_pct is not None and used_pct == used_pct and used_pct >= limits.mem_high_pct


def power_near_limit(power_w: float | None, limit_w: float | None,
                     limits: DetectorLimits = DEFAULT_LIMITS) -> bool:
    """Drawing at or above ``power_near_share`` of the enforced power limit."""
    return (power_w is not None and limit_w is not None and limit_w > 0
            and power_w >= limits.power_near_share * limit_w)


def scales_well(efficiency: float, limits: LadderLimits = DEFAULT_LADDER) -> bool:
    """A step of the scale-up ladder at or above ``good_efficiency`` scales well."""
    return efficiency >= limits.good_efficiency


def swapping(swap_in_pages_s: float | None) -> bool:
    """Pages coming back from swap fast enough to stall data loaders."""
    return swap_in_pages_s is not None and swap_in_pages_s >= SWAP_PAGES_S


def gpu_verdict(state: GpuState, codes: Iterable[str]) -> GpuVerdict:
    """The GPU's one word: its state, else the worst kind of finding about it."""
    if state is GpuState.LOST:
        return GpuVerdict.LOST
    if state is GpuState.UNRESPONSIVE:
        return GpuVerdict.UNRESPONSIVE
    have = set(codes)
    for found, verdict in ((LOST_CODES, GpuVerdict.LOST), (LEAK_CODES, GpuVerdict.LEAKING),
                           (THROTTLE_CODES, GpuVerdict.THROTTLED), (HOT_CODES, GpuVerdict.HOT),
                           (SPIN_CODES, GpuVerdict.SPINNING)):
        if have & found:
            return verdict
    return GpuVerdict.OK


# ---- per GPU and per host, assembled ---------------------------------------------------


@dataclass(frozen=True)
class GpuJudgement:
    """Everything judged about one GPU; every view of it renders these fields."""

    index: int
    verdict: GpuVerdict
    throttled: bool
    """A throttle finding (this sample's, or sustained while busy) names this GPU."""
    slowing: tuple[str, ...]
    """This sample's clock-event reasons that count as throttling (NVML names)."""
    temp: TempLevel
    mem_temp: TempLevel
    leak: Severity | None
    """The leak finding's severity (``leak_critical_hours``), None when not leaking."""
    link: Severity | None
    since: float | None = None
    """When a lost GPU went (agent time): the onset of its gpu-lost/gpu-dropout finding."""
    answering: bool = True
    """In the newest sample and reading: a GPU that fell off and came back answers, though
    its verdict stays LOST until the finding is acknowledged."""
    not_collected: tuple[tuple[str, str], ...] = ()
    """(``GpuSample`` field, what to show instead) for readings the host's exporter does
    not collect (``not_collected.field_notes``): a panel says so instead of a blank."""
    mem_high: bool = False
    """Its memory used at or above ``mem_high_pct``."""
    power_high: bool = False
    """Drawing near its enforced power limit (``power_near_share``)."""
    link_low: bool = False
    """Its PCIe link trained below its generation or width (a fact, shown with the numbers;
    ``link`` says whether it matters)."""
    link_cap: tuple[int | None, int | None] = NO_PEERS
    """(generation, lanes) the link is held to (``link_caps``): its maximum, else its
    siblings' best."""

    def note(self, field: str) -> str | None:
        """What to show for ``field`` when it is not collected; None when it is."""
        return next((text for f, text in self.not_collected if f == field), None)

    @property
    def gone(self) -> bool:
        """No reading from this GPU: lost or never seen (its row keeps its place)."""
        return self.verdict in (GpuVerdict.LOST, GpuVerdict.MISSING)


_MEMO_MAX = 65536
"""Judgements kept by their inputs; the table is emptied when it reaches this size."""
_memo: dict[tuple[object, ...], GpuJudgement] = {}
_memo_limits: dict[int, DetectorLimits] = {}
"""The limits in the keys (by id), held so that no id is reused while its entries live."""


def judge_gpu(gpu: GpuSample, slowdown_c: float | None, codes: Iterable[str],
              leak: Severity | None, limits: DetectorLimits = DEFAULT_LIMITS,
              not_collected: tuple[tuple[str, str], ...] = (),
              peers: tuple[int | None, int | None] = NO_PEERS) -> GpuJudgement:
    """One sampled GPU, given the codes of the findings about it.

    Kept by its inputs: a fleet view judges every GPU of every host each tick (8,000 at a
    thousand hosts), and from one second to the next a GPU's inputs mostly repeat (the same
    state, reasons, whole-degree temperatures and link), so a lookup replaces ~6 µs of
    judging.  The key holds every input the verdicts read, nothing else; memory and power,
    which move every second, enter as their verdicts (high, near the limit), so the lookup
    still hits.  ``peers`` is the host's best link (``peer_link``), for a GPU whose own
    maximum is not collected.
    """
    code_set = frozenset(codes)
    used, total = gpu.mem_used_mib, gpu.mem_total_mib
    power, cap = gpu.power_w, gpu.power_limit_w
    if _memo_limits.get(id(limits)) is not limits:
        _memo_limits[id(limits)] = limits
    key = (id(limits), gpu.index, gpu.state, gpu.clock_reasons, is_busy(gpu.util_pct, limits),
           gpu.temp_c, gpu.temp_mem_c, slowdown_c, code_set, leak, gpu.pcie_gen,
           gpu.pcie_width, gpu.pcie_gen_max, gpu.pcie_width_max, not_collected,
           # mem_high and power_near_limit inlined: this runs for every GPU every tick
           used is not None and total is not None and total != 0
           and (pct := 100.0 * used / total) == pct
           and pct >= limits.mem_high_pct,
           power is not None and cap is not None and cap > 0
           and power >= limits.power_near_share * cap,
           peers if gpu.pcie_gen_max is None or gpu.pcie_width_max is None else NO_PEERS)
    judged = _memo.get(key)
    if judged is None:
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
            _memo_limits.clear()
            _memo_limits[id(limits)] = limits
        judged = _memo[key] = judge_gpu_afresh(gpu, slowdown_c, code_set, leak, limits,
                                               not_collected, peers)
    return judged


def judge_gpu_afresh(gpu: GpuSample, slowdown_c: float | None, codes: frozenset[str],
                     leak: Severity | None, limits: DetectorLimits,
                     not_collected: tuple[tuple[str, str], ...],
                     peers: tuple[int | None, int | None]) -> GpuJudgement:
    """``judge_gpu`` itself, not kept (its callers keep it: ``judge_gpu``,
    ``row_judge.judge_parts``)."""
    link = link_verdict(gpu, limits, peers)
    return GpuJudgement(
        gpu.index, gpu_verdict(gpu.state, codes), bool(codes & THROTTLE_CODES),
        slowing_reasons(gpu.clock_reasons, gpu.util_pct, limits),
        temp_level(gpu.temp_c, slowdown_c, limits), temp_level(gpu.temp_mem_c, None, limits),
        leak, link.shortfall,
        answering=gpu.state not in (GpuState.LOST, GpuState.UNRESPONSIVE),
        not_collected=not_collected, mem_high=mem_high(gpu.mem_used_pct, limits),
        power_high=power_near_limit(gpu.power_w, gpu.power_limit_w, limits),
        link_low=link.gen_low or link.width_low, link_cap=(link.gen_cap, link.width_cap))


_notes_memo: dict[int, tuple[Hello, tuple[tuple[str, str], ...]]] = {}
"""``field_notes`` by hello (held, so no id is reused): a hello comes once a connection and
every row build asks for its notes."""


def field_notes_of(hello: Hello | None) -> tuple[tuple[str, str], ...]:
    """``field_notes(hello)``, kept per hello (``_notes_memo``)."""
    if hello is None:
        return ()
    kept = _notes_memo.get(id(hello))
    if kept is not None and kept[0] is hello:
        return kept[1]
    if len(_notes_memo) >= _MEMO_MAX:
        _notes_memo.clear()
    notes = field_notes(hello)
    _notes_memo[id(hello)] = (hello, notes)
    return notes



FoundMarks = tuple[dict[int | None, set[str]], dict[int | None, Severity], dict[int, float]]
"""What the verdicts read of a host's findings: each GPU's codes, its leak's severity, when it
went (``findings_marks``)."""


def findings_marks(findings: Iterable[Finding]) -> FoundMarks:
    """The findings as the GPU verdicts read them: the codes about each GPU (a hung
    collective's about each GPU it names), each leak's severity, each lost GPU's onset."""
    codes: dict[int | None, set[str]] = {}
    leaks: dict[int | None, Severity] = {}
    gone_at: dict[int, float] = {}
    for f in findings:
        codes.setdefault(f.gpu, set()).add(f.code)
        if f.code in SPIN_CODES:
            for i in f.details.gpus:
                codes.setdefault(i, set()).add(f.code)
        if f.code in LEAK_CODES:
            leaks[f.gpu] = f.severity
        if f.code in LOST_CODES and f.gpu is not None and f.gpu >= 0:
            ts = f.ts if f.ts is not None else float("inf")
            gone_at[f.gpu] = min(gone_at.get(f.gpu, ts), ts)
    return codes, leaks, gone_at

def judge_gpus(sample: HostSample | None, hello: Hello | None, findings: Iterable[Finding],
               limits: DetectorLimits = DEFAULT_LIMITS,
               expected: int | None = None) -> tuple[GpuJudgement, ...]:
    """Every GPU of a host in index order, none dropped.

    The sampled ones; then every GPU the host ever reported (the hello's list, and any a
    gpu-lost/gpu-dropout finding names) that the sample lacks, as LOST since that finding's
    onset; then, up to ``expected`` (the inventory's ``expect_gpus``), the GPUs the host
    never reported, as MISSING at the first free indices.  A host whose driver lost a card
    thus still shows eight rows, and "7/8" is counted from these verdicts.
    """
    codes, leaks, gone_at = findings_marks(findings)
    slowdown = {g.index: g.temp_slowdown_c for g in hello.facts.gpus} if hello else {}
    notes = field_notes_of(hello)
    sampled = [g for g in (sample.gpus if sample else ()) if g.index >= 0]
    peers = peer_link(sampled)
    out = [judge_gpu(g, slowdown.get(g.index), codes.get(g.index, ()), leaks.get(g.index),
                     limits, notes, peers)
           for g in sampled]
    out = [replace(j, since=finite(gone_at.get(j.index))) if j.gone else j for j in out]
    seen = {j.index for j in out}
    if sample is not None:
        reported = (set(slowdown) | set(gone_at)) - seen
        out += [GpuJudgement(i, GpuVerdict.LOST, False, (), TempLevel.UNKNOWN,
                             TempLevel.UNKNOWN, None, None, since=finite(gone_at.get(i)),
                             answering=False, not_collected=notes)
                for i in sorted(reported)]
        seen |= reported
    if expected is not None and sample is not None:
        free = (i for i in range(expected + len(seen)) if i not in seen)
        out += [GpuJudgement(next(free), GpuVerdict.MISSING, False, (), TempLevel.UNKNOWN,
                             TempLevel.UNKNOWN, None, None, answering=False,
                             not_collected=notes)
                for _ in range(max(0, expected - len(seen)))]
    return tuple(sorted(out, key=lambda j: j.index))


def finite(ts: float | None) -> float | None:
    """``ts``, or None for no onset (None or infinite)."""
    return ts if ts is not None and ts != float("inf") else None


def gpus_present(judged: Iterable[GpuJudgement]) -> int:
    """GPUs that answer now: the ``7`` of ``7/8`` on the host header and the fleet row."""
    return sum(1 for j in judged if j.answering)


@dataclass(frozen=True)
class HostHealth:
    """The host panel's marks, each judged here."""

    overloaded: bool
    """Load above the logical core count: runnable threads wait for a CPU."""
    mem_high: bool
    swapping: bool
    cores_per_gpu: float | None
    cores: CoreCount


def host_health(stats: HostStats, cores_physical: int | None, cores_logical: int | None,
                gpu_count: int | None,
                limits: PreflightLimits = DEFAULT_PREFLIGHT,
                detectors: DetectorLimits = DEFAULT_LIMITS) -> HostHealth:
    """The host's CPU, memory, swap and cores-per-GPU verdicts."""
    used, total = stats.mem_used_bytes, stats.mem_total_bytes
    per = cores_per_gpu(cores_physical, gpu_count)
    return HostHealth(
        overloaded=bool(cores_logical) and stats.load1 is not None
        and stats.load1 > (cores_logical or 0),
        mem_high=used is not None and bool(total)
        and mem_high(100.0 * used / (total or 1), detectors),
        swapping=swapping(stats.swap_in_pages_s), cores_per_gpu=per,
        cores=core_count(per, limits))
