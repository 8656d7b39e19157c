"""Session recordings: every item a live session sees, kept in one SQLite file per run.

A recording is what lets an operator rewind to the minutes before an incident, so the
console records by default (in ``default_directory()``) and recording must never get in the
UI's way:

* :meth:`Recorder.record` only appends to an in-memory queue; a writer thread encodes,
  compresses and commits the queue in one transaction at least every ``flush_interval_s``.
  The file is in WAL mode with ``synchronous=NORMAL``: a commit survives the process being
  killed (``kill -9`` loses at most the items of the last interval), though not a power cut.
* Any write error (disk full, read-only file, I/O error) stops the recording with a reason
  in :attr:`Recorder.status`; ``record`` then does nothing.  Nothing is raised into the UI.
* Retention (``max_age_s``, ``max_bytes``) deletes the oldest items in batches, checked by
  the writer about once a minute.  Freed pages are reused by later items rather than given
  back (no ``VACUUM``, no ``auto_vacuum``): the file stops growing at about ``max_bytes`` but
  does not shrink below its peak size.
* Rows are ``zlib`` raw-deflate of compact JSON from :mod:`probes.store.codec`, primed with a
  preset dictionary built from typical items.  The dictionary is stored in the file's
  ``meta`` table with its id, so a reader never depends on this version's dictionary.

Files are created 0600 in a 0700 directory (SQLite gives its ``-wal``/``-shm`` files the
database's mode): a recording holds host names, log lines and process owners.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import errno
import hashlib
import heapq
import json
import os
import re
import sqlite3
import threading
import time
import weakref
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

try:
    import orjson as _orjson
except ImportError:  # the standard library's json, slower
    _orjson = None  # type: ignore[assignment]

from probes.analysis.findings import Finding
from probes.errors import RigwatchError
from probes.store import codec
from probes.store.codec import Item
from probes.triage import Severity, Step
from probes.wire.samples import (
    DiskStats,
    GpuInfo,
    GpuProcess,
    GpuSample,
    Hello,
    HostFacts,
    HostSample,
    HostStats,
    LogEvent,
    PcieLink,
    ProbeStatus,
)

SCHEMA_VERSION = 1
"""The layout this module writes and reads."""

APPLICATION_ID = 0x52574331
"""``PRAGMA application_id`` of a recording ("RWC1"), so ``file(1)``-style tools can tell."""

RECORDING_SUFFIX = ".sqlite3"

SQLITE_MAGIC = b"SQLite format 3\x00"

_ZDICT_VERSION = 1
"""Bump when ``_typical_items`` changes, so dictionary ids stay distinct."""

_RAW_DEFLATE = -15
"""Raw deflate: no zlib header or checksum, which are a noticeable part of a small row."""

_COMPRESS_LEVEL = 6
_FETCH_ROWS = 256
_DELETE_BATCH = 2000
_RETENTION_BUDGET_S = 0.25
"""Longest the writer spends deleting before it commits new items again."""
_EARLY_FLUSH_ITEMS = 5000
"""A queue this long is flushed without waiting for the interval."""


class RecordingError(RigwatchError):
    """A file that cannot be opened as a recording; the message is one line for the UI."""

    title = "Recording unusable"


State = Literal["recording", "stopped", "off"]


@dataclass(frozen=True)
class RecordingStatus:
    """What the status bar shows about recording.

    ``recording``: the writer is running.  ``stopped``: a write failed and recording gave up;
    ``reason`` says why.  ``off``: not recording by choice (closed, or never started).
    ``items_written`` counts what this recorder committed; ``bytes`` is the file's size on
    disk with its WAL.
    """

    state: State
    path: Path | None
    reason: str | None = None
    items_written: int = 0
    bytes: int = 0

    @classmethod
    def off(cls, reason: str | None = None, path: Path | None = None) -> RecordingStatus:
        """The status of a session that does not record (``--no-record``, or open failed)."""
        return cls("off", path, reason)


Migration = Callable[[sqlite3.Connection], None]


def _create_v1(conn: sqlite3.Connection) -> None:
    """Version 0 (an empty file) -> 1: the first layout."""
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE hosts(id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
    conn.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, host_id INTEGER, ts REAL, "
                 "kind TEXT, body BLOB)")
    conn.execute("CREATE INDEX items_ts ON items(ts)")
    conn.execute("CREATE INDEX items_kind_ts ON items(kind, ts)")
    conn.execute("INSERT INTO meta VALUES ('app', 'rigwatch')")


_MIGRATIONS: dict[int, Migration] = {1: _create_v1}
"""Target version -> the step that brings a file there from the version before.

