"""The host screen's per-GPU table: state, memory, load, thermals, clocks and PCIe link."""

from __future__ import annotations

from textual.reactive import reactive

from probes.analysis.findings import THROTTLE_REASONS
from probes.wire.samples import GpuSample, GpuState
from widgets._format import MEM_HIGH_PCT, pct_cell, temp_cell
from widgets._styled_table import MISSING, Cell, ColumnSpec, KeyedRow, StyledTable

SLOWING_REASONS = THROTTLE_REASONS | {"sw_power_cap"}
"""Clock reasons worth colouring; ``gpu_idle`` and application clocks are normal."""


def _pair(used: float | None, total: float | None, unit: str = "") -> Cell:
    if used is None:
        return MISSING
    tail = f"/{total:,.0f}" if total is not None else ""
    return f"{used:,.0f}{tail}{unit}", None


def pcie_cell(gpu: GpuSample) -> Cell:
    """``Gen5 x16``, or ``Gen4 x8 < Gen5 x16`` coloured when below what the link can do."""
    if gpu.pcie_gen is None and gpu.pcie_width is None:
        return MISSING
    now = f"Gen{gpu.pcie_gen or '?'} x{gpu.pcie_width or '?'}"
    gen_low = gpu.pcie_gen is not None and gpu.pcie_gen_max and gpu.pcie_gen < gpu.pcie_gen_max
    width_low = (gpu.pcie_width is not None and gpu.pcie_width_max
                 and gpu.pcie_width < gpu.pcie_width_max)
    if not (gen_low or width_low):
        return now, None
    best = f"Gen{gpu.pcie_gen_max or '?'} x{gpu.pcie_width_max or '?'}"
    return f"{now} < {best}", "cell--degraded"


def clock_cell(gpu: GpuSample) -> Cell:
    """SM clock against its maximum, coloured while a slowing reason is active.

    The colour carries the throttle signal into narrow layouts that drop the reasons column.
    """
    text, _ = _pair(gpu.sm_clock_mhz, gpu.sm_clock_max_mhz)
    slowed = any(r in SLOWING_REASONS for r in gpu.clock_reasons)
    return text, "cell--throttled" if slowed else None


def reasons_cell(reasons: tuple[str, ...]) -> Cell:
    """Active clock-event reasons, coloured when one of them slows the GPU down."""
    if not reasons:
        return "", None
    slowed = any(r in SLOWING_REASONS for r in reasons)
    return ", ".join(reasons), "cell--throttled" if slowed else "cell--muted"


class GpuTable(StyledTable):
    """One row per GPU of one host, as of its newest sample."""

    COLUMNS = (
        ColumnSpec("gpu", "GPU", 3, right=True),
        ColumnSpec("state", "State", 7),
        ColumnSpec("mem", "Mem MiB", 13, right=True, narrow=False),
        ColumnSpec("mem_pct", "Mem", 5, right=True),
        ColumnSpec("util", "Util", 5, right=True),
        ColumnSpec("temp", "Temp", 6, right=True),
        ColumnSpec("power", "Power W", 9, right=True),
        ColumnSpec("clock", "SM MHz", 11, right=True),
        ColumnSpec("pcie", "PCIe"),
        ColumnSpec("reasons", "Clock reasons", narrow=False),
    )

    gpus: reactive[tuple[GpuSample, ...]] = reactive((), init=False)
    """The GPUs of the newest sample, in index order."""

    def watch_gpus(self) -> None:
        """Write the new samples into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """One row per GPU, keyed by index."""
        return [(str(g.index), self.cells(g)) for g in self.gpus]

    @staticmethod
    def cells(gpu: GpuSample) -> tuple[Cell, ...]:
        """The formatted cells of one GPU."""
        state_cls = "cell--ok" if gpu.state is GpuState.OK else "cell--down"
        return (
            (str(gpu.index), None),
            (gpu.state.value, state_cls),
            _pair(gpu.mem_used_mib, gpu.mem_total_mib),
            pct_cell(gpu.mem_used_pct, MEM_HIGH_PCT),
            pct_cell(gpu.util_pct),
            temp_cell(gpu.temp_c),
            _pair(gpu.power_w, gpu.power_limit_w),
            clock_cell(gpu),
            pcie_cell(gpu),
            reasons_cell(gpu.clock_reasons),
        )
