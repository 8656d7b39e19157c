"""Session recordings: every item a live session sees, kept in one SQLite file per run.

A recording is what lets an operator rewind to the minutes before an incident, so the
console records by default (in ``default_directory()``) and recording must never get in the
UI's way:

* :meth:`Recorder.record` only appends to an in-memory queue; a writer thread encodes,
  compresses and commits the queue in one transaction at least every ``flush_interval_s``.
  The file is in WAL mode with ``synchronous=NORMAL``: a commit survives the process being
  killed (``kill -9`` loses at most the items of the last interval), though not a power cut.
* A full disk pauses the recording (``paused``, with the reason): what arrives meanwhile is
  dropped, and the writer tries again every ``PAUSE_RETRY_S`` once ``RESUME_FREE_BYTES`` are
  free, so recording resumes by itself when space returns.  Any other write error (read-only
  file, I/O error) stops it with a reason in :attr:`Recorder.status`; ``record`` then does
  nothing.  Nothing is raised into the UI.
* Samples are staged each second and packed a minute at a time into columnar blocks
  (:mod:`probes.store.block_writer`, :mod:`probes.store.columns`): about 50-100 bytes per
  8-GPU host-sample instead of 750-900 as whole rows.
* Tiers (``tiers``) turn whole samples older than 48 h of recording time into 15 s, then
  5 min, min/max/mean buckets (:mod:`probes.store.thinning`); retention (``max_age_s``,
  ``max_bytes``, :mod:`probes.store.retention`) deletes by age, and over the size buckets the
  oldest whole samples first, then deletes the oldest samples, other items last; both are
  checked by the writer about once a minute.  Freed pages are reused by later items rather
  than given back (no ``VACUUM``, no ``auto_vacuum``): the file stops growing at about
  ``max_bytes`` but does not shrink below its peak size.
* The file's layout and row codec are :mod:`probes.store.recording_format`; reading is
  :mod:`probes.store.recording_reader`.

Files are created 0600 in a 0700 directory (SQLite gives its ``-wal``/``-shm`` files the
database's mode): a recording holds host names, log lines and process owners.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import errno
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from probes.config.fleet import HostSpec
from probes.store import codec
from probes.store import recording_format as fmt
from probes.store.block_writer import SamplePacker
from probes.store.codec import Item
from probes.store.columns import GPU_NUMBERS, BlockError, recorded_layout
from probes.store.recording_format import RECORDING_SUFFIX, RecordingError
from probes.store.recording_reader import RecordingReader
from probes.store.retention import apply_retention
from probes.store.thinning import DEFAULT_TIERS, TierSpans, thin, thin_oldest
from probes.wire.samples import HostSample

_RETENTION_BUDGET_S = 0.25
"""Longest the writer spends deleting before it commits new items again."""
_EARLY_FLUSH_ITEMS = 5000
"""A queue this long is flushed without waiting for the interval."""


State = Literal["recording", "paused", "stopped", "off"]
PAUSE_RETRY_S = 5.0
"""A recording paused by a full disk tries again this often."""
RESUME_FREE_BYTES = 256 * 1024
"""…once at least this much is free where the file lives."""


@dataclass(frozen=True)
class RecordingStatus:
    """What the status bar shows about recording.

    ``recording``: the writer is running.  ``paused``: the disk is full; ``reason`` says so and
    recording resumes when space returns.  ``stopped``: a write failed and recording gave up;
    ``reason`` says why.  ``off``: not recording by choice (closed, or never started).
    ``items_written`` counts what this recorder committed; ``bytes`` is the file's size on
    disk with its WAL.
    """

    state: State
    path: Path | None
    reason: str | None = None
    items_written: int = 0
    bytes: int = 0
    dropped: int = 0
    """Items left out while paused."""

    @classmethod
    def off(cls, reason: str | None = None, path: Path | None = None) -> RecordingStatus:
        """The status of a session that does not record (``--no-record``, or open failed)."""
        return cls("off", path, reason)


def default_directory() -> Path:
    """Where live sessions record: ``<user data dir>/rigwatch/recordings``."""
    import platformdirs

    return Path(platformdirs.user_data_dir("rigwatch")) / "recordings"


def fleet_fingerprint(entries: Iterable[str]) -> str:
    """A short stable key for an inventory (order and duplicates do not matter), so a
    restart on the same inventory finds the recording to resume."""
    text = "\n".join(sorted(set(entries)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def new_recording_path(directory: str | os.PathLike[str], name: str,
                       now: float | None = None) -> Path:
    """A fresh file name in ``directory``: ``<local time>-<name>.sqlite3``, never an
    existing file, with ``name`` reduced to characters safe on any file system."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60] or "fleet"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    base = Path(directory)
    path = base / f"{stamp}-{safe}{RECORDING_SUFFIX}"
    n = 2
    while path.exists():
        path = base / f"{stamp}-{safe}-{n}{RECORDING_SUFFIX}"
        n += 1
    return path


