"""A tick's GPUs as the per-tick judges read them: each position's moving numbers and its
static half.

A wire v2 sample from the fast path carries the tick's decoded row (``wire_row``, a
``SampleRow``) and its static facts (``static_epoch.gpus``, each GPU position's checked
static half), position for position with ``sample.gpus`` (``wire_row`` is set only where
every GPU and process list came from the row unchanged).  The judges read those two and
never ``sample.gpus``, which such a sample need not build (issue 38: no per-GPU objects on
the hot path).  Any other sample (wire v1, the checked path, a replay) gives its GPUs as
both halves.  (The static half alone, once per epoch: ``compact.static_gpus``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from probes.wire.compact import StaticEpoch
from probes.wire.samples import GpuSample, HostSample

if TYPE_CHECKING:
    from probes.wire.compact import GpuRow


class MovingGpu(Protocol):
    """The moving numbers the per-tick findings read (a ``GpuRow``'s fields are named as the
    sample's: ``GPU_ROW_FIELDS``)."""

    @property
    def util_pct(self) -> float | None: ...

    @property
    def sm_clock_mhz(self) -> float | None: ...

    @property
    def clock_reasons(self) -> tuple[str, ...]: ...

    # and what a fleet row and its GPU verdicts read (``probes.analysis.row_judge``)
    @property
    def temp_c(self) -> float | None: ...

    @property
    def temp_mem_c(self) -> float | None: ...

    @property
    def mem_used_mib(self) -> float | None: ...

    @property
    def power_w(self) -> float | None: ...


TickGpus = tuple["Sequence[MovingGpu]", "Sequence[GpuSample]", "Sequence[GpuRow] | None"]
"""A sample's GPUs, position by position: (moving, fixed, rows).

``moving``: each GPU's moving numbers, the row's ``GpuRow`` (or the sample's ``GpuSample``);
``fixed``: each GPU's static half (index, limits, state, links, processes' jobs), on the row
path with its moving fields None and its processes without memory; ``rows``: the row's GPUs
(``moving``, as their class), whose ``processes`` is the memory of each of
``fixed[i].processes``, or None where ``fixed`` is the sample's own GPUs, whose processes
carry their memory.  A plain tuple: a named one costs more to make than the judges save
per tick."""


def tick_gpus(sample: HostSample) -> TickGpus:
    """The row and its static epoch when the sample has both, else the sample's GPUs."""
    row: Any = sample.wire_row  # a SampleRow (compact builds its GpuRow from the table)
    epoch = sample.static_epoch
    if row is not None and isinstance(epoch, StaticEpoch):
        fixed: Any = epoch.gpus  # no None where the sample has a row
        rows = row.gpus
        return rows, fixed, rows
    gpus = sample.gpus
    return gpus, gpus, None

