"""Opening a file a Slurm job named, on the bastion, as data the job's user controls.

``snapshot --slurm-job`` reads the job's StdOut/StdErr with the operator's rights, often
root's.  The paths are the job user's choice, and so is what lies at them: a symbolic link
to a root-only file, a FIFO that blocks ``open``, ``/dev/zero`` that never ends.  So the file
is opened the way the agent opens it (``probes.agent.logs.open_regular``, duplicated here
because the agent imports nothing of ours): never through a symbolic link, without
blocking, and kept only when the opened descriptor is a regular file owned by the job's
user.  What is read is bounded: at most :data:`MAX_JOB_LOG_BYTES`, the file's end when it is
larger (a failure is written last), and never past the size it had when opened.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from typing import BinaryIO

from probes.explain.run import ExplainInputError

MAX_JOB_LOG_BYTES = 512 * 1024 * 1024
"""Most of a job's log read by a snapshot: its last 512 MiB (a day of a chatty 2 000-rank job's
NCCL INFO lines is about that)."""
_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
RULE = "a job's log is read only as a regular file owned by the job's user"


class JobFileRefused(ExplainInputError):
    """A file a job named is not a regular file of the job's user; the message says what."""

    title = "Job file refused"


def _kind(mode: int) -> str:
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


class _Bounded(io.RawIOBase):
    """Reads ``fd`` from ``start`` up to ``end`` and no further."""

    def __init__(self, fd: int, start: int, end: int) -> None:
        super().__init__()
        self._file = os.fdopen(fd, "rb", buffering=0)
        self._file.seek(start)
        self._left = end - start
        self.skipped = start

    def readable(self) -> bool:
        return True

    def readinto(self, buf: memoryview) -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        view = memoryview(buf)[:min(len(buf), self._left)]
        n = self._file.readinto(view) or 0
        self._left -= n
        return n

    def close(self) -> None:
        self._file.close()
        super().close()


def open_job_file(path: str, owner_uid: int | None,
                  max_bytes: int = MAX_JOB_LOG_BYTES) -> BinaryIO:
    """``path`` opened for reading as the job's own regular file, bounded.

    Raises:
        JobFileRefused: a symbolic link, FIFO, device, socket or directory; a file of
            another user; or the job's user is not known.
        ExplainInputError: the file is missing or cannot be read.
    """
    if owner_uid is None:
        raise JobFileRefused(f"{path}: whose file it should be is not known ({RULE})")
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ExplainInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise JobFileRefused(f"{path}: is {_kind(st.st_mode)}, not read ({RULE})")
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise JobFileRefused(f"{path}: is a symbolic link, not read ({RULE})") from None
        raise ExplainInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = f"is {_kind(st.st_mode)}"
    elif st.st_uid != owner_uid:
        why = f"belongs to uid {st.st_uid}, not to the job's user (uid {owner_uid})"
    if why is not None:
        os.close(fd)
        raise JobFileRefused(f"{path}: {why}, not read ({RULE})")
    start = max(0, st.st_size - max_bytes)
    return io.BufferedReader(_Bounded(fd, start, st.st_size))


def skipped_bytes(fh: BinaryIO) -> int:
    """Bytes of the file's head left unread by :func:`open_job_file` (it was too large)."""
    raw = getattr(fh, "raw", None)
    return raw.skipped if isinstance(raw, _Bounded) else 0