def find_resumable(directory: str | os.PathLike[str], fleet_key: str, max_age_s: float,
                   now: float | None = None) -> Path | None:
    """The newest recording of this fleet whose last item is at most ``max_age_s`` old.

    Files that are not recordings, or that this version cannot read, are passed over.
    """
    base = Path(directory)
    if not base.is_dir():
        return None
    now = time.time() if now is None else now
    best: tuple[float, Path] | None = None
    for path in base.glob(f"*{RECORDING_SUFFIX}"):
        try:
            with RecordingReader(path) as reader:
                if reader.fleet_key != fleet_key or reader.gpu_numbers is not GPU_NUMBERS:
                    continue
                span = reader.span()
                last = span[1] if span is not None else reader.created_ts
        except (RecordingError, OSError, sqlite3.Error):
            continue
        if last is None or now - last > max_age_s:
            continue
        if best is None or last > best[0]:
            best = (last, path)
    return None if best is None else best[1]


def _layout_of(meta: dict[str, str]) -> tuple[str, ...] | None:
    try:
        return recorded_layout(meta.get(fmt.GPU_NUMBERS_KEY))
    except BlockError:
        return None


def _file_bytes(path: Path) -> int:
    total = 0
    for p in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            total += p.stat().st_size
    return total


def _describe_error(e: BaseException) -> str:
    """A write error as the status bar says it."""
    name = getattr(e, "sqlite_errorname", "")
    err = getattr(e, "errno", None)
    text = str(e) or type(e).__name__
    if name == "SQLITE_FULL" or err in (errno.ENOSPC, errno.EDQUOT) or "disk is full" in text:
        return f"disk full: {text}"
    if name == "SQLITE_READONLY" or err in (errno.EROFS, errno.EACCES) or "readonly" in text:
        return f"read-only: {text}"
    return f"write failed: {text}"


def _is_full(e: BaseException) -> bool:
    return _describe_error(e).startswith("disk full")


_OPEN: weakref.WeakSet[Recorder] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """An exit without ``close()`` still commits what was queued."""
    for rec in list(_OPEN):
        rec.close()


