"""Tiers on disk: full resolution for a recent span, older samples as min/max/mean buckets.

Like the history's tiers in memory (``probes.history.tiers``): samples older than
``full_s`` (48 h by default) become 15 s buckets, older than ``mid_s`` (7 days) 5 min
buckets.  A bucket is a row of the same columnar block layout (:mod:`probes.store.columns`)
holding each column's mean (rounded to 3 decimals, integer fields to integers), stamped with
the bucket's last sample; the block's ``lo`` and ``hi`` hold the minima and maxima in the
same layout, and ``tier`` says which (0 whole, 1 = 15 s, 2 = 5 min).  A reader sees the
means as samples, one per bucket.  A bucket's clock reasons are every reason seen in it.
Only ``blocks`` are thinned: findings, log lines, hellos and notes (``items``) never are.

Runs on the recorder's writer thread, in short transactions within a time budget, a host's
blocks of one template at a time (a few hours of them make one thinned block).
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probes.store import recording_format as fmt
from probes.store.block_writer import BLOCK_SPAN_KEY
from probes.store.columns import BlockError, Row, decode_block, encode_block, int_columns
from probes.wire.samples import HostSample

FULL_S = 48 * 3600.0
"""Whole samples are kept this long (the default; ``RecordingLimits`` may say otherwise)."""
MID_S = 7 * 86400.0
"""15 s buckets are kept this long; older ones become 5 min buckets."""
TIERS = ((1, 15.0), (2, 300.0))
"""(tier, bucket seconds)."""
GROUP_BLOCKS = 240
"""Blocks of one host thinned into one (four hours of one-minute blocks)."""
FULL_FROM_KEY = "full_resolution_from"
"""``meta``: samples before this time are buckets (absent: every sample is whole)."""


@dataclass(frozen=True)
class TierSpans:
    """How long each resolution is kept, in seconds of recording time."""

    full_s: float = FULL_S
    mid_s: float = MID_S


DEFAULT_TIERS = TierSpans()


def thin(conn: sqlite3.Connection, body: fmt.Body, now: float, spans: TierSpans,
         budget_s: float, force_before: float | None = None) -> bool:
    """Thin what is old enough (or older than ``force_before``, whatever its age: size
    retention thins before it deletes); False if the budget ran out first."""
    deadline = time.monotonic() + budget_s
    cutoffs = {1: now - spans.full_s, 2: now - spans.mid_s}
    if force_before is not None:
        cutoffs[1] = max(cutoffs[1], force_before)
    for tier, _bucket in TIERS:
        while True:
            if time.monotonic() > deadline:
                return False
            if not _thin_one_group(conn, body, tier, cutoffs[tier]):
                break
    return True


def thin_oldest(conn: sqlite3.Connection, body: fmt.Body) -> bool:
    """Make the oldest group of whole samples 15 s buckets, whatever its age (size
    retention, before it deletes); False when no whole samples are left to thin."""
    return _thin_one_group(conn, body, 1, float("inf"))


def _thin_one_group(conn: sqlite3.Connection, body: fmt.Body, tier: int, cutoff: float) -> bool:
    """Thin the oldest group of blocks of tier ``tier - 1`` ending before ``cutoff``."""
    first = conn.execute("SELECT host_id, template_id FROM blocks WHERE tier = ? AND t1 < ? "
                         "ORDER BY t0 LIMIT 1", (tier - 1, cutoff)).fetchone()
    if first is None:
        return False
    host_id, template_id = first
    rows = conn.execute(
        "SELECT id, t0, body, lo, hi FROM blocks WHERE host_id = ? AND template_id = ? "
        "AND tier = ? AND t1 < ? ORDER BY t0 LIMIT ?",
        (host_id, template_id, tier - 1, cutoff, GROUP_BLOCKS)).fetchall()
    template = conn.execute("SELECT body FROM templates WHERE id = ?",
                            (template_id,)).fetchone()
    ints: list[int] = []
    if template is not None:
        with contextlib.suppress(Exception):
            item = body.unpack(template[0])
            if isinstance(item, HostSample):
                ints = int_columns(item)
    bucket = dict(TIERS)[tier]
    parts = [_bucketed(rows, ints, bucket, k) for k in (2, 3, 4)]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("DELETE FROM blocks WHERE id = ?", [(r[0],) for r in rows])
        mean, lo, hi = parts
        if mean:
            times = [r[0] for r in mean]
            t0, t1 = min(times), max(times)
            conn.execute("INSERT INTO blocks(host_id, t0, t1, n, template_id, after_item, tier, "
                         "body, lo, hi) VALUES (?, ?, ?, ?, ?, -1, ?, ?, ?, ?)",
                         (host_id, t0, t1, len(mean), template_id, tier,
                          encode_block(mean), encode_block(lo), encode_block(hi)))
            # Readers find the blocks over a time through t0 and the longest span.
            span = conn.execute("SELECT value FROM meta WHERE key = ?",
                                (BLOCK_SPAN_KEY,)).fetchone()
            if span is None or float(span[0]) < t1 - t0:
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             (BLOCK_SPAN_KEY, repr(t1 - t0)))
        full_from = conn.execute("SELECT min(t0) FROM blocks WHERE tier = 0").fetchone()[0]
        if full_from is None:  # none whole is left: just after the newest bucket
            full_from = math.nextafter(max(r[0] for r in mean), math.inf) if mean else None
        if full_from is not None:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                         (FULL_FROM_KEY, repr(float(full_from))))
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return True


def _bucketed(rows: Sequence[tuple[Any, ...]], ints: list[int], bucket: float,
              which: int) -> list[Row]:
    """The buckets of the blocks' rows: means (``which`` 2, from the blocks' bodies),
    minima (3, from their ``lo`` where they have one) or maxima (4)."""
    rts: list[float] = []
    ts: list[float] = []
    seq: list[int] = []
    reasons: list[tuple[tuple[str, ...], ...]] = []
    numbers: list[list[Any]] = []
    for row in rows:
        data = row[which] if row[which] is not None else row[2]
        try:
            block = decode_block(data, ints)
        except BlockError:
            continue  # a damaged block is dropped with the group, not carried on
        for i, t in enumerate(block.rts):
            s_ts, s_seq, why, nums, _pcie = block.row(i)
            rts.append(t)
            ts.append(s_ts)
            seq.append(s_seq)
            reasons.append(why)
            numbers.append(nums)
    if not rts:
        return []
    order = np.argsort(np.array(rts), kind="stable")
    keys = np.floor(np.array(rts)[order] / bucket)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(order)] - 1
    values = np.array([numbers[i] for i in order], dtype=np.float64)  # None -> NaN
    present = ~np.isnan(values)
    if which == 2:
        sums = np.add.reduceat(np.where(present, values, 0.0), starts, axis=0)
        counts = np.add.reduceat(present, starts, axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.round(sums / counts, 3)
    elif which == 3:
        out = np.fmin.reduceat(values, starts, axis=0)
    else:
        out = np.fmax.reduceat(values, starts, axis=0)
    if ints:
        out[:, ints] = np.round(out[:, ints])
    listed = out.tolist()
    result: list[Row] = []
    for b, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        last = int(order[hi])
        seen: dict[str, None] = {}
        gpus = len(reasons[last])
        merged = []
        for g in range(gpus):
            seen = {}
            for j in order[lo:hi + 1].tolist():
                for r in reasons[j][g] if g < len(reasons[j]) else ():
                    seen[r] = None
            merged.append(tuple(seen))
        nums = [None if v != v else v for v in listed[b]]
        for k in ints:
            if nums[k] is not None:
                nums[k] = int(nums[k])
        result.append((rts[last], ts[last], seq[last], tuple(merged), nums, None))
    return result
