"""``rigwatch replay`` without a file: each recording with its start, end, length and hosts,
read from the file's ends and tables, and a damaged file named in one line."""

from __future__ import annotations

import io
import sqlite3
import time
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec
from probes.store import catalog
from probes.store.catalog import (
    format_duration,
    format_errors,
    format_recordings,
    list_recordings,
    write_listing,
)
from probes.store.recording import Recorder
from probes.wire.events import Connected, Disconnected
from tests.store.test_codec import sample_8gpu

DAY = 1_764_720_000.0  # 2025-12-03 00:00:00 UTC


def _record(path: Path, hosts: list[str], start: float, end: float,
            simulate: bool = False) -> Path:
    with Recorder(path, "k", hosts) as rec:
        rec.describe_hosts([HostSpec(h, simulate=("healthy",) if simulate else ())
                            for h in hosts])
        rec.record(hosts[0], start, Connected(start))
        for t in range(int(start) + 10, int(end), 600):
            rec.record(hosts[0], float(t), sample_8gpu())
        rec.record(hosts[-1], end, Disconnected(end, "agent exited"))
    return path


def test_each_recording_with_its_times_length_and_hosts(tmp_path: Path) -> None:
    night = _record(tmp_path / "20251203-010000-fleet.sqlite3", ["gpu-01", "gpu-02", "gpu-03"],
                    DAY + 3600, DAY + 3600 + 6 * 3600 + 1800)
    demo = _record(tmp_path / "20251203-090000-demo.sqlite3", ["gpu-a01"], DAY + 9 * 3600,
                   DAY + 9 * 3600 + 105 * 60, simulate=True)
    (tmp_path / "notes.txt").write_text("not a recording")
    infos = list_recordings(tmp_path)
    assert [i.path for i in infos] == [demo, night], "newest first"
    assert infos[1].start == DAY + 3600 and infos[1].end == DAY + 3600 + 6.5 * 3600
    assert infos[1].hosts == 3 and not infos[1].simulated and infos[0].simulated
    lines = format_recordings(infos)
    assert lines[0].split() == ["START", "(UTC)", "END", "(UTC)", "DURATION", "HOSTS", "SIZE",
                                "FILE"]
    assert "2025-12-03 01:00:00  2025-12-03 07:30:00  6 h 30 min" in lines[2]
    assert lines[2].endswith("  20251203-010000-fleet.sqlite3")
    assert " 3  " in lines[2] and "KiB" in lines[2]
    assert "1 h 45 min" in lines[1] and lines[1].endswith("(simulated)")
    assert format_errors(infos) == []


def test_a_damaged_file_is_one_line_naming_it_and_the_listing_goes_on(tmp_path: Path) -> None:
    good = _record(tmp_path / "good.sqlite3", ["h"], DAY, DAY + 60)
    (tmp_path / "garbage.sqlite3").write_bytes(b"\x00" * 4096)
    (tmp_path / "empty.sqlite3").write_bytes(b"")
    other = tmp_path / "other.sqlite3"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t(x)")
    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(good.read_bytes()[:2048])  # cut short: the tables are gone
    infos = list_recordings(tmp_path)
    assert [i.path for i in infos if i.error is None] == [good]
    errors = format_errors(infos)
    assert len(errors) == 4
    for name in ("garbage", "empty", "other", "broken"):
        line = next(e for e in errors if f"{name}.sqlite3" in e)
        assert "\n" not in line
    assert len(format_recordings(infos)) == 2


def test_an_empty_recording_and_no_directory(tmp_path: Path) -> None:
    Recorder(tmp_path / "new.sqlite3", "k", ["a", "b"]).close()
    infos = list_recordings(tmp_path)
    assert infos[0].start is None and infos[0].hosts == 2 and infos[0].error is None
    assert "  -  " in format_recordings(infos)[1]
    assert list_recordings(tmp_path / "missing") == []
    assert format_recordings([]) == []


def test_listing_reads_the_ends_not_the_items(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A long recording lists as fast as a short one: no item is decoded."""
    path = tmp_path / "long.sqlite3"
    with Recorder(path, "k", ["h"]) as rec:
        for i in range(20000):
            rec.record("h", DAY + i, Connected(DAY + i))

    def no(*_a: object, **_k: object) -> None:
        raise AssertionError("an item was read")

    monkeypatch.setattr(catalog.RecordingReader, "items", no)
    t = time.perf_counter()
    infos = list_recordings(tmp_path)
    assert time.perf_counter() - t < 0.5
    assert infos[0].duration_s == 19999.0


def test_file_names_are_shown_as_visible_text(tmp_path: Path) -> None:
    path = _record(tmp_path / "x\x1b[2Jy.sqlite3", ["h"], DAY, DAY + 60)
    assert path.exists()
    line = format_recordings(list_recordings(tmp_path))[1]
    assert "\x1b" not in line and "y.sqlite3" in line


def test_durations() -> None:
    assert format_duration(45) == "45 s"
    assert format_duration(6300) == "1 h 45 min"
    assert format_duration(2 * 86400 + 3 * 3600 + 59) == "2 d 3 h"
    assert format_duration(0) == "0 s" and format_duration(None) == "-"


def test_the_listing_as_rigwatch_replay_prints_it(tmp_path: Path) -> None:
    _record(tmp_path / "a.sqlite3", ["h1", "h2"], DAY, DAY + 3600)
    (tmp_path / "bad.sqlite3").write_bytes(b"junk" * 100)
    out, err = io.StringIO(), io.StringIO()
    assert write_listing(tmp_path, out, err) == 1
    table = out.getvalue().splitlines()
    assert len(table) == 2 and table[1].endswith("a.sqlite3") and "1 h" in table[1]
    notes = err.getvalue().splitlines()
    assert notes[0].startswith("rigwatch: ") and "bad.sqlite3" in notes[0]
    assert notes[1] == f"1 recording in {tmp_path}; replay one with: rigwatch replay FILE"
    out, err = io.StringIO(), io.StringIO()
    assert write_listing(tmp_path / "none", out, err) == 0
    assert out.getvalue() == "" and err.getvalue().startswith("no recordings in ")
