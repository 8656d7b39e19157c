"""Reading a recording: time-ordered items, by kind, also while it is still being written.

Readers open the file read-only and never migrate it; a file of an older schema is opened
for recording once (:class:`probes.store.recording.Recorder`) to bring it up to date.

A recording may be someone else's file, so it is read as untrusted input
(:mod:`probes.store.untrusted`): its schema is checked before any query, each statement
runs on a time budget, rows and blocks inflate within caps, every string is cleaned as the
wire's are (host names included), and a row that cannot be read is skipped and counted
(``skipped``), never raised.  What goes wrong with the file itself is a ``RecordingError``.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from probes.config.fleet import HostSpec
from probes.store import recording_format as fmt
from probes.store.block_reader import DAMAGED, SampleTables
from probes.store.codec import Item
from probes.store.columns import BlockError, recorded_layout
from probes.store.recording_format import RecordingError
from probes.store.untrusted import MAX_TS, ROW_ERRORS, Guarded, open_checked

_FETCH_ROWS = 256
MAX_HOSTS = 100_000
"""The most hosts read from a file (a fleet is 1..10,000)."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _reading(method: Callable[Concatenate[RecordingReader, _P], _R]
             ) -> Callable[Concatenate[RecordingReader, _P], _R]:
    """A public read whose failure on the file (SQLite's error, a query out of time, a
    value of a type no recording holds) is one ``RecordingError``, never a traceback."""
    @functools.wraps(method)
    def read(self: RecordingReader, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise self._db.error(self._path, e) from None
        except (TypeError, ValueError, OverflowError) as e:
            raise RecordingError(f"{self._path}: a value no recording holds ({e})") from None
    return read


class RecordingReader:
    """Reads a recording, also while another process is still writing it (WAL)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        if not self._path.is_file():
            raise RecordingError(f"{self._path} is not a rigwatch recording (no such file)")
        if fmt.check_header(self._path):
            raise RecordingError(f"{self._path} is not a rigwatch recording (empty file)")
        self._db: Guarded = open_checked(self._path)
        self._conn = self._db
        try:
            version = fmt.schema_version(self._conn, self._path)
            if version not in fmt.READABLE_VERSIONS:
                fmt.refuse_version(self._path, version)
                raise RecordingError(f"{self._path} has schema version {version}; open it for "
                                     f"recording once to migrate it to {fmt.SCHEMA_VERSION}")
            self._meta = fmt.read_meta(self._conn)
            self._body = fmt.Body(fmt.stored_zdict(self._meta, self._path))
            try:
                self.gpu_numbers = recorded_layout(self._meta.get(fmt.GPU_NUMBERS_KEY))
                """Each GPU's moving columns in this recording's rows."""
            except BlockError as e:
                raise RecordingError(f"{self._path}: {e}") from None
            self._samples = SampleTables(self._conn, self._body, self.gpu_numbers)
        except sqlite3.Error as e:
            self._conn.close()
            raise self._db.error(self._path, e) from None
        except RecordingError:
            self._conn.close()
            raise
        self._host_names: dict[Any, str] = {}
        """The ``hosts`` table, id -> cleaned name."""
        self._strays: dict[Any, str] = {}
        """Names given to host ids of rows that no ``hosts`` row has."""
        self._host_ids: dict[str, Any] = {}
        self._hosts_top: Any = None
        self._skipped: set[int] = set()

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
        return len(self._skipped) + self._samples.damaged

    @property
    def full_resolution_from(self) -> float | None:
        """Samples before this time are kept as 15 s or 5 min buckets (None: all whole)."""
        return self._meta_float("full_resolution_from")

    def _meta_float(self, key: str) -> float | None:
        """A time kept in ``meta``; None when absent or not a time a recording has."""
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?",
                                     (key,)).fetchone()
            value = float(row[0]) if row else None
        except (sqlite3.Error, ValueError, TypeError):
            return None
        return value if value is not None and 0 <= value <= MAX_TS else None

    @property
    def dropped_before(self) -> float | None:
        """Retention deleted samples up to this time (None: nothing was deleted)."""
        return self._meta_float("dropped_before")

    @_reading
    def hosts(self) -> list[str]:
        """Host names in the order they were first recorded, cleaned (a name in someone
        else's file may hold escapes); one that cleans to an earlier one's gets its id."""
        self._load_hosts()
        return list(self._host_names.values())

    def _load_hosts(self) -> None:
        top = self._conn.execute("SELECT max(id) FROM hosts").fetchone()[0]
        if top == self._hosts_top and self._host_names:
            return  # no host added since (a recording being written adds them)
        self._hosts_top = top
        names: dict[Any, str] = {}
        seen: set[str] = set()
        for hid, raw in self._conn.execute("SELECT id, name FROM hosts ORDER BY id LIMIT ?",
                                           (MAX_HOSTS,)):
            name = fmt.clean_host_name(raw)
            if name in seen:
                name = fmt.clean_host_name(f"{name} #{hid}")
            seen.add(name)
            names[hid] = name
        self._host_names = names
        self._host_ids = {name: hid for hid, name in names.items()}

    @_reading
    def host_specs(self) -> list[HostSpec]:
        """Each recorded host as the recording console described it (tags, expected GPUs,
        pace); bare names for a recording made before specs were kept."""
        return fmt.decode_host_specs(self._meta.get(fmt.HOST_SPECS_KEY), self.hosts())

    @_reading
    def sample_spacing(self, host: str, samples: int = 33) -> float | None:
        """The usual seconds between ``host``'s samples (the median of its first few), in
        recording time; None with fewer than two.  A simulated host's are its simulated
        step: one minute per sample in the demo."""
        self._load_hosts()
        hid = self._host_ids.get(host)
        if hid is None:
            return None
        times = [float(r[0]) for r in self._conn.execute(
            "SELECT ts FROM items WHERE kind = 'sample' AND host_id = ? AND ts BETWEEN 0 "
            "AND ? ORDER BY ts LIMIT ?", (hid, MAX_TS, samples))]
        times = sorted(times + self._samples.first_times(hid, samples))[:samples]
        gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
        return gaps[len(gaps) // 2] if gaps else None

    @_reading
    def span(self) -> tuple[float, float] | None:
        """(first ts, last ts), or None for a recording with no items."""
        row = self._conn.execute("SELECT (SELECT min(ts) FROM items WHERE ts BETWEEN 0 AND ?),"
                                 " (SELECT max(ts) FROM items WHERE ts BETWEEN 0 AND ?)",
                                 (MAX_TS, MAX_TS)).fetchone()
        ends = [] if row is None or row[0] is None else [(float(row[0]), float(row[1]))]
        more = self._samples.span()
        if more is not None:
            ends.append(more)
        if not ends:
            return None
        return min(e[0] for e in ends), max(e[1] for e in ends)

    @_reading
    def count(self, kind: str | None = None) -> int:
        """Items in the recording (of one kind, if given)."""
        if kind is None:
            row = self._conn.execute("SELECT count(*) FROM items").fetchone()
        else:
            row = self._conn.execute("SELECT count(*) FROM items WHERE kind = ?",
                                     (kind,)).fetchone()
        more = self._samples.count() if kind in (None, "sample") else 0
        return int(row[0]) + more

    @_reading
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
                                  f"({marks}) AND ts BETWEEN 0 AND ? ORDER BY id",
                                  (*kinds, MAX_TS)).fetchall()
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
            except ROW_ERRORS:
                continue
            out.append((float(nxt), self._host_name(host_id), float(ts), item))
        return out

    @_reading
    def count_between(self, since: float | None, until: float) -> int:
        """Items with ``since <= ts < until``, counted on the time index (nothing decoded)."""
        row = self._conn.execute("SELECT count(*) FROM items WHERE ts >= ? AND ts < ?",
                                 (0.0 if since is None else since, until)).fetchone()
        return int(row[0]) + self._samples.count_between(since, until)

    @_reading
    def time_before(self, until: float, n: int) -> float | None:
        """The ts of the ``n``-th item before ``until`` (counting back from it), None when
        there are fewer: where a stretch of ``n`` items ending at ``until`` begins."""
        n = max(1, n)
        times = [float(r[0]) for r in self._conn.execute(
            "SELECT ts FROM items WHERE ts >= 0 AND ts < ? ORDER BY ts DESC LIMIT ?",
            (min(until, MAX_TS), n))]
        if self._samples.present:
            times = sorted(times + self._samples.times_before(until, n), reverse=True)
        return times[n - 1] if len(times) >= n else None

    @_reading
    def next_time(self, kind: str, after_ts: float) -> float | None:
        """The ts of the first item of ``kind`` strictly after ``after_ts`` ("next finding")."""
        row = self._conn.execute("SELECT ts FROM items WHERE kind = ? AND ts > ? AND ts <= ? "
                                 "ORDER BY ts LIMIT 1", (kind, after_ts, MAX_TS)).fetchone()
        found = [] if row is None else [float(row[0])]
        if kind == "sample" and (more := self._samples.next_time(after_ts)) is not None:
            found.append(more)
        return min(found) if found else None

    @_reading
    def prev_time(self, kind: str, before_ts: float) -> float | None:
        """The ts of the last item of ``kind`` strictly before ``before_ts``."""
        row = self._conn.execute("SELECT ts FROM items WHERE kind = ? AND ts >= 0 AND ts < ? "
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
        A row that does not decode is skipped and counted (``skipped``).

        Raises:
            RecordingError: the file itself failed (a query ran out of time, SQLite's error).
        """
        for host, ts, item in self.entries(since, until, kinds, skip):
            if item is not None:
                yield host, ts, item

    def entries(self, since: float | None = None, until: float | None = None,
                kinds: Iterable[str] | None = None,
                skip: Callable[[str, str, float], bool] | None = None,
                pause_s: float | None = None) -> Iterator[tuple[str, float, Item | None]]:
        """:meth:`items`, and with ``pause_s`` also ``(host, ts, None)`` whenever skipping
        unreadable rows has taken that long since the last yield: a caller on an event loop
        (the replay) gets control back however many bad rows a hostile file holds in a row.

        Raises:
            RecordingError: the file itself failed (a query ran out of time, SQLite's error).
        """
        streams: list[Iterator[tuple[float, int, Any, Any, Any]]]
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
        resumed = time.monotonic()
        try:
            for ts, _id, host_id, kind, body in rows:
                if kind is DAMAGED:  # a block that did not decode (counted where it failed)
                    pass
                elif skip is not None and skip(kind, self._host_name(host_id), ts):
                    continue
                else:
                    try:
                        item = from_block(body) if type(body) is tuple else unpack(body)
                    except ROW_ERRORS:
                        self._skipped.add(_id)  # a row read again (a seek back) counts once
                    else:
                        yield self._host_name(host_id), ts, item
                        resumed = time.monotonic()
                        continue
                if pause_s is not None and time.monotonic() - resumed > pause_s:
                    yield self._host_name(host_id), ts, None
                    resumed = time.monotonic()
        except sqlite3.Error as e:
            raise self._db.error(self._path, e) from None
        except TypeError as e:  # ids or times of types no recording holds, compared
            raise RecordingError(f"{self._path}: rows no recording holds ({e})") from None

    def _select(self, since: float | None, until: float | None,
                kind: str | None) -> tuple[str, list[Any]]:
        """The query of one stream of :meth:`items`: through the time (or kind and time)
        index, over times a recording can hold (a row stamped otherwise is never read)."""
        where = ["ts >= ?", "ts < ?" if until is not None else "ts <= ?"]
        params: list[Any] = [max(0.0, since) if since is not None else 0.0,
                             until if until is not None else MAX_TS]
        if kind is not None:
            where.insert(0, "kind = ?")
            params.insert(0, kind)
        sql = "SELECT ts, id, host_id, kind, body FROM items WHERE " + " AND ".join(where)
        return sql + " ORDER BY ts, id", params

    def _rows(self, since: float | None, until: float | None,
              kind: str | None) -> Iterator[tuple[float, int, Any, Any, Any]]:
        cur = self._conn.execute(*self._select(since, until, kind))
        try:
            while True:
                self._db.arm()  # each batch is a statement's work, however long we paused
                batch = cur.fetchmany(_FETCH_ROWS)
                if not batch:
                    return
                yield from batch
        finally:
            cur.close()

    def _host_name(self, host_id: Any) -> str:
        name = self._host_names.get(host_id) or self._strays.get(host_id)
        if name is None:
            self._load_hosts()
            name = self._host_names.get(host_id)
            if name is None:  # a row of no recorded host: named by its id, cleaned
                name = self._strays[host_id] = fmt.clean_host_name(f"host-{host_id}")
        return name

    def _query_plan(self, kind: str | None = None) -> list[str]:
        """How SQLite runs :meth:`items` (for tests: no sort of the whole file)."""
        sql, params = self._select(None, None, kind)
        return [str(r[-1]) for r in self._conn.execute("EXPLAIN QUERY PLAN " + sql, params)]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
