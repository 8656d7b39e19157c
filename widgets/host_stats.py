"""Host panel 6, Host: CPU, load, memory, swap and cores per GPU, then the host's findings.

A training job is starved by its host as often as by its GPUs: a swapping host stalls the
data loaders, too few cores per GPU cap the input pipeline.  Those states are marked with a
glyph and a word, never by colour alone.  The panel renders only what it is given
(``HostView``) and does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from probes.analysis.findings import Finding
from probes.analysis.judge import CoreCount, HostHealth
from probes.analysis.throughput import JobSpeed
from probes.wire.samples import HostStats
from widgets._format import finding_line

MISSING = "–"
TITLE = "Host"
GIB = 1024 ** 3
LABEL_W = 9


@dataclass(frozen=True)
class HostView:
    """The host's latest stats, its core and GPU counts, and its findings (worst first)."""

    cpu_pct: float | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_in_pages_s: float | None = None
    swap_out_pages_s: float | None = None
    cores_physical: int | None = None
    cores_logical: int | None = None
    """Load above this means runnable threads wait for a CPU."""
    gpu_count: int | None = None
    findings: tuple[Finding, ...] = ()
    health: HostHealth | None = None
    """The core's marks (overloaded, memory high, swapping, cores per GPU); None: no marks."""
    speeds: tuple[JobSpeed, ...] = ()
    """Training throughput of each job log the agent follows (none: no progress lines)."""
    clock_offset_s: float | None = None
    """The host's clock minus the console's (its times are shown corrected); None: unknown."""
    clock_skewed: bool = False
    """The core's verdict: off by more than the operator's limit."""

    @classmethod
    def from_stats(cls, stats: HostStats, *, cores_physical: int | None = None,
                   cores_logical: int | None = None, gpu_count: int | None = None,
                   findings: tuple[Finding, ...] = (),
                   health: HostHealth | None = None,
                   speeds: tuple[JobSpeed, ...] = ()) -> HostView:
        """The view of a sample's ``HostStats`` plus facts from the host's hello."""
        return cls(stats.cpu_pct, stats.load1, stats.load5, stats.load15,
                   stats.mem_used_bytes, stats.mem_total_bytes, stats.swap_used_bytes,
                   stats.swap_total_bytes, stats.swap_in_pages_s, stats.swap_out_pages_s,
                   cores_physical, cores_logical, gpu_count, findings, health, speeds)


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return MISSING if value is None else fmt.format(value)


def _gib_pair(used: int | None, total: int | None) -> str:
    if used is None and total is None:
        return MISSING
    def gib(value: int | None) -> str:
        return _num(None if value is None else value / GIB, "{:,.1f}")

    return f"{gib(used)} / {gib(total)} GiB"


def used_pct(used: int | None, total: int | None) -> float | None:
    """``used`` as a share of ``total``; None when either is unknown or total is 0."""
    if used is None or not total:
        return None
    return 100.0 * used / total


def _row(label: str, *parts: tuple[str, str] | str) -> Content:
    return Content.assemble((f"{label:<{LABEL_W}}", "bold $text-dim"), *parts)


def _mark(text: str, style: str) -> tuple[str, str]:
    return f"  {text}", f"bold {style}"


def _dim_if_missing(text: str) -> tuple[str, str] | str:
    return (text, "$text-dim") if text == MISSING else text


def render_host(view: HostView | None) -> Content:
    """The whole panel: five stat lines, a findings title and one line per finding."""
    lines = [Content.styled(TITLE, "bold $primary")]
    if view is None:
        lines.append(Content.styled("no host statistics reported", "$text-dim"))
        return Content("\n").join(lines)
    health = view.health
    cpu = [_dim_if_missing(_num(view.cpu_pct, "{:.0f} %"))]
    loads = " / ".join(_num(v, "{:.2f}") for v in (view.load1, view.load5, view.load15))
    no_load = view.load1 is None and view.load5 is None and view.load15 is None
    cpu += ["   load ", (loads, "$text-dim") if no_load else loads]
    if view.cores_logical:
        cpu.append((f"  ({view.cores_logical} logical)", "$text-dim"))
        if health is not None and health.overloaded:
            cpu.append(_mark("▲ overloaded", "$sev-warning"))
    lines.append(_row("CPU", *cpu))

    mem = [_dim_if_missing(_gib_pair(view.mem_used_bytes, view.mem_total_bytes))]
    pct = used_pct(view.mem_used_bytes, view.mem_total_bytes)
    if pct is not None:
        mem.append(f"  {pct:.0f} %")
        if health is not None and health.mem_high:
            mem.append(_mark("▲ high", "$mem-high"))
    lines.append(_row("Memory", *mem))

    swap = [_dim_if_missing(_gib_pair(view.swap_used_bytes, view.swap_total_bytes)),
            "   in ", _dim_if_missing(_num(view.swap_in_pages_s, "{:,.0f}")),
            "  out ", _dim_if_missing(_num(view.swap_out_pages_s, "{:,.0f}")),
            ("  pages/s", "$text-dim")]
    if health is not None and health.swapping:
        swap.append(_mark("▲ swapping", "$sev-warning"))
    lines.append(_row("Swap", *swap))

    per = health.cores_per_gpu if health is not None else None
    cores: list[tuple[str, str] | str] = [_dim_if_missing(_num(per))]
    cores.append((f" per GPU  ({_num(view.cores_physical, '{:d}')} physical / "
                  f"{_num(view.gpu_count, '{:d}')} GPUs)", "$text-dim"))
    if health is not None and health.cores is CoreCount.FEW:
        cores.append(_mark("▼ few", "$sev-warning"))
    lines.append(_row("Cores", *cores))
    if view.clock_offset_s is not None:
        off = view.clock_offset_s
        clock: list[tuple[str, str] | str] = [f"{off:+.1f} s",
                                              (" against the console", "$text-dim")]
        if view.clock_skewed:
            clock.append(_mark("▲ skewed: its times are shown corrected", "$sev-warning"))
        lines.append(_row("Clock", *clock))
    lines += [_speed_row(sp) for sp in view.speeds]

    lines.append(Content.styled("Findings", "bold $text-dim"))
    if not view.findings:
        lines.append(Content.styled("no host findings", "$text-dim"))
    lines += [finding_line(f) for f in view.findings]
    return Content("\n").join(lines)


def _speed_row(sp: JobSpeed) -> Content:
    """``Training  2,716 tokens/s  70 % of the run's median 3,869  ▼ drop  rank0.log``."""
    def fmt(v: float) -> str:
        return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"

    parts: list[tuple[str, str] | str] = [
        f"{fmt(sp.now)} {sp.unit}",
        (f"  {sp.share:.0%} of the run's median {fmt(sp.median)}", "$text-dim")]
    if sp.dropped:
        parts.append(_mark("▼ drop", "$sev-warning"))
    parts.append((f"  {sp.source.rsplit('/', 1)[-1]}", "$text-dim"))
    return _row("Training", *parts)


class HostStatsPanel(Widget):
    """The host panel of the host screen; set ``host`` every refresh."""

    DEFAULT_CSS = """
    HostStatsPanel { height: auto; }
    """

    host: reactive[HostView | None] = reactive(None, layout=True)
    """The host's stats and findings; None until the host reported any."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._cache: tuple[HostView | None, Content] | None = None

    def render(self) -> Content:
        """The panel; its lines do not depend on the width (long ones are cut by the CSS)."""
        if self._cache is None or self._cache[0] != self.host:
            self._cache = (self.host, render_host(self.host))
        return self._cache[1]
