"""Reading the samples of a version-2 recording: packed blocks and still-staged rows.

The reader (:mod:`probes.store.recording_reader`) merges what this yields with the
``items`` table.  Rows are ``(ts, rank, host_id, "sample", ref)``: ``rank`` orders ties in
time after the ``items`` rows of that time (their rank is their id, below ``BLOCK_RANK``),
and ``ref`` is what :meth:`SampleTables.decode` turns into the sample, so a caller that
skips a row never builds it.

Blocks are read through the index on their first time: a block overlapping ``since``
began at most ``block_span`` (in ``meta``) before it.  Blocks are opened as time reaches
them and their rows kept in a heap, so the rows come out in time order whichever host
they belong to, with one decoded block per host in memory at a time.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from probes.store import recording_format as fmt
from probes.store import staged_rows
from probes.store.block_writer import BLOCK_SPAN_KEY
from probes.store.columns import (
    GPU_NUMBERS,
    Block,
    BlockError,
    decode_block,
    int_columns,
    rebuild,
)
from probes.store.staged_rows import StagedRowError
from probes.store.untrusted import MAX_TS, ROW_ERRORS, Guarded
from probes.wire.fastfill import MAX_AMOUNT
from probes.wire.samples import HostSample
from probes.wire.sanitize import clean_json, clean_text

BLOCK_RANK = 1 << 62
"""Ranks of block rows start here (``items`` ids lie below); staged rows above ``STAGED_RANK``."""
STAGED_RANK = 1 << 63
_ROW_LIMIT = 1 << 12
"""More rows than a block holds (``BLOCK_ROWS``), for packing a rank."""

Ref = tuple[Any, ...]
SampleRow = tuple[float, int, int, str, Ref]
DAMAGED = "damaged"
"""The kind of the row :meth:`SampleTables.rows` yields for a block that did not decode (its
samples are lost; the row lets a reader on an event loop pause between bad blocks)."""
_N = f"CASE WHEN typeof(n) = 'integer' AND n BETWEEN 0 AND {1 << 16} THEN n ELSE 0 END"
"""A block's row count as a sum may use it (a file may hold any value there)."""
_MAX_SPAN_S = 1e8

_UNPACKED = ("FROM staging s LEFT JOIN packed p ON p.host_id = s.host_id "
             "WHERE s.id > coalesce(p.last_staged, 0)")
"""Staged rows that no block holds yet."""


