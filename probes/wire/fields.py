"""The one table of a GPU's fields: what each is, how it travels and where it goes.

Every list of GPU fields is derived from :data:`GPU_TABLE` when its module is imported
(never per sample): the wire v2's columns and row Struct (``probes.wire.compact``), the v1
Struct (``probes.wire.structs``) and the checked decoder (``probes.wire.protocol``), the
recorder's moving columns (``probes.store.columns``), the history's dense series and their
codecs (``probes.history.keys``, ``staged``), the export's metrics and CSV columns
(``probes.outputs.export``) and the Prometheus source's field map (``prometheus_fields``).
Each derives from ``fields.GPU_TABLE`` read at its own import, so a table extended before
those imports reaches all of them (``tests/wire/test_metric_table.py`` does so).

What cannot be derived is checked by that test: the agent's standalone column list
(``probes/agent/output.py``: it runs on the host's stock python3 and imports nothing of
ours), the typed ``GpuSample`` attribute (mypy reads classes, not tables) and the
``Literal`` types of the history keys.

Order is the wire v2's: the static columns as a ``static`` message lists them, then the
moving ones as a tick's array holds them.  Both are positional on the wire, so an
existing field never moves; a new moving field goes at the end of the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Literal

from msgspec import Meta

from probes.wire.fastfill import MAX_AMOUNT

MAX_COUNT = 2**53
MAX_GPU_INDEX = 1023

Amount = Annotated[float, Meta(ge=0, lt=MAX_AMOUNT)]
"""A sample amount (MiB, W, %, MHz, a rate): ``probes.wire.decode_fields._pnum``'s bounds, less
the edge: msgspec rounds an int to a float before the bound, so 2**53 + 1 would pass."""
Count = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
"""A count or a size in bytes: ``_pint``'s bounds."""
Index = Annotated[int, Meta(ge=0, le=MAX_GPU_INDEX)]


class Move(str, Enum):
    """How often a field travels."""

    STATIC = "static"
    """In the v2 ``static`` message, again only when it changes; one signature in a
    recording block."""
    MOVING = "moving"
    """In every tick's array; a column of numbers in a recording block."""


class Type(str, Enum):
    """A field's value as the wire carries it (each has its checked decoder)."""

    AMOUNT = "amount"
    """A float >= 0 (``Amount``)."""
    COUNT = "count"
    """An int >= 0 (``Count``)."""
    FLAG = "flag"
    TEXT = "text"
    INDEX = "index"
    STATE = "state"
    """A ``GpuState`` (a missing one reads as ok, null as unknown)."""
    REASONS = "reasons"
    """Clock-event reason names."""
    PROCESSES = "processes"
    """The compute processes (static: pid, name, owner, job …)."""
    PROCESS_MIB = "process-mib"
    """Each static process's memory, in the static list's order (moving)."""


NUMBERS = frozenset({Type.AMOUNT, Type.COUNT})
"""Types recorded as a column of numbers when moving."""

Chart = Literal["pct", "mib16", "w10", "mhz"]
"""A charted field's coarse codec (``probes.history.keys.CHART_CODECS``)."""


@dataclass(frozen=True)
class GpuFieldSpec:
    """One GPU field."""

    name: str
    """The ``GpuSample`` attribute and the v1 JSON key."""
    move: Move
    type: Type
    unit: str = ""
    wire: str = ""
    """The v2 column name where it is not ``name`` (``process_used_mib``)."""
    chart: Chart | None = None
    """Charted: a dense history series ``gpu/<i>/<name>``, stored coarse with this codec."""
    dcgm: str = ""
    """Its dcgm-exporter metric: what ``rigwatch --metrics-port`` and the exports name it,
    and what the Prometheus source reads."""
    help: str = ""
    """dcgm-exporter's help text for ``dcgm``."""
    counter: bool = False
    """dcgm-exporter's family type is ``counter``."""
    dcgm_default: bool = True
    """In dcgm-exporter's ``default-counters.csv``; an off one gets a "not collected" note."""
    scrape_slow: bool = False
    """The Prometheus source reads it every fourth refresh (settings, counters)."""
    csv: int = 0
    """Its place among the CSV export's GPU columns (1 first; 0: not exported there)."""

    @property
    def column(self) -> str:
        """Its v2 column name."""
        return self.wire or self.name