Opening a file at version ``v`` runs steps ``v+1 … SCHEMA_VERSION`` in one transaction; a
missing step means the file is too old to migrate.  A new file is version 0.
"""


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
                if reader.fleet_key != fleet_key:
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


def _typical_items() -> list[Item]:
    """Items like the ones a recording is full of, to build the preset dictionary from.

    Two GPUs are enough: later GPUs in a row refer back to the first one.
    """
    gpus = tuple(
        GpuSample(index=i, uuid=f"GPU-3e402b14-2484-beac-717e-b0905390241{i}",
                  mem_used_mib=60000.0, mem_total_mib=81559.0, util_pct=97.7, mem_util_pct=53.7,
                  temp_c=66.2, power_w=615.9, power_limit_w=700.0, sm_clock_mhz=1980.0,
                  sm_clock_max_mhz=1980.0, pcie_gen=5, pcie_gen_max=5, pcie_width=16,
                  pcie_width_max=16, temp_mem_c=72.2, mem_clock_mhz=2619.0,
                  mem_clock_max_mhz=2619.0, pstate="P0", ecc_corrected_volatile=0,
                  ecc_uncorrected_volatile=0, ecc_corrected_aggregate=0,
                  ecc_uncorrected_aggregate=0, remap_correctable=0, remap_uncorrectable=0,
                  remap_pending=False, remap_failure=False, nvlink_up=18, nvlink_links=18,
                  persistence=True, pcie_replay=0, pcie_tx_kbs=1234.5, pcie_rx_kbs=2345.6,
                  clock_reasons=("sw_power_cap",),
                  processes=(GpuProcess(pid=41000, name="python", user="train",
                                        used_mib=59480.0),))
        for i in range(2))
    sample = HostSample(
        ts=1796278170.120346, seq=12345, gpus=gpus,
        host=HostStats(cpu_pct=33.8, load1=38.6, load5=40.5, load15=40.1,
                       mem_used_bytes=451903942997, mem_total_bytes=2199023255552,
                       swap_used_bytes=0, swap_total_bytes=8589934592, swap_in_pages_s=0.0,
                       swap_out_pages_s=0.0),
        disks=tuple(DiskStats(name=n, r_s=833.3, w_s=3.0, rkb_s=218260.2, wkb_s=24.0,
                              r_await=0.5, w_await=0.3, aqu_sz=0.33, util=17.9)
                    for n in ("nvme0n1", "sda")))
    link = PcieLink(address="0000:18:00.0", speed_gts=32.0, width=16, max_speed_gts=32.0,
                    max_width=16, numa_node=0, local_cpulist="0-55,112-167")
    hello = Hello(
        ts=1796278170.1207213, protocol=1, agent_version="0.1.0",
        facts=HostFacts(hostname="node-01", kernel="5.15.0-119-generic",
                        os_name="Ubuntu 22.04.4 LTS", python="3.11.7",
                        driver_version="550.90.07", cuda_version="12.4",
                        cpu_model="Intel(R) Xeon(R) Platinum 8480+", cpu_cores_logical=224,
                        cpu_cores_physical=112, mem_total_bytes=2199023255552,
                        swap_total_bytes=8589934592,
                        gpus=(GpuInfo(index=0, uuid="GPU-3e402b14-2484-beac-717e-b09053902419",
                                      bus_id="0000:18:00.0", name="NVIDIA H100 80GB HBM3",
                                      mem_total_mib=81559.0, temp_slowdown_c=90.0,
                                      temp_shutdown_c=92.0, pcie_gen_max_gpu=5,
                                      persistence_mode=True, ecc_mode=True, mig_mode=False,
                                      power_limit_default_w=700.0),),
                        probes=(ProbeStatus(name="nvml", available=True),)),
        pcie={"0000:18:00.0": (link,)})
    event = LogEvent(ts=1796278171.5, source="kernel",
                     line="NVRM: Xid (PCI:0000:18:00): 79, pid=41000, GPU has fallen off the bus.",
                     boot="0b5c1f2e-8d7a-4c3b-9e6f-1a2b3c4d5e6f")
    finding = Finding(Step.GPU, "clocks-throttled", Severity.WARNING,
                      "GPU 0 throttled: hw_slowdown at 1410/1980 MHz", "node-01", gpu=0,
                      ts=1796278171.5, action="Check cooling and power delivery.")
    # Least frequent first: deflate finds the nearest (cheapest) match at the end.
    return [hello, finding, event, sample]


def _build_zdict() -> tuple[str, bytes]:
    parts = [_dumps(codec.encode(item)) for item in _typical_items()]
    data = b"".join(parts)[-32768:]
    digest = hashlib.sha256(data).hexdigest()[:12]
    return f"v{_ZDICT_VERSION}-{digest}", data


def _dumps(data: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON of one encoded item.

    orjson writes it nine times faster than ``json`` (7 against 67 µs for an 8-GPU sample:
    half the writer thread's time, which holds the GIL the UI needs).  Items hold only
    finite numbers (the protocol refuses the others), so orjson's NaN-as-null never
    applies; what it refuses (an integer over 64 bits, a lone surrogate) goes to ``json``,
    as before.
    """
    if _orjson is not None:
        try:
            return _orjson.dumps(data)
        except (TypeError, _orjson.JSONEncodeError):
            pass
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _Body:
    """Packs and unpacks rows with one file's dictionary."""

    def __init__(self, zdict: bytes) -> None:
        self.zdict = zdict

    def pack(self, item: Item) -> tuple[str, bytes]:
        data = codec.encode(item)
        c = zlib.compressobj(_COMPRESS_LEVEL, zlib.DEFLATED, _RAW_DEFLATE, zdict=self.zdict)
        return data[codec.TAG_KEY], c.compress(_dumps(data)) + c.flush()

    def unpack(self, body: bytes) -> Item:
        d = zlib.decompressobj(_RAW_DEFLATE, zdict=self.zdict)
        raw = d.decompress(body) + d.flush()
        return codec.decode(json.loads(raw))


