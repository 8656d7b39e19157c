"""Reading a recording: time-ordered items, by kind, also while it is still being written.

Readers open the file read-only and never migrate it; a file of an older schema is opened
for recording once (:class:`probes.store.recording.Recorder`) to bring it up to date.
"""

from __future__ import annotations

import heapq
import itertools
import os
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from probes.config.fleet import HostSpec
from probes.store import codec
from probes.store import recording_format as fmt
from probes.store.block_reader import SampleTables
from probes.store.codec import Item
from probes.store.columns import BlockError
from probes.store.recording_format import RecordingError

_FETCH_ROWS = 256


class RecordingReader:
    """Reads a recording, also while another process is still writing it (WAL)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        if not self._path.is_file():
            raise RecordingError(f"{self._path} is not a rigwatch recording (no such file)")
        if fmt.check_header(self._path):
            raise RecordingError(f"{self._path} is not a rigwatch recording (empty file)")
        uri = self._path.resolve().as_uri() + "?mode=ro"
        try:
            self._conn = sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False)
        except sqlite3.Error as e:
            raise RecordingError(f"cannot open recording {self._path}: {e}") from None
        try:
            version = fmt.schema_version(self._conn, self._path)
            if version not in fmt.READABLE_VERSIONS:
                fmt.refuse_version(self._path, version)
                raise RecordingError(f"{self._path} has schema version {version}; open it for "
                                     f"recording once to migrate it to {fmt.SCHEMA_VERSION}")
            self._meta = fmt.read_meta(self._conn)
            self._body = fmt.Body(fmt.stored_zdict(self._meta, self._path))
            self._samples = SampleTables(self._conn, self._body)
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise RecordingError(f"cannot read recording {self._path}: {e}") from None
        except RecordingError:
            self._conn.close()
            raise
        self._host_names: dict[int, str] = {}
        self._skipped = 0

    @property
    def path(self) -> Path:
        return self._path

    @property
    def meta(self) -> dict[str, str]:
        """The ``meta`` table (schema_version, created, fleet_key, zdict_id…)."""
        return dict(self._meta)

    @property
    def fleet_key(self) -> str | None:
        return self._meta.get("fleet_key")

    @property
    def created_ts(self) -> float | None:
        try:
            return float(self._meta["created_ts"])
        except (KeyError, ValueError):
            return None

    @property
    def skipped(self) -> int:
        """Rows :meth:`items` left out because they would not decode (damaged, or written
        by a newer rigwatch with values this one does not know)."""
        return self._skipped + self._samples.damaged

    @property
    def full_resolution_from(self) -> float | None:
        """Samples before this time are kept as 15 s or 5 min buckets (None: all whole)."""
        return self._meta_float("full_resolution_from")

    def _meta_float(self, key: str) -> float | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        try:
            return float(row[0]) if row else None
        except ValueError:
            return None

    @property
    def dropped_before(self) -> float | None:
        """Retention deleted samples up to this time (None: nothing was deleted)."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'dropped_before'"
                                 ).fetchone()
        try:
            return float(row[0]) if row else None
        except ValueError:
            return None

    def hosts(self) -> list[str]:
        """Host names in the order they were first recorded."""
        return [r[0] for r in self._conn.execute("SELECT name FROM hosts ORDER BY id")]

    def host_specs(self) -> list[HostSpec]:
        """Each recorded host as the recording console described it (tags, expected GPUs,
        pace); bare names for a recording made before specs were kept."""
        return fmt.decode_host_specs(self._meta.get(fmt.HOST_SPECS_KEY), self.hosts())

    def sample_spacing(self, host: str, samples: int = 33) -> float | None:
        """The usual seconds between ``host``'s samples (the median of its first few), in
        recording time; None with fewer than two.  A simulated host's are its simulated
        step: one minute per sample in the demo."""
        row = self._conn.execute("SELECT id FROM hosts WHERE name = ?", (host,)).fetchone()
        if row is None:
            return None
        times = [float(r[0]) for r in self._conn.execute(
            "SELECT ts FROM items WHERE kind = 'sample' AND host_id = ? ORDER BY ts LIMIT ?",
            (row[0], samples))]
        times = sorted(times + self._samples.first_times(row[0], samples))[:samples]
        gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
        return gaps[len(gaps) // 2] if gaps else None

    def span(self) -> tuple[float, float] | None:
        """(first ts, last ts), or None for a recording with no items."""
        row = self._conn.execute("SELECT (SELECT min(ts) FROM items), "
                                 "(SELECT max(ts) FROM items)").fetchone()
        ends = [] if row is None or row[0] is None else [(float(row[0]), float(row[1]))]
        more = self._samples.span()
        if more is not None:
            ends.append(more)
        if not ends:
            return None
        return min(e[0] for e in ends), max(e[1] for e in ends)

    def count(self, kind: str | None = None) -> int:
        """Items in the recording (of one kind, if given)."""
        if kind is None:
            row = self._conn.execute("SELECT count(*) FROM items").fetchone()
        else:
            row = self._conn.execute("SELECT count(*) FROM items WHERE kind = ?",
                                     (kind,)).fetchone()
        more = self._samples.count() if kind in (None, "sample") else 0
        return int(row[0]) + more

    def stamped_late(self, kinds: Iterable[str] = ("connected", "hello"),
                     lookahead: int = 64) -> list[tuple[float, str, float, Item]]:
        """Items of ``kinds`` recorded before items of their host stamped earlier:
        (the earliest such stamp, host, own stamp, item), in recording order.

        A session's Connected and hello carry the console's and agent's clock when it
        opens, but a simulated host sends its backlog after them stamped in the past: the
        live console saw the hello first, so a replay must too.  Only the next
        ``lookahead`` items of the host are looked at (a backlog follows at once).
        """
        out: list[tuple[float, str, float, Item]] = []
        marks = ",".join("?" for _ in kinds)
        rows = self._conn.execute(f"SELECT id, host_id, ts, body FROM items WHERE kind IN "
                                  f"({marks}) ORDER BY id", tuple(kinds)).fetchall()
        for row_id, host_id, ts, body in rows:
            nxt = self._conn.execute(
                "SELECT min(ts) FROM (SELECT ts FROM items WHERE host_id = ? AND id > ? "
                "ORDER BY id LIMIT ?)", (host_id, row_id, lookahead)).fetchone()[0]
            blocks = self._samples.min_after(host_id, row_id, lookahead, before=ts)
            if blocks is not None:
                nxt = blocks if nxt is None else min(nxt, blocks)
            if nxt is None or nxt >= ts:
                continue
            try:
                item = self._body.unpack(body)
            except (codec.CodecError, zlib.error, ValueError, TypeError):
                continue
            out.append((float(nxt), self._host_name(host_id), float(ts), item))
        return out

    def count_between(self, since: float | None, until: float) -> int:
        """Items with ``since <= ts < until``, counted on the time index (nothing decoded)."""
        row = self._conn.execute("SELECT count(*) FROM items WHERE ts >= ? AND ts < ?",
                                 (float("-inf") if since is None else since, until)).fetchone()
        return int(row[0]) + self._samples.count_between(since, until)

    def time_before(self, until: float, n: int) -> float | None:
        """The ts of the ``n``-th item before ``until`` (counting back from it), None when
        there are fewer: where a stretch of ``n`` items ending at ``until`` begins."""
        n = max(1, n)
        times = [float(r[0]) for r in self._conn.execute(
            "SELECT ts FROM items WHERE ts < ? ORDER BY ts DESC LIMIT ?", (until, n))]
        if self._samples.present:
            times = sorted(times + self._samples.times_before(until, n), reverse=True)
        return times[n - 1] if len(times) >= n else None

    def next_time(self, kind: str, after_ts: float) -> float | None:
        """The ts of the first item of ``kind`` strictly after ``after_ts`` ("next finding")."""
        row = self._conn.execute("SELECT ts FROM items WHERE kind = ? AND ts > ? "
                                 "ORDER BY ts LIMIT 1", (kind, after_ts)).fetchone()
        found = [] if row is None else [float(row[0])]
        if kind == "sample" and (more := self._samples.next_time(after_ts)) is not None:
            found.append(more)
        return min(found) if found else None

    def prev_time(self, kind: str, before_ts: float) -> float | None:
        """The ts of the last item of ``kind`` strictly before ``before_ts``."""
        row = self._conn.execute("SELECT ts FROM items WHERE kind = ? AND ts < ? "
                                 "ORDER BY ts DESC LIMIT 1", (kind, before_ts)).fetchone()
        found = [] if row is None else [float(row[0])]
        if kind == "sample" and (more := self._samples.prev_time(before_ts)) is not None:
            found.append(more)
        return max(found) if found else None

    def items(self, since: float | None = None, until: float | None = None,
              kinds: Iterable[str] | None = None,
              skip: Callable[[str, str, float], bool] | None = None,
              ) -> Iterator[tuple[str, float, Item]]:
        """(host, ts, item) with ``since <= ts < until``, in time order (ties in recording
        order), fetched a few hundred rows at a time so memory stays flat on any file size.

        Each kind is read through the ``(kind, ts)`` index and the streams are merged, so
        "only findings" stays fast on a recording that is mostly samples.  ``skip(kind,
        host, ts)`` leaves a row out before it is decoded (a replay thinning a long past).
        """
        streams: list[Iterator[tuple[float, int, int, str, Any]]]
        if kinds is None:
            streams = [self._rows(since, until, None)]
            wanted = ["sample"]
        else:
            wanted = sorted(set(kinds))
            if not wanted:
                return
            streams = [self._rows(since, until, k) for k in wanted]
        if "sample" in wanted and self._samples.present:
            streams.append(self._samples.rows(since, until))
        rows = streams[0] if len(streams) == 1 else heapq.merge(*streams)
        unpack = self._body.unpack
        from_block = self._samples.decode
        for ts, _id, host_id, kind, body in rows:
            if skip is not None and skip(kind, self._host_name(host_id), ts):
                continue
            try:
                item = from_block(body) if type(body) is tuple else unpack(body)
            except (codec.CodecError, zlib.error, ValueError, TypeError, BlockError):
                self._skipped += 1
                continue
            yield self._host_name(host_id), ts, item

    def _rows(self, since: float | None, until: float | None,
              kind: str | None) -> Iterator[tuple[float, int, int, str, bytes]]:
        where: list[str] = []
        params: list[Any] = []
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        if since is not None:
            where.append("ts >= ?")
            params.append(since)
        if until is not None:
            where.append("ts < ?")
            params.append(until)
        sql = "SELECT ts, id, host_id, kind, body FROM items"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY ts, id"
        cur = self._conn.execute(sql, params)
        try:
            while True:
                batch = cur.fetchmany(_FETCH_ROWS)
                if not batch:
                    return
                yield from batch
        finally:
            cur.close()

    def _host_name(self, host_id: int) -> str:
        name = self._host_names.get(host_id)
        if name is None:
            self._host_names = {hid: n for hid, n in
                                self._conn.execute("SELECT id, name FROM hosts")}
            name = self._host_names.get(host_id, f"host-{host_id}")
        return name

    def _query_plan(self, kind: str | None = None) -> list[str]:
        """How SQLite runs :meth:`items` (for tests: no sort of the whole file)."""
        sql = "EXPLAIN QUERY PLAN SELECT ts, id, host_id, kind, body FROM items"
        params: tuple[Any, ...] = ()
        if kind is not None:
            sql += " WHERE kind = ?"
            params = (kind,)
        sql += " ORDER BY ts, id"
        return [str(r[-1]) for r in self._conn.execute(sql, params)]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
