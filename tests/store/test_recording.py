"""probes.store.recording: items survive, the UI never waits or sees an exception, and a killed
console loses at most the last flush interval."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import random
import signal
import sqlite3
import stat
import statistics
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from probes.analysis.findings import Finding
from probes.store import recording, recording_format
from probes.store.columns import GPU_NUMBERS
from probes.store.recording import (
    Recorder,
    RecordingStatus,
    find_resumable,
    fleet_fingerprint,
    new_recording_path,
)
from probes.store.recording_format import RecordingError
from probes.store.recording_reader import RecordingReader
from probes.triage import Severity, Step
from probes.wire.samples import HostSample, LogEvent
from tests.conftest import REPO
from tests.store.test_codec import all_items, sample_8gpu


def _wait_for(predicate: object, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def _count(path: Path) -> int:
    with RecordingReader(path) as r:
        return r.count()


def _log(i: int, ts: float | None = None) -> LogEvent:
    return LogEvent(float(i) if ts is None else ts, "kernel", f"line {i}")


@pytest.fixture
def rec_dir(tmp_path: Path) -> Path:
    return tmp_path / "recordings"


def test_every_item_type_round_trips_through_a_recording(rec_dir: Path) -> None:
    path = rec_dir / "a.sqlite3"
    items = all_items()
    with Recorder(path, "fleet", ["node-01", "node-02"]) as rec:
        for i, item in enumerate(items):
            rec.record("node-01" if i % 2 else "node-02", 100.0 + i, item)
    with RecordingReader(path) as r:
        got = list(r.items())
        assert r.count() == len(items)
        assert r.hosts() == ["node-01", "node-02"]
        assert r.span() == (100.0, 100.0 + len(items) - 1)
    assert [g[2] for g in got] == items
    assert [g[1] for g in got] == [100.0 + i for i in range(len(items))]
    assert [g[0] for g in got] == ["node-01" if i % 2 else "node-02" for i in range(len(items))]
    finding = next(g[2] for g in got if isinstance(g[2], Finding) and g[2].extra)
    assert finding.extra["ranks"] == [1, 3] and finding.context


def test_status_counts_and_closes_off(rec_dir: Path) -> None:
    path = rec_dir / "s.sqlite3"
    rec = Recorder(path, "fleet", ["h"], flush_interval_s=0.05)
    assert rec.status.state == "recording" and rec.status.path == path
    for i in range(10):
        rec.record("h", float(i), _log(i))
    assert _wait_for(lambda: rec.status.items_written == 10)
    assert rec.status.bytes > 0
    rec.close()
    rec.close()
    st = rec.status
    assert st == RecordingStatus("off", path, None, 10, st.bytes)
    rec.record("h", 11.0, _log(11))  # after close: a no-op, no exception
    assert _count(path) == 10
    assert RecordingStatus.off("--no-record").state == "off"


def test_reopening_appends_and_keeps_created(rec_dir: Path) -> None:
    path = rec_dir / "r.sqlite3"
    with Recorder(path, "fleet", ["a", "b"]) as rec:
        for i in range(3):
            rec.record("a", float(i), _log(i))
    with RecordingReader(path) as r:
        created = r.meta["created"]
    with Recorder(path, "fleet", ["b", "c"]) as rec:
        for i in range(3, 5):
            rec.record("d", float(i), _log(i))
    with RecordingReader(path) as r:
        assert r.meta["created"] == created
        assert r.hosts() == ["a", "b", "c", "d"]
        got = list(r.items())
    assert [item for _, _, item in got] == [_log(i) for i in range(5)]
    assert [h for h, _, _ in got] == ["a"] * 3 + ["d"] * 2


def test_reopening_with_another_fleet_is_refused(rec_dir: Path) -> None:
    path = rec_dir / "f.sqlite3"
    Recorder(path, "fleet-a", ["a"]).close()
    with pytest.raises(RecordingError, match="another fleet"):
        Recorder(path, "fleet-b", ["a"])


def test_items_are_committed_at_least_every_second(rec_dir: Path) -> None:
    """Default interval: a reader in another connection sees each item within ~1 s."""
    path = rec_dir / "flush.sqlite3"
    with Recorder(path, "fleet", ["h"]) as rec:
        delays = []
        for i in range(3):
            t0 = time.monotonic()
            rec.record("h", float(i), _log(i))
            assert _wait_for(lambda n=i + 1: _count(path) >= n, 3.0)
            delays.append(time.monotonic() - t0)
            time.sleep(0.3 * i)  # land at different points of the writer's cycle
    assert max(delays) < 1.5, delays


def test_record_never_blocks_on_disk(rec_dir: Path) -> None:
    """record() is an append: a burst of 5000 samples costs the caller microseconds each."""
    path = rec_dir / "fast.sqlite3"
    item = sample_8gpu()
    took = []
    clock = time.perf_counter
    with Recorder(path, "fleet", ["h"]) as rec:
        for i in range(5000):
            t0 = clock()
            rec.record("h", float(i), item)
            took.append(clock() - t0)
    # The median, not the mean: a call that waits for the GIL while the writer packs (a
    # switch interval, 5 ms) is the thread scheduler, not the disk; a commit per call would
    # put every call at a fraction of a millisecond.
    assert statistics.median(took) < 20e-6, statistics.median(took)
    assert _count(path) == 5000


_KILL_CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from probes.store.recording import Recorder
    from probes.wire.samples import LogEvent
    rec = Recorder(sys.argv[1], "fleet", ["h"])
    i = 0
    while True:
        ts = time.time()
        rec.record("h", ts, LogEvent(ts, "kernel", f"line {i}"))
        print(i, repr(ts), flush=True)
        i += 1
        time.sleep(0.1)
""")