_S, _M = Move.STATIC, Move.MOVING
_A, _C, _F, _T = Type.AMOUNT, Type.COUNT, Type.FLAG, Type.TEXT

GPU_TABLE: tuple[GpuFieldSpec, ...] = (
    GpuFieldSpec("index", _S, Type.INDEX),
    GpuFieldSpec("uuid", _S, _T),
    GpuFieldSpec("state", _S, Type.STATE),
    GpuFieldSpec("bus_id", _S, _T),
    GpuFieldSpec("mem_total_mib", _S, _A, "MiB", csv=2),
    GpuFieldSpec("power_limit_w", _S, _A, "W", dcgm="DCGM_FI_DEV_POWER_MGMT_LIMIT",
                 help="Power management limit (in W).", dcgm_default=False, scrape_slow=True,
                 csv=8),
    GpuFieldSpec("sm_clock_max_mhz", _S, _A, "MHz", dcgm="DCGM_FI_DEV_MAX_SM_CLOCK",
                 help="Maximum SM clock (in MHz).", dcgm_default=False, scrape_slow=True,
                 csv=10),
    # DCGM fields 235-238 by their names in NVIDIA's go-dcgm ``pkg/dcgm/const_fields.go``,
    # the table dcgm-exporter reads its counters CSV against (default off there)
    GpuFieldSpec("pcie_gen", _S, _C, dcgm="DCGM_FI_DEV_PCIE_LINK_GEN",
                 help="PCIe current link generation.", dcgm_default=False, scrape_slow=True,
                 csv=11),
    GpuFieldSpec("pcie_gen_max", _S, _C, dcgm="DCGM_FI_DEV_PCIE_MAX_LINK_GEN",
                 help="PCIe max link generation.", dcgm_default=False, scrape_slow=True),
    GpuFieldSpec("pcie_width", _S, _C, "lanes", dcgm="DCGM_FI_DEV_PCIE_LINK_WIDTH",
                 help="PCIe current link width.", dcgm_default=False, scrape_slow=True,
                 csv=12),
    GpuFieldSpec("pcie_width_max", _S, _C, "lanes", dcgm="DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH",
                 help="PCIe max link width.", dcgm_default=False, scrape_slow=True),
    GpuFieldSpec("mem_clock_max_mhz", _S, _A, "MHz"),
    GpuFieldSpec("pstate", _S, _T),
    GpuFieldSpec("ecc_corrected_volatile", _S, _C, dcgm="DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                 help="Total number of single-bit volatile ECC errors.", counter=True,
                 dcgm_default=False, scrape_slow=True),
    GpuFieldSpec("ecc_uncorrected_volatile", _S, _C, dcgm="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                 help="Total number of double-bit volatile ECC errors.", counter=True,
                 dcgm_default=False, scrape_slow=True, csv=13),
    GpuFieldSpec("ecc_corrected_aggregate", _S, _C),
    GpuFieldSpec("ecc_uncorrected_aggregate", _S, _C),
    GpuFieldSpec("retired_pages_pending", _S, _F),
    GpuFieldSpec("remap_correctable", _S, _C, dcgm="DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                 help="Number of remapped rows for correctable errors.", counter=True,
                 scrape_slow=True),
    GpuFieldSpec("remap_uncorrectable", _S, _C,
                 dcgm="DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                 help="Number of remapped rows for uncorrectable errors.", counter=True,
                 scrape_slow=True, csv=14),
    GpuFieldSpec("remap_pending", _S, _F),
    GpuFieldSpec("remap_failure", _S, _F, dcgm="DCGM_FI_DEV_ROW_REMAP_FAILURE",
                 help="Whether remapping of rows has failed", scrape_slow=True),
    GpuFieldSpec("nvlink_up", _S, _C),
    GpuFieldSpec("nvlink_links", _S, _C),
    GpuFieldSpec("persistence", _S, _F),
    GpuFieldSpec("pcie_replay", _S, _C, dcgm="DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                 help="Total number of PCIe retries.", counter=True, scrape_slow=True),
    GpuFieldSpec("processes", _S, Type.PROCESSES),
    # --- moving: one tick's array, in this order -------------------------------------------
    GpuFieldSpec("mem_used_mib", _M, _A, "MiB", chart="mib16", dcgm="DCGM_FI_DEV_FB_USED",
                 help="Framebuffer memory used (in MiB).", csv=1),
    GpuFieldSpec("util_pct", _M, _A, "%", chart="pct", dcgm="DCGM_FI_DEV_GPU_UTIL",
                 help="GPU utilization (in %).", csv=3),
    GpuFieldSpec("mem_util_pct", _M, _A, "%", dcgm="DCGM_FI_DEV_MEM_COPY_UTIL",
                 help="Memory utilization (in %).", scrape_slow=True, csv=4),
    GpuFieldSpec("temp_c", _M, _A, "C", chart="pct", dcgm="DCGM_FI_DEV_GPU_TEMP",
                 help="GPU temperature (in C).", csv=5),
    GpuFieldSpec("power_w", _M, _A, "W", chart="w10", dcgm="DCGM_FI_DEV_POWER_USAGE",
                 help="Power draw (in W).", csv=7),
    GpuFieldSpec("sm_clock_mhz", _M, _A, "MHz", chart="mhz", dcgm="DCGM_FI_DEV_SM_CLOCK",
                 help="SM clock frequency (in MHz).", csv=9),
    GpuFieldSpec("temp_mem_c", _M, _A, "C", dcgm="DCGM_FI_DEV_MEMORY_TEMP",
                 help="Memory temperature (in C).", scrape_slow=True, csv=6),
    GpuFieldSpec("mem_clock_mhz", _M, _A, "MHz", dcgm="DCGM_FI_DEV_MEM_CLOCK",
                 help="Memory clock frequency (in MHz).", scrape_slow=True),
    GpuFieldSpec("pcie_tx_kbs", _M, _A, "KB/s"),
    GpuFieldSpec("pcie_rx_kbs", _M, _A, "KB/s"),
    GpuFieldSpec("clock_reasons", _M, Type.REASONS, dcgm="DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
                 help="Current clock event reasons (bitmask).", dcgm_default=False),
    GpuFieldSpec("processes", _M, Type.PROCESS_MIB, "MiB", wire="process_used_mib"),
)
"""Every ``GpuSample`` field, once (``processes`` twice: its static half and its memory)."""


def static_specs(table: tuple[GpuFieldSpec, ...]) -> tuple[GpuFieldSpec, ...]:
    return tuple(s for s in table if s.move is Move.STATIC)


def moving_specs(table: tuple[GpuFieldSpec, ...]) -> tuple[GpuFieldSpec, ...]:
    return tuple(s for s in table if s.move is Move.MOVING)


def static_columns(table: tuple[GpuFieldSpec, ...]) -> tuple[str, ...]:
    """The v2 ``gpu_static`` columns."""
    return tuple(s.column for s in static_specs(table))


def moving_columns(table: tuple[GpuFieldSpec, ...]) -> tuple[str, ...]:
    """The v2 ``gpu`` columns (a tick's array per GPU)."""
    return tuple(s.column for s in moving_specs(table))


def moving_numbers(table: tuple[GpuFieldSpec, ...]) -> tuple[str, ...]:
    """The moving fields recorded as columns of numbers, in wire order."""
    return tuple(s.name for s in moving_specs(table) if s.type in NUMBERS)


def charted(table: tuple[GpuFieldSpec, ...]) -> tuple[GpuFieldSpec, ...]:
    """The fields that are dense history series."""
    return tuple(s for s in table if s.chart is not None)


def names(table: tuple[GpuFieldSpec, ...]) -> tuple[str, ...]:
    """Every field name once, in table order."""
    return tuple(dict.fromkeys(s.name for s in table))