class Recorder:
    """Appends a session's items to a recording from a background writer thread.

    Creating a Recorder opens (or creates) the file and checks its schema; that is the only
    place it raises (:class:`RecordingError`).  Reopening a file appends to it.
    """

    def __init__(self, path: str | os.PathLike[str], fleet_key: str, hosts: Iterable[str],
                 *, flush_interval_s: float = 1.0, max_age_s: float | None = None,
                 max_bytes: int | None = None, retention_interval_s: float = 60.0,
                 max_pending: int = 500_000, clock: Callable[[], float] = time.time,
                 tiers: TierSpans | None = DEFAULT_TIERS) -> None:
        """Open the recording and start the writer.

        Args:
            path: the file; its directory is created 0700 if missing.
            fleet_key: the inventory's fingerprint (:func:`fleet_fingerprint`); reopening a
                file of another fleet is refused.
            hosts: the inventory's hosts, in order; hosts seen later are added as they come.
            flush_interval_s: longest time an item waits in memory.
            max_age_s: delete items whose ``ts`` is older than ``clock() - max_age_s``.
            max_bytes: delete the oldest items while the live pages exceed this, if set.
            retention_interval_s: how often the writer checks retention.
            max_pending: a queue this long means the disk cannot keep up: recording stops.
            clock: wall time for retention by age (tests pass their own).
            tiers: how long whole samples and 15 s buckets are kept before they are
                thinned (:mod:`probes.store.thinning`); None keeps every sample whole.
        """
        self._tiers = tiers
        self._path = Path(path)
        self._flush_interval_s = flush_interval_s
        self._max_age_s = max_age_s
        self._max_bytes = max_bytes
        self._retention_interval_s = retention_interval_s
        self._max_pending = max_pending
        self._clock = clock
        self._pending: deque[tuple[str, float, Item]] = deque()
        self._meta_pending: dict[str, str] = {}
        self._meta_lock = threading.Lock()
        self._accepting = True
        self._state: State = "recording"
        self._reason: str | None = None
        self._items_written = 0
        self._skipped = 0
        self._dropped = 0
        self._bytes = 0
        self._cpu_s = 0.0
        self._wake = threading.Event()
        self._stopping = False
        self._packer: SamplePacker
        self._conn, self._body, self._host_ids = self._open(fleet_key, list(hosts))
        self._bytes = _file_bytes(self._path)
        self._thread = threading.Thread(target=self._run, name="rigwatch-recorder", daemon=True)
        _OPEN.add(self)
        self._thread.start()

    # -- the UI thread's side ------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def status(self) -> RecordingStatus:
        return RecordingStatus(self._state, self._path, self._reason, self._items_written,
                               self._bytes, self._dropped)

    @property
    def skipped(self) -> int:
        """Items the codec could not encode (left out; the recording goes on)."""
        return self._skipped

    @property
    def writer_cpu_s(self) -> float:
        """CPU time the writer thread has used on flushes, for benchmarks."""
        return self._cpu_s

    def record(self, host: str, ts: float, item: Item) -> None:
        """Queue one item; never blocks on disk and never raises."""
        if not self._accepting:
            return
        if self._state == "paused":
            self._dropped += 1
            return
        pending = self._pending
        pending.append((host, ts, item))
        n = len(pending)
        if n >= _EARLY_FLUSH_ITEMS:
            if n >= self._max_pending:
                self._accepting = False
                self._fail_reason = f"the disk cannot keep up: {n} items waiting"
            self._wake.set()

    def describe_hosts(self, specs: Iterable[HostSpec]) -> None:
        """Keep the hosts' specs (tags, expected GPUs, pace) with the recording, for a replay.

        Written by the writer with its next commit; the newest description replaces the last
        (a resumed recording takes the inventory as it is now).
        """
        text = fmt.encode_host_specs(specs)
        with self._meta_lock:
            self._meta_pending[fmt.HOST_SPECS_KEY] = text
        self._wake.set()

    def close(self, timeout_s: float | None = 10.0) -> None:
        """Commit what is queued and stop the writer (idempotent)."""
        self._accepting = False
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        _OPEN.discard(self)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- opening -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        """The writer's connection (tests override this to inject failures)."""
        conn = sqlite3.connect(self._path, timeout=5.0, isolation_level=None,
                               check_same_thread=False)
        return conn

    def _open(self, fleet_key: str,
              hosts: list[str]) -> tuple[sqlite3.Connection, fmt.Body, dict[str, int]]:
        path = self._path
        try:
            if not path.parent.is_dir():
                path.parent.mkdir(parents=True, mode=0o700)
                os.chmod(path.parent, 0o700)
            if not path.exists():
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                try:
                    os.fchmod(fd, 0o600)
                finally:
                    os.close(fd)
        except OSError as e:
            raise RecordingError(f"cannot create recording {path}: {e.strerror or e}") from None
        fmt.check_header(path)
        try:
            conn = self._connect()
        except sqlite3.Error as e:
            raise RecordingError(f"cannot open recording {path}: {e}") from None
        try:
            body, host_ids = self._prepare(conn, fleet_key, hosts)
        except RecordingError:
            conn.close()
            raise
        except sqlite3.DatabaseError as e:
            conn.close()
            raise RecordingError(f"cannot open recording {path}: {e}") from None
        return conn, body, host_ids

    def _prepare(self, conn: sqlite3.Connection, fleet_key: str,
                 hosts: list[str]) -> tuple[fmt.Body, dict[str, int]]:
        path = self._path
        version = fmt.schema_version(conn, path)
        fmt.refuse_version(path, version)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RecordingError(f"cannot open recording {path}: WAL mode refused ({mode})")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA journal_size_limit=16777216")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for v in range(version + 1, fmt.SCHEMA_VERSION + 1):
                fmt.MIGRATIONS[v](conn)
            if version < fmt.SCHEMA_VERSION:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                             (str(fmt.SCHEMA_VERSION),))
            meta = fmt.read_meta(conn)
            if "fleet_key" not in meta:
                zid, zdict = fmt.build_zdict()
                now = time.time()
                rows = {"fleet_key": fleet_key, "created_ts": repr(now),
                        fmt.GPU_NUMBERS_KEY: json.dumps(list(GPU_NUMBERS)),
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                        "zdict_id": zid, "zdict": base64.b64encode(zdict).decode("ascii")}
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", rows.items())
                meta.update(rows)
            elif meta["fleet_key"] != fleet_key:
                raise RecordingError(f"{path} belongs to another fleet "
                                     f"({meta['fleet_key']}, not {fleet_key})")
            elif _layout_of(meta) is not GPU_NUMBERS:  # its rows would mix two layouts
                raise RecordingError(f"{path} was recorded with other GPU columns "
                                     "(another rigwatch version): record to a new file")
            body = fmt.Body(fmt.stored_zdict(meta, path))
            conn.executemany("INSERT OR IGNORE INTO hosts(name) VALUES (?)",
                             [(h,) for h in hosts])
            self._packer = SamplePacker(conn, body)
            self._packer.recover()  # what a killed recorder left staged
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        host_ids = {name: hid for hid, name in conn.execute("SELECT id, name FROM hosts")}
        return body, host_ids

    # -- the writer thread ---------------------------------------------------------------

    _fail_reason: str | None = None

    def _run(self) -> None:
        next_retention = time.monotonic()
        try:
            while True:
                next_flush = time.monotonic() + self._flush_interval_s
                if self._fail_reason is not None:
                    self._stop(self._fail_reason)
                    return
                if self._state == "paused":
                    if self._stopping or not self._wait_for_space():
                        return
                    continue
                if self._retention_due(next_retention):
                    next_retention = time.monotonic() + self._retention_interval_s
                    if not self._apply_retention():
                        next_retention = time.monotonic()
                if self._stopping:
                    self._flush(closing=True)
                    if self._max_age_s is not None or self._max_bytes is not None \
                            or self._tiers is not None:
                        self._apply_retention()  # the last batch may have crossed the limit
                    return
                self._wake.wait(max(0.0, next_flush - time.monotonic()))
                self._wake.clear()
                try:
                    self._flush()
                except Exception as e:
                    if not _is_full(e):
                        raise
                    self._pause(_describe_error(e))
        except Exception as e:  # any other failure stops recording, visibly
            self._stop(_describe_error(e))
        finally:
            self._finish()

    def _pause(self, reason: str) -> None:
        """The disk is full: drop what waits, keep the file as committed, try again later."""
        self._dropped += len(self._pending)
        self._pending.clear()
        self._reason = f"{reason} (paused: resumes when space returns)"
        self._state = "paused"
        self._checkpoint()

    def _checkpoint(self) -> None:
        """Fold the WAL into the file and cut it to nothing: on a small disk the WAL (which
        only checkpoints by itself at 1,000 pages) is what fills it."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _wait_for_space(self) -> bool:
        """One wait of a paused writer, then one try to resume; False when it should end."""
        self._wake.wait(PAUSE_RETRY_S)
        self._wake.clear()
        if self._stopping:
            return False
        try:
            st = os.statvfs(self._path.parent)
        except OSError:
            return True
        if st.f_bavail * st.f_frsize < RESUME_FREE_BYTES:
            return True
        self._checkpoint()
        try:  # what was packed in memory for the failed commit is gone: start afresh
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._packer = SamplePacker(conn, self._body)
                self._packer.recover()
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('resumed_ts', ?)",
                             (repr(time.time()),))
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except Exception as e:
            if not _is_full(e):
                raise
            return True  # still full: stay paused
        self._state, self._reason = "recording", None
        return True

    def _retention_due(self, when: float) -> bool:
        if self._max_age_s is None and self._max_bytes is None and self._tiers is None:
            return False
        return time.monotonic() >= when

    def _flush(self, closing: bool = False) -> None:
        pending = self._pending
        n = len(pending)
        if self._meta_pending and self._state == "recording":
            self._write_meta()
        if (not n and not closing) or self._state != "recording":
            return
        cpu0 = time.thread_time()
        rows = []
        body = self._body
        conn = self._conn
        packer = self._packer
        add_sample = packer.add
        written = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            popleft = pending.popleft
            for _ in range(n):
                host, ts, item = popleft()
                hid = self._host_ids.get(host)
                if hid is None:
                    hid = self._add_host(host)
                if type(item) is HostSample and add_sample(hid, ts, item):
                    written += 1
                    continue
                try:
                    kind, blob = body.pack(item)
                except (codec.CodecError, TypeError, ValueError):
                    self._skipped += 1
                    continue
                rows.append((packer.item_written(hid, kind), hid, ts, kind, blob))
            conn.executemany("INSERT INTO items(id, host_id, ts, kind, body) "
                             "VALUES (?, ?, ?, ?, ?)", rows)
            packer.flush(closing)
            conn.execute("COMMIT")
        except BaseException:
            packer.rollback()
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self._items_written += len(rows) + written
        self._bytes = _file_bytes(self._path)
        self._cpu_s += time.thread_time() - cpu0

    def _write_meta(self) -> None:
        with self._meta_lock:
            meta, self._meta_pending = self._meta_pending, {}
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _add_host(self, host: str) -> int:
        self._conn.execute("INSERT OR IGNORE INTO hosts(name) VALUES (?)", (host,))
        hid = int(self._conn.execute("SELECT id FROM hosts WHERE name = ?", (host,)).fetchone()[0])
        self._host_ids[host] = hid
        return hid

    def _apply_retention(self) -> bool:
        """Delete what retention says must go; False if the time budget ran out first."""
        conn, body = self._conn, self._body
        newest = self._packer.newest  # tiers count back from the newest sample, not the
        done = (self._tiers is None or newest is None  # wall clock: a replayed past stays
                or thin(conn, body, newest, self._tiers, _RETENTION_BUDGET_S / 2))
        done = apply_retention(conn, self._max_age_s, self._max_bytes, self._clock,
                               _RETENTION_BUDGET_S / 2,
                               None if self._tiers is None else lambda: thin_oldest(conn, body)
                               ) and done
        self._bytes = _file_bytes(self._path)
        return done

    def _stop(self, reason: str) -> None:
        self._accepting = False
        self._reason = reason
        self._state = "stopped"
        self._pending.clear()

    def _finish(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        if self._state == "recording":
            self._state = "off"
        self._accepting = False
        self._bytes = _file_bytes(self._path)