def test_kill_9_loses_at_most_the_last_flush_interval(rec_dir: Path) -> None:
    path = rec_dir / "killed.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, str(path), str(REPO)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    emitted: list[tuple[int, float]] = []
    try:
        while len(emitted) < 35:  # 3.5 s at 10 items/s
            line = proc.stdout.readline()
            assert line, "the recorder child died"
            i, ts = line.split()
            emitted.append((int(i), float(ts)))
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    for line in rest.splitlines():
        i, ts = line.split()
        emitted.append((int(i), float(ts)))
    assert proc.returncode == -signal.SIGKILL

    with RecordingReader(path) as r:
        got = [item for _, _, item in r.items()]
        check = r._conn.execute("PRAGMA integrity_check").fetchone()[0]
    assert check == "ok"
    lines = [item.line for item in got if isinstance(item, LogEvent)]
    assert lines == [f"line {n}" for n in range(len(lines))]  # a prefix, in order
    old_enough = [i for i, ts in emitted if ts < killed_at - 1.2]
    assert len(old_enough) > 15
    assert len(lines) >= len(old_enough), (len(lines), len(old_enough))
    # Clean enough to append to after the crash.
    with Recorder(path, "fleet", ["h"]) as rec:
        rec.record("h", time.time(), _log(-1))
    assert _count(path) == len(lines) + 1


def test_retention_by_age(rec_dir: Path) -> None:
    path = rec_dir / "age.sqlite3"
    now = [150.0]
    with Recorder(path, "fleet", ["h"], flush_interval_s=0.05, max_age_s=60.0,
                  retention_interval_s=0.05, clock=lambda: now[0]) as rec:
        for i in range(101):
            rec.record("h", float(i), _log(i))
        assert _wait_for(lambda: _count(path) == 11)  # ts 90..100 are within 60 s of 150
        now[0] = 1000.0
        assert _wait_for(lambda: _count(path) == 0)
        rec.record("h", 990.0, _log(990))
        assert _wait_for(lambda: _count(path) == 1)
    with RecordingReader(path) as r:
        assert [item for _, _, item in r.items()] == [_log(990)]


def _noisy(seed: int) -> HostSample:
    """sample_8gpu with every moving GPU number random: what deflate cannot shrink."""
    rng = random.Random(seed)
    s = sample_8gpu()
    gpus = tuple(dataclasses.replace(g, **{k: rng.random() * 100 for k in GPU_NUMBERS})
                 for g in s.gpus)
    return dataclasses.replace(s, gpus=gpus)


