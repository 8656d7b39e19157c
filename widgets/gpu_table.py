"""The host screen's per-GPU table: state, memory, load, thermals, clocks and PCIe link.

Every GPU the host ever reported keeps its row: a lost or missing one says so in the State
column (the critical style) with its bus id, serial and when it went, where the numbers
were, so a gap in the numbering is never the only clue.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from probes.analysis.judge import GpuJudgement, GpuVerdict
from probes.wire.samples import GpuSample
from widgets._format import pct_cell, temp_cell
from widgets._styled_table import MISSING, Cell, ColumnSpec, KeyedRow, StyledTable

VERDICT_CLASS = {
    GpuVerdict.OK: "cell--ok", GpuVerdict.LOST: "cell--sev-critical",
    GpuVerdict.MISSING: "cell--sev-critical",
    GpuVerdict.UNRESPONSIVE: "cell--down", GpuVerdict.LEAKING: "cell--leaking",
    GpuVerdict.THROTTLED: "cell--throttled", GpuVerdict.HOT: "cell--hot",
    GpuVerdict.SPINNING: "cell--spinning",
}
"""The State column shows the GPU's verdict, the same word the wall and triage use."""


@dataclass(frozen=True)
class GpuRow:
    """One GPU's newest sample (None when it has none: lost or missing) and what the core
    judged about it."""

    gpu: GpuSample | None
    judged: GpuJudgement
    bus_id: str | None = None
    """From the hello, so a GPU that no longer answers can still be found in the chassis."""
    serial: str | None = None
    """From the hello: what an RMA asks for."""
    since: str | None = None
    """When a lost GPU went, as the console prints times (``16:14:40``)."""
    work: str | None = None
    """Who its processes work for (``job 48211 rank 3``), from the agent's attribution."""

    @property
    def index(self) -> int:
        """The GPU's index (its row key)."""
        return self.judged.index if self.gpu is None else self.gpu.index


def gone_text(row: GpuRow) -> str:
    """What stands in a lost or missing GPU's numbers: where it sat and when it went."""
    parts = []
    if row.judged.verdict is GpuVerdict.MISSING:
        parts.append("expected, never reported")
    elif row.since:
        parts.append(f"gone since {row.since}")
    if row.bus_id:
        parts.append(f"bus {row.bus_id}")
    if row.serial:
        parts.append(f"serial {row.serial}")
    return " · ".join(parts) or "no reading"


def gone_lines(rows: tuple[GpuRow, ...]) -> list[Content]:
    """One line per lost GPU and one for the missing ones, for under the table: the
    reasons column that carries these is the first to go at 80 columns."""
    out = []
    missing = [r.index for r in rows if r.judged.verdict is GpuVerdict.MISSING]
    for r in rows:
        if r.judged.verdict is GpuVerdict.LOST and r.gpu is None:
            out.append(Content.from_markup("[bold $sev-critical]✗ GPU$i LOST[/] $text",
                                           i=str(r.index), text=gone_text(r)))
    if missing:
        names = ", ".join(f"GPU{i}" for i in missing)
        out.append(Content.from_markup(
            "[bold $sev-critical]✗ $names MISSING[/] expected, never reported: check that "
            "the driver is loaded (nvidia-smi; dmesg | grep -i nvrm)", names=names))
    return out


class GoneGpus(Static):
    """The lost and missing GPUs, one line each, under the GPU table."""

    rows: reactive[tuple[GpuRow, ...]] = reactive((), init=False)

    def watch_rows(self, rows: tuple[GpuRow, ...]) -> None:
        """Show the lines, or nothing when every GPU answers."""
        lines = gone_lines(rows)
        self.display = bool(lines)
        self.update(Content("\n").join(lines))


def state_cell(row: GpuRow) -> Cell:
    """The core's verdict: ``ok``, ``throttled``…, or ``✗ LOST`` in capitals when gone."""
    verdict = row.judged.verdict
    word = f"✗ {verdict.value.upper()}" if row.judged.gone else verdict.value
    return word, VERDICT_CLASS[verdict]


