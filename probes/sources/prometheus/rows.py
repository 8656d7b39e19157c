"""Per-GPU answers decoded straight to rows keyed by the labels that name a GPU series.

A 10,000-host fleet answers 80,000 series a metric.  The query keeps only the host's label,
``instance`` and ``gpu`` (``max by (…)``), which costs Prometheus about a quarter less than
joining them into one label first, and ``msgspec`` decodes the answer into frozen structs
whose label part is hashable: the same series keeps the same slot across refreshes with one
dictionary lookup a row, no per-row string work.
"""

from __future__ import annotations

from typing import Any

import msgspec

from probes.sources.prometheus.client import (
    MAX_READING,
    PrometheusError,
    decode_lenient,
    number,
)
from probes.wire.sanitize import clean_text

GpuId = tuple[str, int]
"""(host name, GPU index)."""

Points = list[tuple[float, float]]
MAX_GPU_INDEX = 1023
"""As the wire's: a ``gpu`` label naming another index names no GPU."""
MAX_HOST_NAME = 256
MAX_TS = 1e11
"""A point stamped outside 0..MAX_TS is no point (as the wire's times)."""


def group_labels(host_label: str) -> tuple[str, ...]:
    """The labels a per-GPU answer keeps: the host's, the scrape address, the GPU index."""
    extra = () if host_label in ("instance", "gpu") else (host_label,)
    return (*extra, "instance", "gpu")


def host_name(host_value: str, instance: str) -> str | None:
    """The host a series belongs to: its host label, else its scrape address without port
    (cleaned: label values are remote text)."""
    name = host_value
    if not name:
        head, sep, port = instance.rpartition(":")
        name = head if sep and port.isdigit() and head else instance
    name = clean_text(name).strip()[:MAX_HOST_NAME]
    return name or None


class RowDecoder:
    """Decodes instant (``vector``) and range (``matrix``) answers grouped by
    ``group_labels(host_label)``; a row's ``metric`` is a hashable labels struct."""

    def __init__(self, host_label: str) -> None:
        names = group_labels(host_label)
        self._has_host = len(names) == 3
        labels = msgspec.defstruct(
            "GpuLabels", [(n, str, "") for n in ("host", "instance", "gpu")[3 - len(names):]],
            rename=dict(zip(("host", "instance", "gpu")[3 - len(names):], names, strict=True)),
            frozen=True, gc=False)
        self._instant = _decoder(labels, "value", Point, strict=False)
        self._range = _decoder(labels, "values", list[tuple[float, float]], strict=False)
        self._instant_text = _decoder(labels, "value", tuple[float, str], strict=True)
        self._range_text = _decoder(labels, "values", list[tuple[float, str]], strict=True)

    def gpu_id(self, labels: Any) -> GpuId | None:
        """A row's (host, GPU index); None where the labels name no GPU."""
        gpu = labels.gpu
        if not (gpu.isascii() and gpu.isdigit() and len(gpu) <= 4
                and int(gpu) <= MAX_GPU_INDEX):
            return None
        host = host_name(labels.host if self._has_host else "", labels.instance)
        return (host, int(gpu)) if host is not None else None

    def instant(self, body: bytes, promql: str) -> list[Any]:
        """Rows with ``metric`` and ``value`` (``.t``, ``.v``; NaN: no reading), as
        decoded (no second list of 80,000 tuples).

        Raises:
            PrometheusError: not a successful vector answer.
        """
        try:
            got = decode_lenient(self._instant, body)
        except msgspec.ValidationError:  # "+Inf": read the string form
            got = _checked(self._decode(self._instant_text, body, promql), promql)
            nan = float("nan")
            return [_Row(r.metric, Point(r.value[0], v if (v := number(r.value[1])) is not None
                                         else nan)) for r in got]
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a vector answer to {promql!r}: {exc}") from None
        return _checked(got, promql)

    def range(self, body: bytes, promql: str) -> list[tuple[Any, Points]]:
        """(labels, [(time, number)…]) per series; points with no value (NaN, ±Inf, out of
        range: ``reading``) or at no time a sample has are left out.

        Raises:
            PrometheusError: not a successful matrix answer.
        """
        try:
            got = decode_lenient(self._range, body)
        except msgspec.ValidationError:
            slow = _checked(self._decode(self._range_text, body, promql), promql)
            return [(r.metric, [(t, v) for t, text in r.values if 0.0 < t <= MAX_TS
                                and (v := number(text)) is not None]) for r in slow]
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a matrix answer to {promql!r}: {exc}") from None
        return [(r.metric, [(t, v) for t, v in r.values
                            if 0.0 <= v <= MAX_READING and 0.0 < t <= MAX_TS])
                for r in _checked(got, promql)]

    @staticmethod
    def _decode(decoder: msgspec.json.Decoder[Any], body: bytes, promql: str) -> Any:
        try:
            return decode_lenient(decoder, body)
        except msgspec.DecodeError as exc:
            raise PrometheusError(f"not a per-GPU answer to {promql!r}: {exc}") from None


class Point(msgspec.Struct, array_like=True, gc=False):
    """``[time, value]`` of an instant answer (a struct: an untracked object, where a
    tuple would be one more the cyclic GC walks)."""

    t: float
    v: float


class _Row(msgspec.Struct, gc=False):
    """A row read through the string form, shaped as a decoded one."""

    metric: Any
    value: Point


def _decoder(labels: type, name: str, value: Any, strict: bool) -> msgspec.json.Decoder[Any]:
    # not tracked by the cyclic GC (they hold no cycles): 80,000 tracked rows made every
    # allocation after the decode pay for collections that walk them
    row = msgspec.defstruct("GpuRow", [("metric", labels), (name, value)], gc=False)
    data = msgspec.defstruct("GpuRows", [("result", list[row])])  # type: ignore[valid-type]
    answer = msgspec.defstruct("GpuAnswer", [("status", str), ("data", data | None, None),
                                             ("error", str | None, None)])
    return msgspec.json.Decoder(answer, strict=strict)


def _checked(got: Any, promql: str) -> list[Any]:
    if got.status != "success" or got.data is None:
        raise PrometheusError(f"query {promql!r} failed: "
                              f"{clean_text(got.error or got.status)[:300]}")
    result: list[Any] = got.data.result
    return result