def test_retention_by_size_keeps_the_newest(rec_dir: Path) -> None:
    path = rec_dir / "size.sqlite3"
    limit = 400_000
    samples = [_noisy(i) for i in range(50)]
    with Recorder(path, "fleet", ["h"], flush_interval_s=0.05, max_bytes=limit,
                  retention_interval_s=0.05, tiers=None) as rec:  # no buckets: deletes only
        for i in range(3000):  # several times the limit
            rec.record("h", float(i), samples[i % 50])
            if i % 300 == 0:
                time.sleep(0.06)
    conn = sqlite3.connect(path)
    try:
        pages, free, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
    finally:
        conn.close()
    with RecordingReader(path) as r:
        span = r.span()
        n = r.count()
    assert span is not None and span[1] == 2999.0  # the newest are kept
    assert span[0] > 0.0 and 150 < n < 3000  # the oldest went, not everything
    assert n == span[1] - span[0] + 1  # and they went from the old end
    # The last flush can add one batch after the last check.
    assert (pages - free) * size < limit * 1.5


class _FullDisk(Recorder):
    """SQLite's own SQLITE_FULL: the file may not grow past a few pages."""

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        conn.execute("PRAGMA max_page_count = 250")
        return conn


def test_disk_full_pauses_recording_with_a_reason(rec_dir: Path) -> None:
    """Injected through PRAGMA max_page_count: SQLite reports a real SQLITE_FULL
    ("database or disk is full"), as on a full file system.  (Resuming when space returns:
    ``test_recording_disk_full.py``, on a real full file system.)"""
    path = rec_dir / "full.sqlite3"
    rec = _FullDisk(path, "fleet", ["h"], flush_interval_s=0.05)
    samples = [_noisy(i) for i in range(50)]
    sample = samples[0]
    assert _wait_for(lambda: rec.status.state == "recording")
    for i in range(20_000):  # packed, random numbers take ~130 B a sample: ~8,000 fill it
        rec.record("h", float(i), samples[i % 50])  # never raises
        if i % 40 == 0:
            time.sleep(0.01)
            if rec.status.state == "paused":
                break
    assert _wait_for(lambda: rec.status.state == "paused")
    st = rec.status
    assert st.reason is not None and st.reason.startswith("disk full")
    assert "database or disk is full" in st.reason and "resumes when space returns" in st.reason
    written = st.items_written
    assert 0 < written < 20_000
    t0 = time.perf_counter()
    for i in range(10_000):
        rec.record("h", float(i), sample)
    assert time.perf_counter() - t0 < 0.05  # a cheap no-op
    assert not rec._pending and rec.status.dropped >= 10_000
    rec.close()
    assert rec.status.state == "paused"  # the file never had room again
    assert _count(path) == written  # what was committed is intact


_FSIZE_CHILD = textwrap.dedent("""
    import json, resource, signal, sys, time
    sys.path.insert(0, sys.argv[2])
    from probes.store.recording import Recorder
    from tests.store.test_recording import _noisy
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    rec = Recorder(sys.argv[1], "fleet", ["h"], flush_interval_s=0.05)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_500_000, resource.RLIM_INFINITY))
    samples = [_noisy(i) for i in range(50)]
    deadline = time.monotonic() + 20
    i = 0
    while rec.status.state == "recording" and time.monotonic() < deadline:
        rec.record("h", float(i), samples[i % 50])
        i += 1
        if i % 20 == 0:
            time.sleep(0.005)
    rec.close()
    st = rec.status
    print(json.dumps({"state": st.state, "reason": st.reason, "written": st.items_written}))
""")


def test_a_file_size_limit_from_the_kernel_stops_recording(rec_dir: Path) -> None:
    """A real write error without root: RLIMIT_FSIZE makes write(2) fail with EFBIG."""
    path = rec_dir / "fsize.sqlite3"
    proc = subprocess.run([sys.executable, "-c", _FSIZE_CHILD, str(path), str(REPO)],
                          capture_output=True, text=True, timeout=60, check=True)
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["state"] in ("stopped", "paused")  # EFBIG reads as a full disk to SQLite
    assert out["written"] > 0
    assert out["reason"].startswith(("disk full", "write failed")), out
    assert _count(path) == out["written"]


class _ReadOnlyAfterOpen(Recorder):
    """The file turns read-only under the recorder (works as root too, unlike chmod)."""

    def _prepare(self, conn: sqlite3.Connection, fleet_key: str,
                 hosts: list[str]) -> tuple[recording_format.Body, dict[str, int]]:
        out = super()._prepare(conn, fleet_key, hosts)
        conn.execute("PRAGMA query_only = ON")
        return out


