"""The recorder's side of columnar blocks: stage each second's samples, pack closed blocks.

A block packs well only with many rows, but a killed console must lose at most the last
second.  So every flush writes each sample cheaply to ``staging`` (its numbers as float64,
:mod:`probes.store.staged_rows`, a row per sample, in the same transaction as everything
else), and keeps the row in memory
with its host's open block.  A block closes when it is ``BLOCK_S`` old (wall time), holds
``BLOCK_ROWS`` rows, its host's static facts change, or its host says hello again; it is
then compressed (:func:`probes.store.columns.encode_block`) and written to ``blocks``, and
``packed`` records the last staged row it holds.  Staged rows are deleted by id range once
no open block needs them: one cheap statement, no index.  After a crash the next recorder
packs what was left staged (:meth:`SamplePacker.recover`); readers meanwhile read staged
rows that ``packed`` does not cover.

Everything here runs on the writer thread, inside its transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes.store import columns, staged_rows
from probes.store import recording_format as fmt
from probes.store.columns import BlockError, Row, Signature, encode_arrays, encode_block, split
from probes.store.staged_rows import StagedRowError
from probes.wire.samples import HostSample

BLOCK_S = 60.0
"""Longest a block stays open, in wall seconds: at 1 Hz a block holds a minute."""
BLOCK_ROWS = 240
"""Most rows in a block (a fleet fed faster than real time closes blocks by count)."""
REOPEN_KINDS = frozenset({"hello", "connected", "disconnected"})
"""Items that close their host's open block, so a block lies wholly before or after them
(the order a replay plays a hello against its host's samples)."""
Parts = tuple[float, float, int, bytes, bytes]
"""A staged row as the writer keeps it: (recording time, ts, seq, the numbers' float64
bytes, the JSON tail), :mod:`probes.store.staged_rows`."""
BLOCK_SPAN_KEY = "block_span"
"""``meta``: the longest span (t1 - t0) of any block, so readers can find the blocks that
overlap a time through the index on t0."""


@dataclass
class _Open:
    host_id: int
    signature: Signature
    template_id: int
    after_item: int
    first_staged: int
    due: float
    rows: list[Parts] = field(default_factory=list)
    """The staged rows' parts: a thousand hosts' open blocks in memory cost their numbers'
    bytes (about 1 KB a row; the JSON tail is shared while the reasons stay), not a Python
    object per number."""
    old_rows: list[Row] | None = None
    """Rows an older rigwatch staged as JSON, parsed (only when recovering them)."""
    last_staged: int = 0


class SamplePacker:
    """Splits samples into staged rows and packs blocks; the writer thread owns it."""

    def __init__(self, conn: sqlite3.Connection, body: fmt.Body,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._conn = conn
        self._body = body
        self._clock = clock
        self._open: dict[int, _Open] = {}
        self._last_template: dict[int, tuple[Signature, int]] = {}
        self._next_staged = _next_id(conn, "staging")
        self._next_template = _next_id(conn, "templates")
        self.next_item = _next_id(conn, "items")
        """The id the next ``items`` row gets (the writer inserts with explicit ids)."""
        self._staged: list[tuple[Any, ...]] = []
        self._blocks: list[tuple[Any, ...]] = []
        self._templates: list[tuple[Any, ...]] = []
        self._packed: dict[int, int] = {}
        self._deleted_below = 0
        self._seen: set[int] = set()
        self._tails: dict[int, tuple[tuple[tuple[str, ...], ...], bytes]] = {}
        """Per host, the last reasons without PCIe chains and their staged JSON."""
        self._procs: dict[int, dict[int, tuple[Any, ...]]] = {}
        self._numbers: dict[int, staged_rows.NumberPacker] = {}
        """Per host, the packer of its staged rows' numbers."""
        """Per host, ``split``'s memory of each GPU's last process tuple."""
        row = conn.execute("SELECT max(t1) FROM blocks").fetchone()
        self.newest: float | None = None if row[0] is None else float(row[0])
        """The latest recording time of any sample staged or packed (tiers count back
        from it)."""
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (BLOCK_SPAN_KEY,)).fetchone()
        self._span = float(row[0]) if row else 0.0
        self._span_written = self._span

    # -- called for each item, in recording order ----------------------------------------

    def add(self, host_id: int, rts: float, sample: HostSample) -> bool:
        """Stage one sample; False when it does not split (store it whole instead)."""
        seen = self._procs.get(host_id)
        if seen is None:
            seen = self._procs[host_id] = {}
        frame = split(sample, seen)
        if frame is None:
            return False
        op = self._open.get(host_id)
        sig = frame.signature
        if op is not None and ((op.signature is not sig and op.signature != sig)
                               or len(op.rows) >= BLOCK_ROWS):
            self._pack(self._open.pop(host_id))
            op = None
        sid = self._next_staged
        self._next_staged += 1
        if op is None:
            tid = self._template(host_id, frame.signature, rts, sample)
            span = BLOCK_S if host_id in self._seen else self._first_span(host_id)
            self._seen.add(host_id)
            op = _Open(host_id, frame.signature, tid, self.next_item - 1, sid,
                       self._clock() + span)
            self._open[host_id] = op
        if self.newest is None or rts > self.newest:
            self.newest = rts
        op.last_staged = sid
        reasons = frame.reasons
        if frame.pcie is not None:
            tail = staged_rows.tail(reasons, frame.pcie)
        else:
            last = self._tails.get(host_id)
            if last is not None and last[0] == reasons:
                tail = last[1]
            else:
                tail = staged_rows.tail(reasons)
                self._tails[host_id] = (reasons, tail)
        packer = self._numbers.get(host_id)
        if packer is None:
            packer = self._numbers[host_id] = staged_rows.NumberPacker()
        raw = packer.pack(frame.numbers)
        body = staged_rows.join(frame.ts, frame.seq, raw, tail)
        op.rows.append((rts, frame.ts, frame.seq, raw, tail))
        self._staged.append((sid, host_id, op.template_id, op.after_item, rts, body))
        return True

    def item_written(self, host_id: int, kind: str) -> int:
        """An ``items`` row is about to be written for ``host_id``: its id."""
        iid = self.next_item
        self.next_item += 1
        if kind in REOPEN_KINDS:
            op = self._open.pop(host_id, None)
            if op is not None:
                self._pack(op)
        return iid

    # -- once per flush, inside the transaction ------------------------------------------

    def flush(self, closing: bool = False) -> None:
        """Pack the blocks that are due (all of them when ``closing``) and write."""
        now = self._clock()
        for hid in [h for h, op in self._open.items() if closing or now >= op.due]:
            self._pack(self._open.pop(hid))
        conn = self._conn
        if self._templates:
            conn.executemany("INSERT INTO templates(id, host_id, ts, body) VALUES (?, ?, ?, ?)",
                             self._templates)
        if self._staged:
            conn.executemany("INSERT INTO staging(id, host_id, template_id, after_item, ts, "
                             "body) VALUES (?, ?, ?, ?, ?, ?)", self._staged)
        if self._blocks:
            conn.executemany("INSERT INTO blocks(host_id, t0, t1, n, template_id, after_item, "
                             "tier, body) VALUES (?, ?, ?, ?, ?, ?, 0, ?)", self._blocks)
            conn.executemany("INSERT OR REPLACE INTO packed(host_id, last_staged) VALUES (?, ?)",
                             self._packed.items())
        if self._span > self._span_written:  # never below what thinning wrote
            row = conn.execute("SELECT value FROM meta WHERE key = ?",
                               (BLOCK_SPAN_KEY,)).fetchone()
            if row is None or float(row[0]) < self._span:
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             (BLOCK_SPAN_KEY, repr(self._span)))
            self._span_written = self._span
        keep = min((op.first_staged for op in self._open.values()), default=self._next_staged)
        if keep > self._deleted_below:
            conn.execute("DELETE FROM staging WHERE id < ?", (keep,))
            self._deleted_below = keep
        self._templates.clear()
        self._staged.clear()
        self._blocks.clear()
        self._packed.clear()

    def rollback(self) -> None:
        """The transaction failed: what was collected for it is dropped with it."""
        self._templates.clear()
        self._staged.clear()
        self._blocks.clear()
        self._packed.clear()

    def recover(self) -> int:
        """Pack rows a killed recorder left staged; the number of samples packed."""
        conn = self._conn
        rows = conn.execute(
            "SELECT s.id, s.host_id, s.template_id, s.after_item, s.ts, s.body FROM staging s "
            "LEFT JOIN packed p ON p.host_id = s.host_id "
            "WHERE s.id > coalesce(p.last_staged, 0) ORDER BY s.id").fetchall()
        groups: dict[tuple[int, int, int], list[tuple[int, float, bytes]]] = {}
        for sid, hid, tid, after, rts, body in rows:
            groups.setdefault((hid, tid, after), []).append((sid, rts, body))
        for (hid, tid, after), staged in groups.items():
            op = _Open(hid, (), tid, after, staged[0][0], 0.0)
            if any(body[:1] == b"[" for _sid, _rts, body in staged):
                op.old_rows = []  # JSON, from before binary rows: parsed whole
            for sid, rts, body in staged:
                op.last_staged = sid
                try:
                    if op.old_rows is not None:
                        op.old_rows.append((rts, *staged_rows.unpack(body)))
                    else:
                        parts = staged_rows.parts(body)
                        staged_rows.read_tail(parts[3])  # parses, or is left out
                        op.rows.append((rts, *parts))
                except StagedRowError:
                    continue  # SQLite commits rows whole: what does not parse was never ours
            self._pack(op)
        self.flush()
        conn.execute("DELETE FROM staging")
        return len(rows)

    # -- inside --------------------------------------------------------------------------

    def _template(self, host_id: int, sig: Signature, rts: float, sample: HostSample) -> int:
        last = self._last_template.get(host_id)
        if last is not None and last[0] == sig:
            return last[1]
        _kind, blob = self._body.pack(columns.static_part(sample))  # rows hold the numbers
        tid = self._next_template
        self._next_template += 1
        self._templates.append((tid, host_id, rts, blob))
        self._last_template[host_id] = (sig, tid)
        return tid

    def _pack(self, op: _Open) -> None:
        got = _encode(op.rows) if op.old_rows is None else _encode_old(op.old_rows)
        if got is None:
            return
        block, t0, t1, n = got
        self._blocks.append((op.host_id, t0, t1, n, op.template_id, op.after_item, block))
        self._packed[op.host_id] = max(op.last_staged, self._packed.get(op.host_id, 0))
        self._span = max(self._span, t1 - t0)

    @staticmethod
    def _first_span(host_id: int) -> float:
        """A host's first block is cut short by a per-host amount, so a fleet that connects
        at once does not pack all its blocks in the same second ever after."""
        return BLOCK_S * (0.25 + 0.75 * ((host_id * 0.6180339887) % 1.0))


