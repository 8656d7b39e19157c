"""A Slurm job's own log, read where the bastion can (a shared filesystem), as the lines the
batch host's agent would have sent: folded with the agents' reads (``fold_once``), the
log is judged by the console's own rules, its ranks placed by the same witnesses, and the
job's first failure decided by the same function as the console's triage.

Only the last ``JOB_LOG_LOOKBACK`` bytes are read (as the agent's ``--tail-lookback``
does), from a regular file that is not a symbolic link, without blocking; each line's
read time is the file's modification time, so a finished job's log keeps its lines at or
before the time it was last written (line stamps and line order place them exactly).
"""

from __future__ import annotations

import os
import stat

from probes.config.slurm import JOB_LOG_LOOKBACK, SlurmJob
from probes.wire.samples import JOB_SOURCE_PREFIX, LogEvent
from probes.wire.sanitize import clean_text

MAX_LINE = 8192
"""A line longer than this is cut, as the agent cuts it."""


def _log_paths(job: SlurmJob) -> list[str]:
    return [p for p in dict.fromkeys((job.stdout, job.stderr)) if p]


def _read_tail(path: str, max_bytes: int) -> tuple[list[str], float]:
    """The whole lines of the last ``max_bytes`` of ``path`` and its modification time.

    Raises:
        OSError: it cannot be read, is not a regular file, or is a symbolic link.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        start = max(0, st.st_size - max_bytes)
        os.lseek(fd, start, os.SEEK_SET)
        data = b""
        while len(data) < st.st_size - start:
            chunk = os.read(fd, min(1 << 20, st.st_size - start - len(data)))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    parts = data.split(b"\n")
    if start > 0 and parts:
        parts = parts[1:]  # the first line began before the window
    if parts and parts[-1] == b"":
        parts.pop()
    return [p[:MAX_LINE].decode("utf-8", "replace").rstrip("\r") for p in parts], st.st_mtime


def job_log_events(job: SlurmJob, max_bytes: int = JOB_LOG_LOOKBACK
                   ) -> tuple[list[LogEvent], list[str]]:
    """(lines, notes): the job's StdOut and StdErr as log events of its batch host (source
    ``job:<path>``, read at the file's modification time); a note for each log this machine
    could not read."""
    events: list[LogEvent] = []
    notes: list[str] = []
    for path in _log_paths(job):
        try:
            lines, mtime = _read_tail(path, max_bytes)
        except OSError as exc:
            notes.append(clean_text(f"{path}: {exc.strerror or exc} (the job's log is read on "
                                    f"this machine: its batch host's agent follows it "
                                    f"instead)"))
            continue
        events.extend(LogEvent(mtime, JOB_SOURCE_PREFIX + path, line) for line in lines)
    return events, notes
