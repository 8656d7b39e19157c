"""Recording for every console session, and finding a recording again to replay it.

Every live console records (``--no-record`` opts out), whatever its source: agents over SSH,
a Slurm job's nodes, or a Prometheus.  A recording is found again (``rigwatch replay NAME``,
``snapshot --recording NAME``) by ``probes.store.catalog.find_recording``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.sources.base import Backend
    from probes.sources.source import Source
    from tui.settings import Settings

RESUME_MAX_AGE_S = 6 * 3600.0
"""A recording whose last item is older than this is not resumed: a new one is started."""


def console_backend(args: argparse.Namespace, settings: Settings) -> tuple[Source, Backend]:
    """The source the arguments name (``probes.sources.registry``) and the backend the
    console runs on it: the same, recorded (``with_recording``)."""
    from probes.sources.registry import build_source

    source = build_source(args, settings)
    return source, with_recording(source, args, settings)


def with_recording(source: Source, args: argparse.Namespace, settings: Settings) -> Backend:
    """The source's backend, recording unless ``--no-record`` (or a recording played back),
    resuming a recent recording of the same fleet (``source.key``) when ``source.resume``.
    A recording that cannot be opened is said on stderr and the console runs unrecorded."""
    from probes.sources.recording import RecordingBackend
    from probes.store.catalog import record_dir
    from probes.store.recording import (
        Recorder,
        RecordingError,
        RecordingReader,
        find_resumable,
        fleet_fingerprint,
        new_recording_path,
    )
    from probes.store.thinning import TierSpans

    live, specs, name = source.backend, source.backend.specs, source.name
    if getattr(args, "no_record", False) or not source.records:
        return live
    directory = record_dir(args)
    fleet_key = fleet_fingerprint(source.key)
    found = (find_resumable(directory, fleet_key, RESUME_MAX_AGE_S) if source.resume
             else None)
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