def _encode(rows: list[Parts]) -> tuple[bytes, float, float, int] | None:
    """(block, first and last recording time, rows) of a block's staged rows, from their
    parts: the numbers go to the block as one matrix, nothing is parsed but a changed
    tail.  None when there are no rows."""
    if not rows:
        return None
    rts_l, ts_l, seq_l, raws, tails = zip(*rows, strict=True)
    table: dict[tuple[str, ...], int] = {}
    chains: dict[str, Any] = {}
    codes_l: list[list[int]] = []
    last_tail = None
    codes: list[int] = []
    chain: Any = None
    for i, tail in enumerate(tails):
        if tail is not last_tail and tail != last_tail:  # the reasons seldom change
            try:
                reasons, chain = staged_rows.read_tail(tail)
            except StagedRowError:
                raise BlockError("damaged staged row") from None
            codes = [table.setdefault(tuple(r), len(table)) for r in reasons]
            last_tail = tail
        if chain is not None:
            chains[str(i)] = chain
        codes_l.append(codes)
    k = len(raws[0]) // 8
    if any(len(r) != 8 * k for r in raws) or any(len(c) != len(codes) for c in codes_l):
        raise BlockError("rows of different lengths in one block")
    block = encode_arrays(rts_l, ts_l, seq_l, codes_l, staged_rows.numbers_matrix(raws, k),
                          list(table), chains)
    return block, min(rts_l), max(rts_l), len(raws)


def _encode_old(rows: list[Row]) -> tuple[bytes, float, float, int] | None:
    """:func:`_encode` for rows parsed whole (staged as JSON by an older rigwatch)."""
    if not rows:
        return None
    times = [r[0] for r in rows]
    return encode_block(rows), min(times), max(times), len(rows)


def _next_id(conn: sqlite3.Connection, table: str) -> int:
    row = conn.execute(f"SELECT max(id) FROM {table}").fetchone()
    return int(row[0] or 0) + 1
