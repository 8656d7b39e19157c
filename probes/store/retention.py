"""Retention of a recording: by age, and by size with the oldest samples going first.

Samples (``blocks``, and samples stored whole in ``items``) are what fills a recording;
findings, log lines, hellos and notes are few and are what an incident review needs.  So a
size limit deletes the oldest samples first and touches other items only once no sample is
left; an age limit deletes everything older.  What went is written to ``meta`` as
``dropped_before`` (the newest time deleted), which the listing and the replay header show.

Runs on the recorder's writer thread, in short transactions within a time budget.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable

DELETE_BATCH = 2000
BLOCK_BATCH = 200
DROPPED_KEY = "dropped_before"
"""``meta``: samples before this time were deleted by retention (absent: none were)."""


def apply_retention(conn: sqlite3.Connection, max_age_s: float | None, max_bytes: int | None,
                    clock: Callable[[], float], budget_s: float,
                    thin_oldest: Callable[[], bool] | None = None) -> bool:
    """Delete what the limits say must go; False if ``budget_s`` ran out first.

    Over the size limit, ``thin_oldest`` (the oldest whole samples made 15 s buckets) is
    tried before anything is deleted: full resolution goes first, then the oldest buckets.
    """
    deadline = time.monotonic() + budget_s
    if max_age_s is not None:
        cutoff = clock() - max_age_s
        while True:
            if time.monotonic() > deadline:
                return False
            gone = _drop(conn, "SELECT id FROM items WHERE ts < ? ORDER BY ts LIMIT ?",
                         (cutoff, DELETE_BATCH),
                         "SELECT id FROM blocks WHERE t0 < ? AND t1 < ? ORDER BY t0 LIMIT ?",
                         (cutoff, cutoff, BLOCK_BATCH))
            if gone == 0:
                break
    if max_bytes is not None and kept_bytes(conn) > max_bytes:
        # Down to 90%, so the next check is not due right after the next flush.
        target = int(max_bytes * 0.9)
        while (kept := kept_bytes(conn)) > target:
            if time.monotonic() > deadline:
                return False
            if thin_oldest is not None and thin_oldest():
                continue
            gone = _drop(conn, "SELECT id FROM items WHERE kind = 'sample' ORDER BY ts LIMIT ?",
                         (DELETE_BATCH,), "SELECT id FROM blocks ORDER BY t0 LIMIT ?",
                         (_block_batch(conn, kept - target),))
            if gone == 0:  # no samples left: the oldest of everything else
                gone = _drop(conn, "SELECT id FROM items ORDER BY ts LIMIT ?", (DELETE_BATCH,),
                             None, ())
            if gone == 0:
                break
    return True


def _block_batch(conn: sqlite3.Connection, excess: int) -> int:
    """How many of the oldest blocks hold about ``excess`` bytes (a block is minutes of a
    host: deleting a fixed batch could take far more than the limit asks)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'blocks'").fetchone():
        return 0
    avg = conn.execute("SELECT avg(length(body)) FROM (SELECT body FROM blocks "
                       "ORDER BY t0 LIMIT 20)").fetchone()[0]
    return BLOCK_BATCH if not avg else max(1, min(BLOCK_BATCH, int(excess / avg) + 1))


def live_bytes(conn: sqlite3.Connection) -> int:
    """Bytes in pages that hold data (the file also has free pages waiting for reuse)."""
    pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    return (pages - free) * int(conn.execute("PRAGMA page_size").fetchone()[0])


def kept_bytes(conn: sqlite3.Connection) -> int:
    """Live bytes less the staged rows: those are about to be packed (a block of each host,
    tens of MB at a thousand hosts), and deleting old samples would never shrink them."""
    live = live_bytes(conn)
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'staging'").fetchone():
        n, total = conn.execute("SELECT count(*), coalesce(sum(length(body)), 0) "
                                "FROM staging").fetchone()
        if n:  # whole rows to a page: rows of 1-2 KB leave a good part of each page empty
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            per_page = max(1, int((size - 8) // (int(total) / int(n) + 40)))
            live -= -(-int(n) // per_page) * size
    return live


def _drop(conn: sqlite3.Connection, items: str, item_params: tuple[object, ...],
          blocks: str | None, block_params: tuple[object, ...]) -> int:
    """Delete the rows the two selects name, in one transaction; note the newest time gone."""
    has_blocks = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'blocks'").fetchone()
    conn.execute("BEGIN IMMEDIATE")
    try:
        newest = conn.execute(f"SELECT max(ts) FROM items WHERE id IN ({items})",
                              item_params).fetchone()[0]
        gone = int(conn.execute(f"DELETE FROM items WHERE id IN ({items})",
                                item_params).rowcount)
        if blocks is not None and has_blocks:
            t1 = conn.execute(f"SELECT max(t1) FROM blocks WHERE id IN ({blocks})",
                              block_params).fetchone()[0]
            gone += int(conn.execute(f"DELETE FROM blocks WHERE id IN ({blocks})",
                                     block_params).rowcount)
            newest = t1 if newest is None else newest if t1 is None else max(newest, t1)
        if newest is not None:
            old = conn.execute("SELECT value FROM meta WHERE key = ?",
                               (DROPPED_KEY,)).fetchone()
            if old is None or float(old[0]) < newest:
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             (DROPPED_KEY, repr(float(newest))))
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return gone