class SampleTables:
    """The sample tables of one open recording (absent in a version-1 file)."""

    def __init__(self, conn: Guarded, body: fmt.Body,
                 gpu_numbers: tuple[str, ...] = GPU_NUMBERS) -> None:
        self._conn = conn
        self._body = body
        self._names = gpu_numbers
        """Each GPU's columns in this recording's rows (``columns.recorded_layout``)."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.present = {"blocks", "staging", "packed", "templates"} <= tables
        self._templates: dict[int, tuple[HostSample, list[int]]] = {}
        self._damaged: set[int] = set()

    # -- counting and finding, without decoding ------------------------------------------

    def count(self) -> int:
        if not self.present:
            return 0
        n = self._conn.execute(f"SELECT coalesce(sum({_N}), 0) FROM blocks").fetchone()[0]
        return int(n) + int(self._conn.execute(f"SELECT count(*) {_UNPACKED}").fetchone()[0])

    def span(self) -> tuple[float, float] | None:
        if not self.present:
            return None
        # The latest t1 is among the blocks begun within block_span of the latest t0: both
        # ends come from the index on t0, never a scan (the listing reads every file's).
        lo, hi = self._conn.execute(
            f"SELECT min(x), max(y) FROM (SELECT (SELECT min(t0) FROM blocks WHERE t0 BETWEEN "
            f"0 AND :top) AS x, (SELECT max(t1) FROM blocks WHERE t0 >= (SELECT max(t0) FROM "
            f"blocks WHERE t0 BETWEEN 0 AND :top) - :span AND t1 BETWEEN 0 AND :top) AS y "
            f"UNION ALL SELECT min(s.ts), max(s.ts) {_UNPACKED} AND s.ts BETWEEN 0 AND :top)",
            {"span": self._span(), "top": MAX_TS}).fetchone()
        return None if lo is None else (float(lo), float(hi))

    def count_between(self, since: float | None, until: float) -> int:
        """Samples with ``since <= ts < until``: whole blocks by their count, a block that
        straddles an end by the share of its span inside (an estimate: it is not opened)."""
        if not self.present:
            return 0
        lo = 0.0 if since is None else since
        n = 0.0
        for t0, t1, k in self._conn.execute(
                f"SELECT t0, t1, {_N} FROM blocks WHERE t0 >= ? AND t0 < ? AND t1 >= ? "
                "AND t1 <= ?", (lo - self._span(), until, lo, MAX_TS)):
            if t0 >= lo and t1 < until:
                n += k
            else:
                inside = min(t1, until) - max(t0, lo)
                n += k * (inside / (t1 - t0) if t1 > t0 else 1.0)
        staged = self._conn.execute(f"SELECT count(*) {_UNPACKED} AND s.ts >= ? AND s.ts < ?",
                                    (lo, until)).fetchone()[0]
        return round(n) + int(staged)

    def times_before(self, until: float, n: int) -> list[float]:
        """The ``n`` latest sample times before ``until``, newest first (fewer if there
        are fewer): blocks are opened from the latest back until no earlier one can hold a
        later time than the ``n``-th found."""
        if not self.present:
            return []
        out = [float(r[0]) for r in self._conn.execute(
            f"SELECT s.ts {_UNPACKED} AND s.ts < ? ORDER BY s.ts DESC LIMIT ?", (until, n))]
        span = self._span()
        out.sort(reverse=True)
        for bid, tid, t0, t1, body in self._conn.execute(
                "SELECT id, template_id, t0, t1, body FROM blocks WHERE t0 < ? "
                "ORDER BY t0 DESC", (until,)):
            if len(out) >= n and out[n - 1] > t0 + span:
                break
            if t1 < until and len(out) >= n and t1 < out[n - 1]:
                continue
            block = self._block(bid, tid, body)
            if block is not None:
                out += [t for t in block.rts if t < until]
                out.sort(reverse=True)
                del out[n:]
        return out[:n]

    def next_time(self, after_ts: float) -> float | None:
        """The first sample time strictly after ``after_ts``: the first block that begins
        after it (a block's ``t0`` is its earliest row), or a row of a block that straddles
        it, or a staged row; only the straddling blocks are opened."""
        if not self.present:
            return None
        conn = self._conn
        found = [float(r[0]) for r in conn.execute(
            f"SELECT min(s.ts) {_UNPACKED} AND s.ts > ?", (after_ts,)) if r[0] is not None]
        row = conn.execute("SELECT min(t0) FROM blocks WHERE t0 > ?", (after_ts,)).fetchone()
        if row[0] is not None:
            found.append(float(row[0]))
        for bid, tid, body in conn.execute(
                "SELECT id, template_id, body FROM blocks WHERE t0 >= ? AND t0 <= ? AND t1 > ?",
                (after_ts - self._span(), after_ts, after_ts)):
            block = self._block(bid, tid, body)
            found += [t for t in (block.rts if block is not None else []) if t > after_ts]
        return min(found) if found else None

    def prev_time(self, before_ts: float) -> float | None:
        """The last sample time strictly before ``before_ts``.

        Only blocks that began within ``block_span`` of the latest one begun before it can
        hold it: an earlier block ends before that one's first row.
        """
        if not self.present:
            return None
        conn = self._conn
        row = conn.execute("SELECT max(t0) FROM blocks WHERE t0 < ?", (before_ts,)).fetchone()
        found: list[float] = [float(r[0]) for r in conn.execute(
            f"SELECT max(s.ts) {_UNPACKED} AND s.ts < ?", (before_ts,)) if r[0] is not None]
        if row[0] is not None:
            for bid, tid, t1, body in conn.execute(
                    "SELECT id, template_id, t1, body FROM blocks WHERE t0 >= ? AND t0 < ?",
                    (row[0] - self._span(), before_ts)):
                if t1 < before_ts:
                    found.append(float(t1))
                    continue
                block = self._block(bid, tid, body)
                found += [t for t in (block.rts if block is not None else []) if t < before_ts]
        return max(found) if found else None

    def first_times(self, host_id: int, n: int) -> list[float]:
        """The recording times of ``host_id``'s first ``n`` samples."""
        if not self.present:
            return []
        out: list[float] = []
        for bid, tid, body in self._conn.execute(
                "SELECT id, template_id, body FROM blocks WHERE host_id = ? ORDER BY t0",
                (host_id,)):
            block = self._block(bid, tid, body)
            out += block.rts if block is not None else []
            if len(out) >= n:
                break
        out += [float(r[0]) for r in self._conn.execute(
            f"SELECT s.ts {_UNPACKED} AND s.host_id = ? ORDER BY s.id LIMIT ?", (host_id, n))]
        return sorted(out)[:n]

    def min_after(self, host_id: int, item_id: int, lookahead: int,
                  before: float | None = None) -> float | None:
        """The earliest time among ``host_id``'s first ``lookahead`` samples recorded after
        the ``items`` row ``item_id``.  With ``before``, a block whose first time is not
        before it is not opened (its earliest time is its ``t0``)."""
        if not self.present:
            return None
        times: list[float] = []
        for bid, tid, t0, body in self._conn.execute(
                "SELECT id, template_id, t0, body FROM blocks WHERE host_id = ? "
                "AND after_item >= ? ORDER BY after_item, id LIMIT 2", (host_id, item_id)):
            if before is not None and t0 >= before:
                times.append(float(t0))
                continue
            block = self._block(bid, tid, body)
            times += block.rts[:lookahead] if block is not None else []
        times += [float(r[0]) for r in self._conn.execute(
            f"SELECT s.ts {_UNPACKED} AND s.host_id = ? AND s.after_item >= ? ORDER BY s.id "
            "LIMIT ?", (host_id, item_id, lookahead))]
        return min(times[:lookahead]) if times else None

    # -- rows ----------------------------------------------------------------------------

    def rows(self, since: float | None, until: float | None) -> Iterator[SampleRow]:
        """Every sample with ``since <= ts < until``, in (ts, rank) order."""
        if not self.present:
            return
        lo = 0.0 if since is None else max(0.0, since)
        hi = MAX_TS if until is None else min(until, MAX_TS)
        heap: list[SampleRow] = []
        blocks = self._conn.execute(
            "SELECT id, host_id, t0, template_id, body FROM blocks WHERE t0 >= ? AND t0 < ? "
            "AND t1 >= ? ORDER BY t0, id", (lo - self._span(), hi, lo))
        staged = self._conn.execute(
            f"SELECT s.id, s.host_id, s.template_id, s.ts, s.body {_UNPACKED} "
            "AND s.ts >= ? AND s.ts < ? ORDER BY s.ts, s.id", (lo, hi)).fetchall()
        try:
            while True:
                self._conn.arm()  # each batch is a statement's work, however long we paused
                batch = blocks.fetchmany(16)
                if not batch:
                    break
                for bid, hid, t0, tid, body in batch:
                    while heap and heap[0][0] < t0:
                        yield heapq.heappop(heap)
                    block = self._block(bid, tid, body)
                    base = BLOCK_RANK + bid * _ROW_LIMIT
                    if block is None:
                        yield (max(float(t0), lo), base, hid, DAMAGED, ())
                        continue
                    for i, rts in enumerate(block.rts):
                        if lo <= rts < hi:
                            heapq.heappush(heap, (rts, base + i, hid, "sample", (tid, block, i)))
        finally:
            blocks.close()
        for sid, hid, tid, ts, body in staged:
            heapq.heappush(heap, (float(ts), STAGED_RANK + sid, hid, "sample", (tid, body)))
        while heap:
            yield heapq.heappop(heap)

    def decode(self, ref: Ref) -> HostSample:
        """The sample a row's ``ref`` stands for.

        Raises:
            BlockError: a damaged row or template.
        """
        template, ints = self._template(ref[0])
        if len(ref) == 3:
            block: Block = ref[1]
            ts, seq, reasons, numbers, pcie = block.row(ref[2])
        else:
            try:
                ts, seq, why, numbers, pcie = staged_rows.unpack(ref[1])
                reasons = tuple(tuple(clean_text(str(x)) for x in r) for r in why)
                numbers = [x if type(x) in (int, float) and -MAX_AMOUNT <= x <= MAX_AMOUNT
                           else None for x in numbers]  # a file may hold any JSON there
                for k in ints:  # a binary row's integers are float64, as in a block
                    if k < len(numbers) and isinstance(numbers[k], float):
                        numbers[k] = int(numbers[k])
            except (StagedRowError, ValueError, TypeError):
                raise BlockError("damaged staged row") from None
        if type(ts) not in (int, float) or not 0 <= ts <= MAX_TS or type(seq) is not int:
            raise BlockError("a sample with no time a recording holds")
        if pcie is not None and len(ref) != 3:  # a staged row's text (a block's is clean)
            pcie = clean_json(pcie)
        try:
            return rebuild(template, ts, seq, reasons, numbers, pcie, self._names)
        except (ValueError, TypeError) as e:
            raise BlockError(f"damaged sample: {e}") from None

    # -- inside --------------------------------------------------------------------------

    def _span(self) -> float:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?",
                                 (BLOCK_SPAN_KEY,)).fetchone()
        try:
            span = float(row[0]) if row else 0.0
        except (ValueError, TypeError):
            return 0.0
        return span if 0.0 <= span <= _MAX_SPAN_S else 0.0

    def _template(self, tid: int) -> tuple[HostSample, list[int]]:
        got = self._templates.get(tid)
        if got is None:
            row = self._conn.execute("SELECT body FROM templates WHERE id = ?", (tid,)).fetchone()
            if row is None:
                raise BlockError(f"template {tid} is missing")
            item = self._body.unpack(row[0])
            if not isinstance(item, HostSample):
                raise BlockError(f"template {tid} is not a sample")
            got = (item, int_columns(item, self._names))
            if len(self._templates) > 4096:
                self._templates.clear()
            self._templates[tid] = got
        return got

    def _block(self, bid: int, tid: int, body: bytes) -> Block | None:
        if bid in self._damaged:  # refused once: a seek does not pay for it again
            return None
        try:
            return decode_block(body, self._template(tid)[1])
        except ROW_ERRORS:
            self._damaged.add(bid)
            return None

    @property
    def damaged(self) -> int:
        """Blocks that would not decode (their rows are left out), each counted once."""
        return len(self._damaged)
