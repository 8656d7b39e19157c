"""Which dcgm-exporter metric fills which ``GpuSample`` field, and the PromQL that reads it.

One table, so the live refresh, the history read at start-up and the "not collected" notes
agree on names; its ``GpuSample`` fields come from the wire's field table
(``probes.wire.fields``).  Metric names and labels are those of NVIDIA's dcgm-exporter
(``etc/default-counters.csv``); ``rigwatch --metrics-port`` exports the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from probes.sources.prometheus.rows import group_labels
from probes.wire import fields
from probes.wire.fields import GpuFieldSpec, Type


class Kind(str, Enum):
    """How a metric's number becomes a field's value."""

    FLOAT = "float"
    INT = "int"
    FLAG = "flag"
    """Non-zero is true (``DCGM_FI_DEV_ROW_REMAP_FAILURE``)."""
    REASONS = "reasons"
    """A clock-event bitmask, decoded to the reason names the agent sends."""
    FREE = "free"
    """Framebuffer free: with ``mem_used_mib`` it gives ``mem_total_mib``."""
    XID = "xid"
    """The last Xid's code: a change is an event, not a field."""
    GPU_FACT = "gpu-fact"
    """A setting of the GPU (its hello's ``GpuInfo``), read once at discovery."""


@dataclass(frozen=True)
class Field:
    """One GPU quantity as dcgm-exporter exports it."""

    attr: str
    """The ``GpuSample`` attribute (or a ``Kind`` with its own handling)."""
    metrics: tuple[str, ...]
    """Its metric name; older exporters' name after it (the clock-event reasons)."""
    kind: Kind = Kind.FLOAT
    default_on: bool = True
    """In dcgm-exporter's ``default-counters.csv``; off ones get a "not collected" note."""
    history: bool = False
    """Read over the detectors' window at start-up (``query_range``)."""
    every: int = 1
    """Read every this many refreshes: slow counters and settings need not cost a query
    each refresh (their last value is kept between)."""


SLOW_EVERY = 4
"""Counters, settings and secondary readings are read every fourth refresh."""

_KINDS = {Type.AMOUNT: Kind.FLOAT, Type.COUNT: Kind.INT, Type.FLAG: Kind.FLAG,
          Type.REASONS: Kind.REASONS}


def table_fields(table: tuple[GpuFieldSpec, ...]) -> tuple[Field, ...]:
    """The wire's GPU fields with a dcgm-exporter name (``probes.wire.fields``), in table
    order.  Charted ones and the clock reasons (a step series the detectors read) are read
    over the window at start-up; the table's slow ones every fourth refresh."""
    return tuple(Field(s.name, (s.dcgm, *_OLDER.get(s.dcgm, ())), _KINDS[s.type],
                       default_on=s.dcgm_default,
                       history=s.chart is not None or s.type is Type.REASONS,
                       every=SLOW_EVERY if s.scrape_slow else 1)
                 for s in table if s.dcgm)


_OLDER = {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",)}
"""Older exporters' names of a metric, read after its own."""

FIELDS: tuple[Field, ...] = (
    *table_fields(fields.GPU_TABLE),
    Field("mem_free_mib", ("DCGM_FI_DEV_FB_FREE",), Kind.FREE, history=True,
          every=SLOW_EVERY),
    Field("xid", ("DCGM_FI_DEV_XID_ERRORS",), Kind.XID, history=True),
    # DCGM field 158 (named as in NVIDIA's go-dcgm ``pkg/dcgm/const_fields.go``)
    Field("temp_slowdown_c", ("DCGM_FI_DEV_SLOWDOWN_TEMP",), Kind.GPU_FACT, default_on=False),
    Field("power_violation_us", ("DCGM_FI_DEV_POWER_VIOLATION",), Kind.INT, default_on=False),
    Field("thermal_violation_us", ("DCGM_FI_DEV_THERMAL_VIOLATION",), Kind.INT,
          default_on=False),
)
"""Every field the source reads: one instant query each per refresh it is due (a
``GPU_FACT`` once, at discovery).  The ``GpuSample`` fields come from the wire's table;
the others have a ``Kind``'s own rule or are read only to say whether they are collected."""
SLOWDOWN = next(f for f in FIELDS if f.attr == "temp_slowdown_c")

SAMPLE_ATTRS = frozenset(s.name for s in fields.GPU_TABLE
                         if s.dcgm and s.type is not Type.REASONS)
"""Fields that are ``GpuSample`` attributes as they are (the others have a ``Kind``'s rule
or are read only to say whether they are collected)."""

IDENTITY_LABELS = ("gpu", "UUID", "pci_bus_id", "modelName", "DCGM_FI_DRIVER_VERSION")
IDENTITY_METRICS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS")
"""The series that list a GPU.  A GPU whose readings stopped while its last Xid is still
exported (rigwatch's exporter keeps it for every GPU the host listed) is listed, and its
missing readings make it lost, as an agent's GPU missing from its samples is."""
"""The labels that name a GPU: read once (and on every rediscovery), not every refresh."""


def matchers(match: str) -> str:
    """``--match`` as label matchers without braces (``{job="dcgm"}`` and ``job="dcgm"``
    both work)."""
    text = match.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    return text


def selector(metrics: tuple[str, ...], match: str, shard: str = "") -> str:
    """The series of one field (any of its names) under ``match`` (and a shard's
    matcher)."""
    extra = ",".join(m for m in (matchers(match), shard) if m)
    if len(metrics) == 1:
        return f"{metrics[0]}{{{extra}}}" if extra else metrics[0]
    names = "|".join(metrics)
    return "{" + f'__name__=~"{names}"' + (f",{extra}" if extra else "") + "}"


def per_gpu(metrics: tuple[str, ...], match: str, host_label: str, shard: str = "") -> str:
    """One value per host and GPU, keeping only the labels that name them
    (``group_labels``): a 10,000-host answer then carries three short labels a series, not
    dcgm-exporter's ten."""
    return f"max by ({', '.join(group_labels(host_label))}) ({selector(metrics, match, shard)})"


def identity(match: str, host_label: str, window_s: float = 0.0) -> str:
    """Every GPU with the labels that name it (``group``: the value is always 1), from its
    memory reading or its last Xid (``IDENTITY_METRICS``).

    With a window, every GPU seen in it: one that fell off the bus an hour ago is still
    listed, and its absence from the newest values is then a lost GPU, as with an agent."""
    labels = ", ".join((host_label, "instance", *IDENTITY_LABELS))
    series = selector(IDENTITY_METRICS, match)
    if window_s >= 1.0:
        series = f"last_over_time({series}[{int(window_s)}s])"
    return f"group by ({labels}) ({series})"
