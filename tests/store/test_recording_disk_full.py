"""A full disk pauses recording, and it resumes by itself when space returns (faults review
S6b: on a 1 MiB tmpfs the recording stopped for the rest of the session, even after space
was freed).  A real full file system: a tmpfs mounted here (as root), filled by
the recording itself, then a file on it deleted.  (The review's was 1 MiB with 324 KiB
free; this one has 1 MiB of ballast to free.)
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec
from probes.sources.agents import AgentFleetBackend
from probes.sources.recording import RecordingBackend
from probes.store import recording
from probes.store.recording import Recorder, RecordingReader
from tests.store.test_recording import _noisy


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted after the test."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root (CI runs as root)")
    where = tmp_path / "tiny"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(where)],
                   check=True, capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def _until(cond: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_full_disk_pauses_recording_and_it_resumes_when_space_returns(
        tiny_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "PAUSE_RETRY_S", 0.5)
    ballast = tiny_disk / "ballast"
    ballast.write_bytes(os.urandom(1024 * 1024))  # what an operator frees later
    path = tiny_disk / "rec.sqlite3"
    rec = Recorder(path, "fleet", ["h"], flush_interval_s=0.05, tiers=None)
    samples = [_noisy(i) for i in range(50)]
    i = 0
    try:
        deadline = time.monotonic() + 60
        while rec.status.state == "recording" and time.monotonic() < deadline:
            rec.record("h", float(i), samples[i % 50])
            i += 1
            if i % 40 == 0:
                time.sleep(0.01)
        status = rec.status
        assert status.state == "paused", status
        assert status.reason is not None and status.reason.startswith("disk full")
        assert "resumes when space returns" in status.reason
        # the console says so in its header
        backend = RecordingBackend(AgentFleetBackend([HostSpec("h")]), rec)  # never run
        assert backend.mode_text().startswith("rec paused: disk full")
        written = status.items_written
        for _ in range(200):  # still full: dropped, counted, never raised
            rec.record("h", float(i), samples[i % 50])
            i += 1
        time.sleep(1.5)
        assert rec.status.state == "paused" and rec.status.dropped >= 200
        # space returns: recording resumes by itself
        ballast.unlink()
        assert _until(lambda: rec.status.state == "recording", 10.0), rec.status
        resumed_at = i
        for _ in range(40):  # one commit or two: each rewrites its pages into the WAL
            rec.record("h", float(i), samples[i % 50])
            i += 1
        assert _until(lambda: rec.status.items_written >= written + 40, 10.0), rec.status
    finally:
        rec.close()
    with RecordingReader(path) as reader:
        times = [ts for _, ts, _ in reader.items()]
    assert max(times) >= resumed_at + 39  # the items after the pause are in the file
    assert float(resumed_at - 1) not in times  # and what came while paused is not


def test_the_header_says_recording_after_the_live_sources_own_note(tmp_path: Path) -> None:
    """(A Prometheus session's: ``test_prometheus_faults``.)"""
    rec = Recorder(tmp_path / "r.sqlite3", "fleet", ["h"], flush_interval_s=0.05)
    try:
        backend = RecordingBackend(AgentFleetBackend([HostSpec("h")]), rec)
        assert backend.mode_text() == "● rec"
    finally:
        rec.close()