def test_a_read_only_file_stops_recording(rec_dir: Path) -> None:
    rec = _ReadOnlyAfterOpen(rec_dir / "ro.sqlite3", "fleet", ["h"], flush_interval_s=0.05)
    rec.record("h", 1.0, _log(1))
    assert _wait_for(lambda: rec.status.state == "stopped")
    assert (rec.status.reason or "").startswith("read-only")
    rec.close()


def test_write_errors_are_described_for_the_status_bar() -> None:
    assert recording._describe_error(OSError(errno.ENOSPC, "No space left on device")) \
        .startswith("disk full")
    assert recording._describe_error(OSError(errno.EROFS, "Read-only file system")) \
        .startswith("read-only")
    assert recording._describe_error(sqlite3.OperationalError("disk I/O error")) \
        == "write failed: disk I/O error"


def test_an_error_inside_the_writer_never_reaches_the_caller(
        rec_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, item: object) -> tuple[str, bytes]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(recording_format.Body, "pack", broken)
    rec = Recorder(rec_dir / "e.sqlite3", "fleet", ["h"], flush_interval_s=0.05)
    rec.record("h", 1.0, _log(1))
    assert _wait_for(lambda: rec.status.state == "paused")
    assert rec.status.reason == ("disk full: [Errno 28] No space left on device (paused: "
                                 "resumes when space returns)")
    rec.record("h", 2.0, _log(2))
    rec.close()


