"""The host screen's per-GPU table: state, memory, load, thermals, clocks and PCIe link."""

from __future__ import annotations

from dataclasses import dataclass

from textual.reactive import reactive

from probes.analysis.judge import MEM_HIGH_PCT, GpuJudgement, GpuVerdict
from probes.wire.samples import GpuSample
from widgets._format import pct_cell, temp_cell
from widgets._styled_table import MISSING, Cell, ColumnSpec, KeyedRow, StyledTable

VERDICT_CLASS = {
    GpuVerdict.OK: "cell--ok", GpuVerdict.LOST: "cell--down",
    GpuVerdict.UNRESPONSIVE: "cell--down", GpuVerdict.LEAKING: "cell--leaking",
    GpuVerdict.THROTTLED: "cell--throttled", GpuVerdict.HOT: "cell--hot",
}
"""The State column shows the GPU's verdict, the same word the wall and triage use."""


@dataclass(frozen=True)
class GpuRow:
    """One GPU's newest sample and what the core judged about it."""

    gpu: GpuSample
    judged: GpuJudgement


def _pair(used: float | None, total: float | None, unit: str = "") -> Cell:
    if used is None:
        return MISSING
    tail = f"/{total:,.0f}" if total is not None else ""
    return f"{used:,.0f}{tail}{unit}", None


def pcie_cell(row: GpuRow) -> Cell:
    """``Gen5 x16``, or ``Gen4 x8 < Gen5 x16``; coloured when the core calls it a shortfall
    (lanes lost, or a lower generation under load)."""
    gpu = row.gpu
    if gpu.pcie_gen is None and gpu.pcie_width is None:
        return MISSING
    now = f"Gen{gpu.pcie_gen or '?'} x{gpu.pcie_width or '?'}"
    gen_low = gpu.pcie_gen is not None and gpu.pcie_gen_max and gpu.pcie_gen < gpu.pcie_gen_max
    width_low = (gpu.pcie_width is not None and gpu.pcie_width_max
                 and gpu.pcie_width < gpu.pcie_width_max)
    if not (gen_low or width_low):
        return now, None
    best = f"Gen{gpu.pcie_gen_max or '?'} x{gpu.pcie_width_max or '?'}"
    return f"{now} < {best}", "cell--degraded" if row.judged.link is not None else None


def clock_cell(row: GpuRow) -> Cell:
    """SM clock against its maximum, coloured while the core judges the GPU throttled.

    The colour carries the throttle signal into narrow layouts that drop the reasons column.
    """
    text, _ = _pair(row.gpu.sm_clock_mhz, row.gpu.sm_clock_max_mhz)
    return text, "cell--throttled" if row.judged.throttled else None


def reasons_cell(row: GpuRow) -> Cell:
    """Active clock-event reasons, coloured when the core counts one as throttling."""
    reasons = row.gpu.clock_reasons
    if not reasons:
        return "", None
    return ", ".join(reasons), "cell--throttled" if row.judged.slowing else "cell--muted"


class GpuTable(StyledTable):
    """One row per GPU of one host, as of its newest sample."""

    COLUMNS = (
        ColumnSpec("gpu", "GPU", 3, right=True),
        ColumnSpec("state", "State", 9),
        ColumnSpec("mem", "Mem MiB", 13, right=True, narrow=False),
        ColumnSpec("mem_pct", "Mem", 5, right=True),
        ColumnSpec("util", "Util", 5, right=True),
        ColumnSpec("temp", "Temp", 6, right=True),
        ColumnSpec("power", "Power W", 9, right=True),
        ColumnSpec("clock", "SM MHz", 11, right=True),
        ColumnSpec("pcie", "PCIe"),
        ColumnSpec("reasons", "Clock reasons", narrow=False),
    )

    gpus: reactive[tuple[GpuRow, ...]] = reactive((), init=False)
    """The GPUs of the newest sample with their verdicts, in index order."""

    def watch_gpus(self) -> None:
        """Write the new samples into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """One row per GPU, keyed by index."""
        return [(str(r.gpu.index), self.cells(r)) for r in self.gpus]

    @staticmethod
    def cells(row: GpuRow) -> tuple[Cell, ...]:
        """The formatted cells of one GPU."""
        gpu = row.gpu
        verdict = row.judged.verdict
        return (
            (str(gpu.index), None),
            (verdict.value, VERDICT_CLASS[verdict]),
            _pair(gpu.mem_used_mib, gpu.mem_total_mib),
            pct_cell(gpu.mem_used_pct, MEM_HIGH_PCT),
            pct_cell(gpu.util_pct),
            temp_cell(gpu.temp_c, row.judged.temp),
            _pair(gpu.power_w, gpu.power_limit_w),
            clock_cell(row),
            pcie_cell(row),
            reasons_cell(row),
        )
