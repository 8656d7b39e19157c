"""The recordings in a directory, described for ``rigwatch replay`` without a file.

A bare list of file names does not say which file holds last night's incident.  Each file
is described by its first and last item's time, its length and its hosts: what SQLite reads
from the ``meta`` and ``hosts`` tables and the two ends of the ``items_ts`` index, never the
items themselves, so a directory of day-long recordings lists at once.  A file that cannot
be read is listed as a one-line error naming it, and the listing goes on.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from probes.errors import ConfigError
from probes.store.recording import default_directory
from probes.store.recording_format import RECORDING_SUFFIX, RecordingError
from probes.store.recording_reader import RecordingReader
from probes.wire.sanitize import clean_text


@dataclass(frozen=True)
class RecordingInfo:
    """One recording as the listing shows it; ``error`` set when it cannot be read."""

    path: Path
    bytes: int
    start: float | None = None
    """The first item's time (None: a recording with no items yet)."""
    end: float | None = None
    hosts: int = 0
    simulated: bool = False
    """Its hosts were simulated (the demo): its times are the simulator's, not a real night's."""
    error: str | None = None
    dropped_before: float | None = None
    """Retention deleted its samples before this time (None: it never had to)."""
    full_from: float | None = None
    """Its samples before this time are 15 s / 5 min buckets (None: all are whole)."""

    @property
    def duration_s(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start


def _describe(path: Path) -> RecordingInfo:
    try:
        size = sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal"))
                   if p.exists())
    except OSError:
        size = 0
    try:
        with RecordingReader(path) as reader:
            span = reader.span()
            specs = reader.host_specs()
            dropped = reader.dropped_before
            full_from = reader.full_resolution_from
    except RecordingError as e:
        return RecordingInfo(path, size, error=str(e))
    except (sqlite3.Error, OSError) as e:
        return RecordingInfo(path, size, error=f"cannot read recording {path}: {e}")
    start, end = span if span is not None else (None, None)
    return RecordingInfo(path, size, start, end, len(specs),
                         simulated=bool(specs) and all(s.simulate for s in specs),
                         dropped_before=dropped, full_from=full_from)


def list_recordings(directory: str | os.PathLike[str]) -> list[RecordingInfo]:
    """Every ``*.sqlite3`` in ``directory``, newest first (by its last item, else its file
    time); an empty list when the directory does not exist."""
    base = Path(directory)
    if not base.is_dir():
        return []
    infos = [_describe(p) for p in base.glob(f"*{RECORDING_SUFFIX}") if p.is_file()]

    def newest(info: RecordingInfo) -> float:
        if info.end is not None:
            return info.end
        try:
            return info.path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(infos, key=newest, reverse=True)


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def format_duration(seconds: float | None) -> str:
    """``45 s``, ``1 h 45 min``, ``2 d 3 h``: the two largest units."""
    if seconds is None:
        return "-"
    s = round(seconds)
    parts = [(s // 86400, "d"), (s % 86400 // 3600, "h"), (s % 3600 // 60, "min"), (s % 60, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n]
    return " ".join(shown[:2]) if shown else "0 s"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024.0, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024.0, bigger
    return f"{value:.1f} {unit}"


def format_recordings(infos: list[RecordingInfo]) -> list[str]:
    """The readable recordings as a table (times in UTC, like the console), header first;
    nothing when there are none.  File names are shown as visible text only."""
    good = [i for i in infos if i.error is None]
    if not good:
        return []
    rows = [(_when(i.start), _when(i.end), format_duration(i.duration_s), str(i.hosts),
             _size(i.bytes), clean_text(i.path.name) + ("  (simulated)" if i.simulated else "")
             + ("" if i.full_from is None
                else f"  (buckets before {_when(i.full_from)}, whole samples after)")
             + ("" if i.dropped_before is None
                else f"  (retention dropped samples before {_when(i.dropped_before)})"))
            for i in good]
    head = ("START (UTC)", "END (UTC)", "DURATION", "HOSTS", "SIZE", "FILE")
    widths = [max(len(r[k]) for r in [head, *rows]) for k in range(5)]

    def line(r: tuple[str, ...]) -> str:
        return "  ".join([r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]),
                          r[3].rjust(widths[3]), r[4].rjust(widths[4]), r[5]])

    return [line(head)] + [line(r) for r in rows]


def format_errors(infos: list[RecordingInfo]) -> list[str]:
    """One line per file that cannot be read, naming it."""
    return [clean_text(i.error) for i in infos if i.error is not None]


def write_listing(directory: str | os.PathLike[str], out: TextIO, err: TextIO) -> int:
    """``rigwatch replay`` without a file: the table on ``out``; each unreadable file, then
    the count and how to replay one, on ``err``.  Returns the number of readable recordings."""
    infos = list_recordings(directory)
    for line in format_recordings(infos):
        print(line, file=out)
    for line in format_errors(infos):
        print(f"rigwatch: {line}", file=err)
    readable = sum(1 for i in infos if i.error is None)
    where = clean_text(str(directory))
    if readable:
        print(f"{readable} recording{'s' if readable != 1 else ''} in {where}; "
              "replay one with: rigwatch replay FILE", file=err)
    else:
        print(f"no recordings in {where}", file=err)
    return readable


def record_dir(args: argparse.Namespace) -> Path:
    """``--record-dir``, else the user's data dir."""
    given = getattr(args, "record_dir", None)
    return Path(given) if given else default_directory()


def find_recording(name: str, directory: Path) -> Path:
    """The recording ``name`` names: a file, else one in ``directory`` by the name the
    listing printed (with or without its suffix), else the one whose name it begins.

    Raises:
        ConfigError: none matches, or several do.
    """
    given = Path(name)
    if given.is_file():
        return given
    names = sorted(p for p in directory.glob(f"*{RECORDING_SUFFIX}") if p.is_file()) \
        if directory.is_dir() else []
    for want in (name, name + RECORDING_SUFFIX):
        exact = [p for p in names if p.name == want or clean_text(p.name) == want]
        if exact:
            return exact[0]
    begun = [p for p in names if p.name.startswith(name)]
    if len(begun) == 1:
        return begun[0]
    where = clean_text(str(directory))
    if begun:
        shown = ", ".join(clean_text(p.name) for p in begun[:5])
        raise ConfigError(f"rigwatch replay: {clean_text(name)!r} names {len(begun)} "
                          f"recordings in {where} ({shown}{' …' if len(begun) > 5 else ''})")
    raise ConfigError(f"rigwatch replay: no recording {clean_text(name)!r}: not a file, and "
                      f"not in {where} ('rigwatch replay' lists them; --record-dir DIR "
                      "looks elsewhere)")
