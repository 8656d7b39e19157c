# A copy of probes/history before session 13 (branch issue38-flush13): the reference the
# equivalence tests compare against.
"""Per-host time series kept in tiers, so a soak run of any length stays in bounded memory.

``host`` holds the store (``HostHistory``) and its queries; ``tiers`` builds the coarse
buckets; ``steps`` keeps what changes rarely; ``keys`` is the vocabulary of series;
``storage`` and ``merge`` are domain-free.  Importers use the names re-exported here.
"""

from probes.wire.clock_reasons import REASON_BITS
from tests.history.before_s13.host import STAGE_MAX, STAGE_MAX_S, HostHistory, Series
from tests.history.before_s13.keys import (
    DISK_FIELDS,
    GPU_FIELDS,
    GPU_STEP_FIELDS,
    HOST_FIELDS,
    REASON_OTHER,
    STATE_CODES,
    DiskField,
    GpuField,
    GpuStepField,
    HostField,
    SeriesKey,
    disk_key,
    gpu_key,
    host_key,
    proc_key,
    reason_mask,
)
from tests.history.before_s13.storage import Columns, Point, StepSeries, Tier
from tests.history.before_s13.tiers import BUCKET_BATCH, DEFAULT_TIERS, tiers_for

__all__ = [
    "BUCKET_BATCH",
    "DEFAULT_TIERS",
    "DISK_FIELDS",
    "GPU_FIELDS",
    "GPU_STEP_FIELDS",
    "HOST_FIELDS",
    "REASON_BITS",
    "REASON_OTHER",
    "STAGE_MAX",
    "STAGE_MAX_S",
    "STATE_CODES",
    "Columns",
    "DiskField",
    "GpuField",
    "GpuStepField",
    "HostField",
    "HostHistory",
    "Point",
    "Series",
    "SeriesKey",
    "StepSeries",
    "Tier",
    "disk_key",
    "gpu_key",
    "host_key",
    "proc_key",
    "reason_mask",
    "tiers_for",
]
