"""A shard's GPU series as slots, and a refresh's answers as columns over them.

Each GPU series keeps one slot for the life of the source (its labels struct is the key),
so a refresh folds an answer of 80,000 rows with one dictionary lookup a row into a plain
list, and builds each GPU's sample from a prepared ``__dict__`` (as the compact wire reader
and the recording's block reader build theirs: the values were checked on the way in), not
through a 35-field frozen ``__init__`` per GPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from probes.sources.prometheus.client import MAX_READING
from probes.sources.prometheus.fields import Kind
from probes.sources.prometheus.rows import GpuId, Points, RowDecoder
from probes.wire.clock_reasons import reasons_of
from probes.wire.samples import GpuSample

Column = list[Any]
"""A field's value per slot (None: no reading)."""

_new = object.__new__
_set = object.__setattr__
_BASE = dict(GpuSample(0).__dict__)
"""Every ``GpuSample`` field at its default: a GPU's template starts from it."""


@lru_cache(maxsize=256)
def _reasons(mask: int) -> tuple[str, ...]:
    return reasons_of(mask)


def typed(kind: Kind, v: float) -> Any:
    """A metric's number as its field's value (``v`` is a ``reading``: finite, 0..2**53)."""
    if kind is Kind.FLOAT or kind is Kind.FREE:
        return v
    if kind is Kind.FLAG:
        return v != 0
    if kind is Kind.REASONS:
        return _reasons(int(v))
    return int(v)


class SlotTable:
    """The GPU series one shard has answered with, each at a fixed slot."""

    def __init__(self, decoder: RowDecoder) -> None:
        self.decoder = decoder
        self._slot: dict[Any, int] = {}
        self._gids: list[GpuId | None] = []
        self._layout: list[tuple[str, list[tuple[int, tuple[int, ...]]]]] | None = None
        self.kept: dict[str, Column] = {}
        """Fields read every few refreshes: their last values by slot."""
        self.reads = 0

    def __len__(self) -> int:
        return len(self._gids)

    def _add(self, labels: Any) -> int:
        slot = self._slot[labels] = len(self._gids)
        self._gids.append(self.decoder.gpu_id(labels))
        self._layout = None
        return slot

    def column(self, rows: Iterable[Any], kind: Kind) -> Column:
        """An instant answer's values by slot (typed; NaN rows are no reading)."""
        slots = self._slot
        col: Column = [None] * len(self._gids)
        plain = kind is Kind.FLOAT or kind is Kind.FREE
        for row in rows:
            v = row.value.v
            if not 0.0 <= v <= MAX_READING:  # NaN, ±Inf, negative, huge: no value
                continue
            s = slots.get(row.metric)
            if s is None:
                s = self._add(row.metric)
                col.append(None)
            col[s] = v if plain else typed(kind, v)
        return col

    def columns_over_time(self, series: Iterable[tuple[Any, Points]], kind: Kind,
                          attr: str, at: dict[float, dict[str, Column]]) -> None:
        """A range answer folded into columns per evaluation time (``at[t][attr]``)."""
        slots = self._slot
        for labels, points in series:
            s = slots.get(labels)
            if s is None:
                s = self._add(labels)
            for t, v in points:
                cols = at.get(t)
                if cols is None:
                    cols = at[t] = {}
                col = cols.get(attr)
                if col is None:
                    col = cols[attr] = []
                if len(col) <= s:
                    col.extend([None] * (s + 1 - len(col)))
                col[s] = typed(kind, v)

    def padded(self, col: Column) -> Column:
        """``col`` as long as the table (slots added after it was built have no value)."""
        if len(col) < len(self._gids):
            col.extend([None] * (len(self._gids) - len(col)))
        return col

    def layout(self) -> list[tuple[str, list[tuple[int, tuple[int, ...]]]]]:
        """Hosts in name order, each GPU's index and its slots (usually one; two when the
        same GPU answered under two scrape addresses)."""
        if self._layout is None:
            by_gpu: dict[GpuId, list[int]] = {}
            for s, gid in enumerate(self._gids):
                if gid is not None:
                    by_gpu.setdefault(gid, []).append(s)
            out: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
            for (host, idx), slots in sorted(by_gpu.items()):
                out.setdefault(host, []).append((idx, tuple(slots)))
            self._layout = list(out.items())
        return self._layout

    def build(self, now: list[tuple[str, Column]], kept: list[tuple[str, Column]],
              xid: Column | None, uuids: dict[str, dict[int, str | None]],
              last_xid: dict[GpuId, int]) -> tuple[dict[str, list[GpuSample]],
                                                  list[tuple[GpuId, int]]]:
        """Each GPU with a reading in ``now`` as a sample (kept fields added), by host; and
        the GPUs whose last Xid changed, with the new code (``last_xid`` is updated).

        A GPU with no reading now gets no sample, and no old values either: it is missing
        from its host's sample, as a GPU off the bus is from an agent's."""
        now = [(a, self.padded(c)) for a, c in now]
        kept = [(a, self.padded(c)) for a, c in kept]
        if xid is not None:
            xid = self.padded(xid)
        out: dict[str, list[GpuSample]] = {}
        changed: list[tuple[GpuId, int]] = []
        for host, gpus in self.layout():
            ids = uuids.get(host, {})
            built = []
            for idx, slots in gpus:
                if xid is not None:  # also of a GPU with no reading now: a lost one's Xid
                    code = _first(slots, xid)
                    if code is not None and code != last_xid.get((host, idx)):
                        last_xid[(host, idx)] = code
                        changed.append(((host, idx), code))
                d = _values(slots, now, None)
                if d is None:
                    continue
                _values(slots, kept, d)
                d["index"], d["uuid"] = idx, ids.get(idx)
                obj = _new(GpuSample)
                _set(obj, "__dict__", d)
                built.append(obj)
            if built:
                out[host] = built
        return out, changed


def _values(slots: tuple[int, ...], cols: list[tuple[str, Column]],
            d: dict[str, Any] | None) -> dict[str, Any] | None:
    """The fields with a value at ``slots`` (the first slot that has one) set in ``d``, or
    in a copy of the defaults made at the first value; None when there is none."""
    for attr, col in cols:
        for s in slots:
            v = col[s]
            if v is not None:
                if d is None:
                    d = _BASE.copy()
                d[attr] = v
                break
    return d


def _first(slots: tuple[int, ...], col: Column) -> Any:
    for s in slots:
        if col[s] is not None:
            return col[s]
    return None