def _check_header(path: Path) -> bool:
    """True when the file is empty (a new recording); RecordingError unless it is SQLite."""
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise RecordingError(f"cannot open recording {path}: {e.strerror or e}") from None
    if not head:
        return True
    if head != SQLITE_MAGIC:
        raise RecordingError(f"{path} is not a rigwatch recording (not an SQLite file)")
    return False


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version; 0 for a database with no tables yet."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return 0
        if "meta" not in tables:
            raise RecordingError(f"{path} is not a rigwatch recording (no meta table)")
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN "
                                 "('app', 'schema_version')").fetchall())
    except sqlite3.DatabaseError as e:
        raise RecordingError(f"{path} is not a rigwatch recording ({e})") from None
    if meta.get("app") != "rigwatch":
        raise RecordingError(f"{path} is not a rigwatch recording (no rigwatch meta)")
    try:
        return int(meta.get("schema_version", ""))
    except ValueError:
        raise RecordingError(f"{path} is not a rigwatch recording "
                             f"(schema_version {meta.get('schema_version')!r})") from None


def _refuse_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise RecordingError(f"{path} has schema version {version}, newer than the supported "
                             f"version {SCHEMA_VERSION}: open it with a newer rigwatch")
    missing = [v for v in range(version + 1, SCHEMA_VERSION + 1) if v not in _MIGRATIONS]
    if missing:
        raise RecordingError(f"{path} has schema version {version}, which cannot be migrated "
                             f"to the supported version {SCHEMA_VERSION}")


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


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
                 max_pending: int = 500_000, clock: Callable[[], float] = time.time) -> None:
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
        """
        self._path = Path(path)
        self._flush_interval_s = flush_interval_s
        self._max_age_s = max_age_s
        self._max_bytes = max_bytes
        self._retention_interval_s = retention_interval_s
        self._max_pending = max_pending
        self._clock = clock
        self._pending: deque[tuple[str, float, Item]] = deque()
        self._accepting = True
        self._state: State = "recording"
        self._reason: str | None = None
        self._items_written = 0
        self._skipped = 0
        self._bytes = 0
        self._cpu_s = 0.0
        self._wake = threading.Event()
        self._stopping = False
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
                               self._bytes)

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
        pending = self._pending
        pending.append((host, ts, item))
        n = len(pending)
        if n >= _EARLY_FLUSH_ITEMS:
            if n >= self._max_pending:
                self._accepting = False
                self._fail_reason = f"the disk cannot keep up: {n} items waiting"
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
              hosts: list[str]) -> tuple[sqlite3.Connection, _Body, dict[str, int]]:
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
        _check_header(path)
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
                 hosts: list[str]) -> tuple[_Body, dict[str, int]]:
        path = self._path
        version = _schema_version(conn, path)
        _refuse_version(path, version)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RecordingError(f"cannot open recording {path}: WAL mode refused ({mode})")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA journal_size_limit=16777216")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for v in range(version + 1, SCHEMA_VERSION + 1):
                _MIGRATIONS[v](conn)
            if version < SCHEMA_VERSION:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
            meta = _meta(conn)
            if "fleet_key" not in meta:
                zid, zdict = _build_zdict()
                now = time.time()
                rows = {"fleet_key": fleet_key, "created_ts": repr(now),
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                        "zdict_id": zid, "zdict": base64.b64encode(zdict).decode("ascii")}
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", rows.items())
                meta.update(rows)
            elif meta["fleet_key"] != fleet_key:
                raise RecordingError(f"{path} belongs to another fleet "
                                     f"({meta['fleet_key']}, not {fleet_key})")
            body = _Body(_stored_zdict(meta, path))
            conn.executemany("INSERT OR IGNORE INTO hosts(name) VALUES (?)",
                             [(h,) for h in hosts])
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
                if self._retention_due(next_retention):
                    next_retention = time.monotonic() + self._retention_interval_s
                    if not self._apply_retention():
                        next_retention = time.monotonic()
                if self._stopping:
                    self._flush()
                    if self._max_age_s is not None or self._max_bytes is not None:
                        self._apply_retention()  # the last batch may have crossed the limit
                    return
                self._wake.wait(max(0.0, next_flush - time.monotonic()))
                self._wake.clear()
                self._flush()
        except Exception as e:  # any failure stops recording, visibly
            self._stop(_describe_error(e))
        finally:
            self._finish()

    def _retention_due(self, when: float) -> bool:
        if self._max_age_s is None and self._max_bytes is None:
            return False
        return time.monotonic() >= when

    def _flush(self) -> None:
        pending = self._pending
        n = len(pending)
        if not n or self._state != "recording":
            return
        cpu0 = time.thread_time()
        rows = []
        body = self._body
        conn = self._conn
        new_hosts = False
        popleft = pending.popleft
        for _ in range(n):
            host, ts, item = popleft()
            hid = self._host_ids.get(host)
            if hid is None:
                if not new_hosts:
                    conn.execute("BEGIN IMMEDIATE")
                    new_hosts = True
                hid = self._add_host(host)
            try:
                kind, blob = body.pack(item)
            except (codec.CodecError, TypeError, ValueError):
                self._skipped += 1
                continue
            rows.append((hid, ts, kind, blob))
        if not new_hosts:
            conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT INTO items(host_id, ts, kind, body) VALUES (?, ?, ?, ?)",
                             rows)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        self._items_written += len(rows)
        self._bytes = _file_bytes(self._path)
        self._cpu_s += time.thread_time() - cpu0

    def _add_host(self, host: str) -> int:
        self._conn.execute("INSERT OR IGNORE INTO hosts(name) VALUES (?)", (host,))
        hid = int(self._conn.execute("SELECT id FROM hosts WHERE name = ?", (host,)).fetchone()[0])
        self._host_ids[host] = hid
        return hid

    def _apply_retention(self) -> bool:
        """Delete what retention says must go; False if the time budget ran out first."""
        deadline = time.monotonic() + _RETENTION_BUDGET_S
        conn = self._conn
        if self._max_age_s is not None:
            cutoff = self._clock() - self._max_age_s
            while True:
                if time.monotonic() > deadline:
                    return False
                gone = self._delete("SELECT id FROM items WHERE ts < ? ORDER BY ts LIMIT ?",
                                    (cutoff, _DELETE_BATCH))
                if gone < _DELETE_BATCH:
                    break
        if self._max_bytes is not None and self._live_bytes() > self._max_bytes:
            # Down to 90%, so the next check is not due right after the next flush.
            target = int(self._max_bytes * 0.9)
            while (live := self._live_bytes()) > target:
                if time.monotonic() > deadline:
                    return False
                lo, hi = conn.execute("SELECT min(id), max(id) FROM items").fetchone()
                if lo is None:
                    break
                per_row = live / (hi - lo + 1)
                batch = min(_DELETE_BATCH, int((live - target) / per_row) + 1)
                if not self._delete("SELECT id FROM items ORDER BY ts LIMIT ?", (batch,)):
                    break
        self._bytes = _file_bytes(self._path)
        return True

    def _live_bytes(self) -> int:
        """Bytes in pages that hold data (the file also has free pages waiting for reuse)."""
        conn = self._conn
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        return (pages - free) * int(conn.execute("PRAGMA page_size").fetchone()[0])

    def _delete(self, select: str, params: tuple[Any, ...]) -> int:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            cur = conn.execute(f"DELETE FROM items WHERE id IN ({select})", params)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        return int(cur.rowcount)

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


def _stored_zdict(meta: dict[str, str], path: Path) -> bytes:
    try:
        zdict = base64.b64decode(meta["zdict"], validate=True)
    except (KeyError, ValueError):
        raise RecordingError(f"{path} is damaged: its compression dictionary is missing") from None
    digest = hashlib.sha256(zdict).hexdigest()[:12]
    if not meta.get("zdict_id", "").endswith(digest):
        raise RecordingError(f"{path} is damaged: compression dictionary "
                             f"{meta.get('zdict_id')!r} does not match its contents")
    return zdict


class RecordingReader:
    """Reads a recording, also while another process is still writing it (WAL)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        if not self._path.is_file():
            raise RecordingError(f"{self._path} is not a rigwatch recording (no such file)")
        if _check_header(self._path):
            raise RecordingError(f"{self._path} is not a rigwatch recording (empty file)")
        uri = self._path.resolve().as_uri() + "?mode=ro"
        try:
            self._conn = sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False)
        except sqlite3.Error as e:
            raise RecordingError(f"cannot open recording {self._path}: {e}") from None
        try:
            version = _schema_version(self._conn, self._path)
            if version != SCHEMA_VERSION:
                _refuse_version(self._path, version)
                raise RecordingError(f"{self._path} has schema version {version}; open it for "
                                     f"recording once to migrate it to {SCHEMA_VERSION}")
            self._meta = _meta(self._conn)
            self._body = _Body(_stored_zdict(self._meta, self._path))
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
        return self._skipped

    def hosts(self) -> list[str]:
        """Host names in the order they were first recorded."""
        return [r[0] for r in self._conn.execute("SELECT name FROM hosts ORDER BY id")]

    def span(self) -> tuple[float, float] | None:
        """(first ts, last ts), or None for a recording with no items."""
        row = self._conn.execute("SELECT (SELECT min(ts) FROM items), "
                                 "(SELECT max(ts) FROM items)").fetchone()
        if row is None or row[0] is None:
            return None
        return float(row[0]), float(row[1])

    def count(self, kind: str | None = None) -> int:
        """Items in the recording (of one kind, if given)."""
        if kind is None:
            row = self._conn.execute("SELECT count(*) FROM items").fetchone()
        else:
            row = self._conn.execute("SELECT count(*) FROM items WHERE kind = ?",
                                     (kind,)).fetchone()
        return int(row[0])

    def next_time(self, kind: str, after_ts: float) -> float | None:
        """The ts of the first item of ``kind`` strictly after ``after_ts`` ("next finding")."""
        row = self._conn.execute("SELECT ts FROM items WHERE kind = ? AND ts > ? "
                                 "ORDER BY ts LIMIT 1", (kind, after_ts)).fetchone()
        return None if row is None else float(row[0])

    def prev_time(self, kind: str, before_ts: float) -> float | None:
        """The ts of the last item of ``kind`` strictly before ``before_ts``."""
        row = self._conn.execute("SELECT ts FROM items WHERE kind = ? AND ts < ? "
                                 "ORDER BY ts DESC LIMIT 1", (kind, before_ts)).fetchone()
        return None if row is None else float(row[0])

    def items(self, since: float | None = None, until: float | None = None,
              kinds: Iterable[str] | None = None) -> Iterator[tuple[str, float, Item]]:
        """(host, ts, item) with ``since <= ts < until``, in time order (ties in recording
        order), fetched a few hundred rows at a time so memory stays flat on any file size.

        Each kind is read through the ``(kind, ts)`` index and the streams are merged, so
        "only findings" stays fast on a recording that is mostly samples.
        """
        if kinds is None:
            rows = self._rows(since, until, None)
        else:
            wanted = sorted(set(kinds))
            if not wanted:
                return
            streams = [self._rows(since, until, k) for k in wanted]
            rows = streams[0] if len(streams) == 1 else heapq.merge(*streams)
        unpack = self._body.unpack
        for ts, _id, host_id, body in rows:
            try:
                item = unpack(body)
            except (codec.CodecError, zlib.error, ValueError, TypeError):
                self._skipped += 1
                continue
            yield self._host_name(host_id), ts, item

    def _rows(self, since: float | None, until: float | None,
              kind: str | None) -> Iterator[tuple[float, int, int, bytes]]:
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
        sql = "SELECT ts, id, host_id, body FROM items"
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
        sql = "EXPLAIN QUERY PLAN SELECT ts, id, host_id, body FROM items"
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