def _pair(used: float | None, total: float | None, unit: str = "") -> Cell:
    if used is None:
        return MISSING
    tail = f"/{total:,.0f}" if total is not None else ""
    return f"{used:,.0f}{tail}{unit}", None


def pcie_cell(row: GpuRow) -> Cell:
    """``Gen5 x16``, or ``Gen4 x8 < Gen5 x16``; coloured when the core calls it a shortfall
    (lanes lost, or a lower generation under load)."""
    gpu = row.gpu
    if gpu is not None and gpu.pcie_gen is None and gpu.pcie_width is None \
            and row.judged.note("pcie_width"):
        # short enough for an 80-column screen; the host's finding names the counters to add
        return "uncollected", "cell--muted"
    if gpu is None or (gpu.pcie_gen is None and gpu.pcie_width is None):
        return MISSING
    now = f"Gen{gpu.pcie_gen or '?'} x{gpu.pcie_width or '?'}"
    if not row.judged.link_low:
        return now, None
    gen_cap, width_cap = row.judged.link_cap
    best = f"Gen{gen_cap or '?'} x{width_cap or '?'}"
    return f"{now} < {best}", "cell--degraded" if row.judged.link is not None else None


def clock_cell(row: GpuRow) -> Cell:
    """SM clock against its maximum, coloured while the core judges the GPU throttled.

    The colour carries the throttle signal into narrow layouts that drop the reasons column.
    """
    if row.gpu is None:
        return MISSING
    text, _ = _pair(row.gpu.sm_clock_mhz, row.gpu.sm_clock_max_mhz)
    return text, "cell--throttled" if row.judged.throttled else None


def reasons_cell(row: GpuRow) -> Cell:
    """Active clock-event reasons, coloured when the core counts one as throttling."""
    reasons = row.gpu.clock_reasons if row.gpu is not None else ()
    if not reasons and row.gpu is not None and row.judged.note("clock_reasons"):
        return "uncollected", "cell--muted"
    if not reasons:
        return "", None
    return ", ".join(reasons), "cell--throttled" if row.judged.slowing else "cell--muted"


class GpuTable(StyledTable):
    """One row per GPU of one host, as of its newest sample."""

    COLUMNS = (
        ColumnSpec("gpu", "GPU", 3, right=True),
        ColumnSpec("state", "State", 12),
        ColumnSpec("mem", "Mem MiB", 13, right=True, narrow=False),
        ColumnSpec("mem_pct", "Mem", 5, right=True),
        ColumnSpec("util", "Util", 5, right=True),
        ColumnSpec("temp", "Temp", 6, right=True),
        ColumnSpec("power", "Power W", 9, right=True),
        ColumnSpec("clock", "SM MHz", 11, right=True),
        ColumnSpec("pcie", "PCIe"),
        ColumnSpec("job", "Job / rank", narrow=False),
        ColumnSpec("reasons", "Clock reasons", narrow=False),
    )

    gpus: reactive[tuple[GpuRow, ...]] = reactive((), init=False)
    """The GPUs of the newest sample with their verdicts, in index order."""

    def watch_gpus(self) -> None:
        """Write the new samples into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """One row per GPU, keyed by index."""
        return [(str(r.index), self.cells(r)) for r in self.gpus]

    @staticmethod
    def cells(row: GpuRow) -> tuple[Cell, ...]:
        """The formatted cells of one GPU; a lost or missing one says so in capitals and
        carries its bus id, serial and when it went where its numbers were."""
        gpu = row.gpu
        state = state_cell(row)
        if gpu is None:
            return ((str(row.index), None), state, *([MISSING] * 8),
                    (gone_text(row), "cell--sev-critical"))
        return (
            (str(gpu.index), None),
            state,
            _pair(gpu.mem_used_mib, gpu.mem_total_mib),
            pct_cell(gpu.mem_used_pct, row.judged.mem_high),
            pct_cell(gpu.util_pct),
            temp_cell(gpu.temp_c, row.judged.temp),
            _pair(gpu.power_w, gpu.power_limit_w),
            clock_cell(row),
            pcie_cell(row),
            (row.work or "", "cell--muted"),
            reasons_cell(row),
        )
