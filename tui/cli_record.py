"""Recording for every console session, and finding a recording again to replay it.

Every live console records (``--no-record`` opts out), whatever its source: agents over SSH,
a Slurm job's nodes, or a Prometheus.  ``rigwatch replay NAME`` takes a file, or the name
the listing printed, looked up in ``--record-dir`` (default: the data dir).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from probes.config.fleet import HostSpec
from probes.errors import ConfigError

if TYPE_CHECKING:
    from probes.transport.backend import Backend
    from tui.settings import Settings

RESUME_MAX_AGE_S = 6 * 3600.0
"""A recording whose last item is older than this is not resumed: a new one is started."""


def record_dir(args: argparse.Namespace) -> Path:
    """``--record-dir``, else the user's data dir."""
    from probes.store.recording import default_directory

    given = getattr(args, "record_dir", None)
    return Path(given) if given else default_directory()


def with_recording(live: Backend, specs: list[HostSpec], name: str, key: list[str],
                   args: argparse.Namespace, settings: Settings,
                   resume: bool = True) -> Backend:
    """``live``, recording unless ``--no-record``, resuming a recent recording of the same
    fleet (``key``: what identifies it) when ``resume``.  A recording that cannot be opened
    is said on stderr and the console runs unrecorded."""
    from probes.store.recording import (
        Recorder,
        RecordingError,
        RecordingReader,
        find_resumable,
        fleet_fingerprint,
        new_recording_path,
    )
    from probes.store.recording_backend import RecordingBackend
    from probes.store.thinning import TierSpans

    if getattr(args, "no_record", False):
        return live
    directory = record_dir(args)
    fleet_key = fleet_fingerprint(key)
    found = find_resumable(directory, fleet_key, RESUME_MAX_AGE_S) if resume else None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = found or new_recording_path(directory, name)
        keep = settings.recording
        recorder = Recorder(path, fleet_key, [s.name for s in specs],
                            max_age_s=keep.max_age_days * 86400.0,
                            max_bytes=int(keep.max_size_gib * 2**30),
                            tiers=TierSpans(keep.full_resolution_hours * 3600.0,
                                            keep.bucket_15s_days * 86400.0))
        reader = RecordingReader(path) if found else None
    except (RecordingError, OSError) as exc:
        print(f"rigwatch: not recording: {exc}", file=sys.stderr)
        return live
    if found:
        print(f"rigwatch: resuming the recording {path}", file=sys.stderr)
    return RecordingBackend(live, recorder, resume_from=reader)


def find_recording(name: str, directory: Path) -> Path:
    """The recording ``name`` names: a file, else one in ``directory`` by the name the
    listing printed (with or without its suffix), else the one whose name it begins.

    Raises:
        ConfigError: none matches, or several do.
    """
    from probes.store.recording_format import RECORDING_SUFFIX
    from probes.wire.sanitize import clean_text

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