def _set_version(path: Path, version: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.close()


def test_a_newer_schema_is_refused_in_one_line(rec_dir: Path) -> None:
    path = rec_dir / "new.sqlite3"
    Recorder(path, "fleet", ["h"]).close()
    _set_version(path, "7")
    for opener in (lambda: Recorder(path, "fleet", ["h"]), lambda: RecordingReader(path)):
        with pytest.raises(RecordingError) as e:
            opener()
        msg = str(e.value)
        assert "\n" not in msg
        assert str(path) in msg and "version 7" in msg and "supported version 2" in msg


def test_an_older_schema_without_a_migration_is_refused(rec_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = rec_dir / "old.sqlite3"
    Recorder(path, "fleet", ["h"]).close()
    monkeypatch.setattr(recording_format, "SCHEMA_VERSION", 3)
    with pytest.raises(RecordingError, match=r"version 2, which cannot be migrated.* version 3"):
        Recorder(path, "fleet", ["h"])


def test_migrations_run_in_order_on_open(rec_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = rec_dir / "mig.sqlite3"
    with Recorder(path, "fleet", ["h"]) as rec:
        rec.record("h", 1.0, _log(1))

    def to_v3(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE items ADD COLUMN note TEXT")

    monkeypatch.setattr(recording_format, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(recording_format, "READABLE_VERSIONS", frozenset({1, 2, 3}))
    monkeypatch.setitem(recording_format.MIGRATIONS, 3, to_v3)
    with Recorder(path, "fleet", ["h"]) as rec:
        rec.record("h", 2.0, _log(2))
    with RecordingReader(path) as r:
        assert r.meta["schema_version"] == "3"
        assert [i for _, _, i in r.items()] == [_log(1), _log(2)]


def test_files_that_are_not_recordings_are_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite3"
    text.write_text("hello, not a database\n")
    other = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t(x)")
    conn.close()
    for path in (text, other):
        with pytest.raises(RecordingError, match="not a rigwatch recording"):
            Recorder(path, "fleet", ["h"])
        with pytest.raises(RecordingError, match="not a rigwatch recording"):
            RecordingReader(path)
    with pytest.raises(RecordingError, match="not a rigwatch recording"):
        RecordingReader(tmp_path / "missing.sqlite3")
    assert text.read_text() == "hello, not a database\n"  # left alone


def test_file_is_0600_and_directory_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "data" / "rigwatch" / "recordings" / "m.sqlite3"
        with Recorder(path, "fleet", ["h"]) as rec:
            rec.record("h", 1.0, _log(1))
            assert _wait_for(lambda: rec.status.items_written == 1)
            side = [p for p in path.parent.iterdir() if p != path]
            assert {p.name for p in side} >= {path.name + "-wal"}
            for p in [path, *side]:
                assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        os.umask(old)


_WRITER_CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    from probes.store.recording import Recorder
    from tests.store.test_codec import sample_8gpu
    s = sample_8gpu()
    with Recorder(sys.argv[1], "fleet", ["a", "b"], flush_interval_s=0.05) as rec:
        for i in range(300):
            rec.record("a" if i % 2 else "b", float(i), s)
            time.sleep(0.01)
""")


def test_reading_while_another_process_writes(rec_dir: Path) -> None:
    path = rec_dir / "live.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER_CHILD, str(path), str(REPO)])
    try:
        assert _wait_for(lambda: path.exists() and path.stat().st_size > 0, 20)
        assert _wait_for(lambda: _safe_count(path) > 0, 20)
        counts = []
        with RecordingReader(path) as r:
            while proc.poll() is None:
                counts.append(r.count())
                got = list(r.items(since=0.0))
                assert all(isinstance(i, HostSample) for _, _, i in got)
                assert [ts for _, ts, _ in got] == sorted(ts for _, ts, _ in got)
                time.sleep(0.1)
    finally:
        proc.wait(60)
    assert proc.returncode == 0
    assert len(set(counts)) >= 3  # it saw the file grow
    assert counts == sorted(counts)
    assert _count(path) == 300


def _safe_count(path: Path) -> int:
    try:
        return _count(path)
    except RecordingError:
        return 0  # the writer is still creating the schema


def _filled(rec_dir: Path) -> Path:
    path = rec_dir / "q.sqlite3"
    with Recorder(path, "fleet", ["a", "b"]) as rec:
        for i in range(100):
            rec.record("a", float(i), _log(i))
            if i % 10 == 5:
                rec.record("b", i + 0.5, Finding(Step.GPU, "x", Severity.INFO, f"f{i}", "b",
                                                 ts=i + 0.5))
    return path


def test_reader_filters_by_time_and_kind(rec_dir: Path) -> None:
    path = _filled(rec_dir)
    with RecordingReader(path) as r:
        assert r.count() == 110 and r.count("finding") == 10
        window = list(r.items(since=10.0, until=20.0))
        assert [ts for _, ts, _ in window] == sorted([float(i) for i in range(10, 20)] + [15.5])
        findings = list(r.items(kinds=["finding"]))
        assert [ts for _, ts, _ in findings] == [i + 0.5 for i in range(5, 100, 10)]
        assert {h for h, _, _ in findings} == {"b"}
        both = [ts for _, ts, _ in r.items(kinds=["finding", "log"], since=50.0)]
        assert both == sorted(both) and len(both) == 50 + 5
        assert list(r.items(kinds=[])) == []
        assert r.next_time("finding", 15.5) == 25.5
        assert r.next_time("finding", 95.5) is None
        assert r.prev_time("finding", 15.5) == 5.5
        assert r.span() == (0.0, 99.0)


def test_an_empty_recording(rec_dir: Path) -> None:
    path = rec_dir / "empty.sqlite3"
    Recorder(path, "fleet", ["a"]).close()
    with RecordingReader(path) as r:
        assert r.span() is None and r.count() == 0 and list(r.items()) == []
        assert r.hosts() == ["a"]


def test_reading_uses_the_indexes_without_sorting(rec_dir: Path) -> None:
    with RecordingReader(_filled(rec_dir)) as r:
        for kind in (None, "finding"):
            plan = " ".join(r._query_plan(kind))
            assert "TEMP B-TREE" not in plan and "INDEX" in plan, plan


def test_reading_streams_with_flat_memory(rec_dir: Path) -> None:
    path = rec_dir / "big.sqlite3"
    sample = sample_8gpu()
    n = 2000
    with Recorder(path, "fleet", ["h"]) as rec:
        for i in range(n):
            rec.record("h", float(i), sample)
    with RecordingReader(path) as r:
        # one item read first: the caches a first read fills (imports, decoders' tables)
        # are not what streaming holds, and run alone they came to ~4 MB
        next(iter(r.items()))
        tracemalloc.start()
        try:
            seen = 0
            for _, _, item in r.items():
                assert isinstance(item, HostSample)
                seen += 1
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert seen == n
    # Holding them all would take tens of MB; streaming holds one fetch of rows.
    assert peak < 4_000_000, peak


def test_damaged_rows_are_skipped_and_counted(rec_dir: Path) -> None:
    path = _filled(rec_dir)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE items SET body = x'00ff00' WHERE id = 3")
    conn.close()
    with RecordingReader(path) as r:
        assert len(list(r.items())) == 109
        assert r.skipped == 1


def test_find_resumable_picks_the_newest_recent_one_of_the_fleet(tmp_path: Path) -> None:
    key = fleet_fingerprint(["b", "a", "a"])
    assert key == fleet_fingerprint(["a", "b"]) != fleet_fingerprint(["a", "c"])
    now = 10_000.0

    def make(name: str, fleet: str, last_ts: float) -> Path:
        path = tmp_path / f"{name}.sqlite3"
        with Recorder(path, fleet, ["a"]) as rec:
            rec.record("a", last_ts - 5, _log(0, last_ts - 5))
            rec.record("a", last_ts, _log(1, last_ts))
        return path

    make("old", key, now - 3600)
    newer = make("newer", key, now - 60)
    make("recent", key, now - 120)
    make("other", fleet_fingerprint(["z"]), now - 1)
    (tmp_path / "junk.sqlite3").write_bytes(b"junk")
    assert find_resumable(tmp_path, key, 600, now=now) == newer
    assert find_resumable(tmp_path, key, 30, now=now) is None
    assert find_resumable(tmp_path / "nowhere", key, 600, now=now) is None


def test_new_recording_path_is_safe_and_fresh(tmp_path: Path) -> None:
    p1 = new_recording_path(tmp_path, "../prod fleet: H100s/*", now=0.0)
    assert p1.parent == tmp_path
    assert "/" not in p1.name and " " not in p1.name and p1.name.endswith(".sqlite3")
    assert "prod-fleet-H100s" in p1.name
    p1.write_bytes(b"")
    p2 = new_recording_path(tmp_path, "../prod fleet: H100s/*", now=0.0)
    assert p2 != p1 and not p2.exists()
    assert new_recording_path(tmp_path, "///").name.endswith("-fleet.sqlite3")


def test_default_directory_is_in_the_user_data_dir(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert recording.default_directory() == tmp_path / "rigwatch" / "recordings"


def test_the_dictionary_is_stored_in_the_file(rec_dir: Path) -> None:
    """A reader uses the file's dictionary, so a later rigwatch with another one still reads."""
    path = rec_dir / "z.sqlite3"
    with Recorder(path, "fleet", ["h"]) as rec:
        rec.record("h", 1.0, sample_8gpu())
    with RecordingReader(path) as r:
        assert r.meta["zdict_id"].startswith("v1-")
    original = recording_format.build_zdict
    try:
        recording_format.build_zdict = lambda: ("v9-other", b"something else entirely")
        with RecordingReader(path) as r:
            assert [i for _, _, i in r.items()] == [sample_8gpu()]
    finally:
        recording_format.build_zdict = original


class _StalledDisk(Recorder):
    """A writer that never gets its first batch to disk (an NFS mount gone away)."""

    def _flush(self) -> None:
        time.sleep(0.05)


def test_a_writer_that_cannot_keep_up_stops_instead_of_eating_memory(rec_dir: Path) -> None:
    rec = _StalledDisk(rec_dir / "slow.sqlite3", "fleet", ["h"], max_pending=6000)
    for i in range(10_000):
        rec.record("h", float(i), _log(i))
    assert len(rec._pending) == 6000
    assert _wait_for(lambda: rec.status.state == "stopped")
    assert "cannot keep up" in (rec.status.reason or "")
    assert not rec._pending
    rec.close()


def test_an_item_the_codec_cannot_encode_is_skipped(rec_dir: Path) -> None:
    path = rec_dir / "skip.sqlite3"
    with Recorder(path, "fleet", ["h"]) as rec:
        rec.record("h", 1.0, _log(1))
        rec.record("h", 2.0, "not an item")  # type: ignore[arg-type]
        rec.record("h", 3.0, _log(3))
    assert rec.skipped == 1
    assert rec.status.state == "off" and rec.status.items_written == 2
    with RecordingReader(path) as r:
        assert [i for _, _, i in r.items()] == [_log(1), _log(3)]


def test_row_json_is_the_same_with_and_without_orjson() -> None:
    """The fast writer and the standard library write the same items, and what orjson
    refuses (an integer past 64 bits) still gets written."""
    from probes.store import codec

    items = recording_format.typical_items()
    assert items
    for item in items:
        data = codec.encode(item)
        fast = recording_format.dumps(data)
        plain = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
        assert json.loads(fast) == json.loads(plain)
    huge = {"t": "x", "n": 2**70, "s": "naïve ✓"}
    assert json.loads(recording_format.dumps(huge)) == huge
