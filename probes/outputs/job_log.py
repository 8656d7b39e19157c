"""A Slurm job's own log, read where the bastion can (a shared filesystem), as the lines the
batch host's agent would have sent: folded with the agents' reads (``fold_once``), the
log is judged by the console's own rules, its ranks placed by the same witnesses, and the
job's first failure decided by the same function as the console's triage.

The file is opened as data the job's user controls (``job_file.open_job_file``: never
through a symbolic link, without blocking, only a regular file of the job's user), and only
its last ``JOB_LOG_LOOKBACK`` bytes are read, as the agent's ``--tail-lookback`` reads them.
Each line's read time is the file's modification time, so a finished job's log keeps its
lines at or before the time it was last written (line stamps and line order place them).
"""

from __future__ import annotations

import os

from probes.config.slurm import JOB_LOG_LOOKBACK, SlurmJob
from probes.explain.run import ExplainInputError
from probes.outputs.job_file import JobFileRefused, open_job_file, skipped_bytes
from probes.wire.samples import JOB_SOURCE_PREFIX, LogEvent
from probes.wire.sanitize import clean_text

MAX_LINE = 8192
"""A line longer than this is cut, as the agent cuts it."""


def _log_paths(job: SlurmJob) -> list[str]:
    return [p for p in dict.fromkeys((job.stdout, job.stderr)) if p]


def _read_tail(path: str, owner_uid: int | None, max_bytes: int) -> tuple[list[str], float]:
    """The whole lines of the last ``max_bytes`` of the job's file and when it was written.

    Raises:
        JobFileRefused: not a regular file of the job's user.
        ExplainInputError: missing or unreadable.
    """
    with open_job_file(path, owner_uid, max_bytes) as fh:
        skipped = skipped_bytes(fh)
        data = fh.read(max_bytes + 1)
    mtime = os.stat(path).st_mtime  # after the checked open: the file is the job's
    parts = data.split(b"\n")
    if skipped and parts:
        parts = parts[1:]  # the first line began before the window
    if parts and parts[-1] == b"":
        parts.pop()
    return [p[:MAX_LINE].decode("utf-8", "replace").rstrip("\r") for p in parts], mtime


def job_log_events(job: SlurmJob, max_bytes: int = JOB_LOG_LOOKBACK
                   ) -> tuple[list[LogEvent], list[str]]:
    """(lines, notes): the job's StdOut and StdErr as log events of its batch host (source
    ``job:<path>``, read at the file's modification time); a note for each log this machine
    could not read or refused."""
    events: list[LogEvent] = []
    notes: list[str] = []
    for path in _log_paths(job):
        try:
            lines, mtime = _read_tail(path, job.user_id, max_bytes)
        except JobFileRefused as exc:
            notes.append(clean_text(str(exc)))
            continue
        except (ExplainInputError, OSError) as exc:
            notes.append(clean_text(f"{exc} (the job's log is read on this machine: follow "
                                    f"it on {job.batch_host or 'the batch host'} with the "
                                    "agent instead)"))
            continue
        events.extend(LogEvent(mtime, JOB_SOURCE_PREFIX + path, line) for line in lines)
    return events, notes
