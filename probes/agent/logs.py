"""Following logs read-only: a file from its end (job logs, syslog) and a following command."""

from __future__ import annotations

import errno
import os
import select
import stat
import subprocess
import time

from .commands import forget_child, track_child

MAX_TAIL_BYTES_PER_TICK = 64 * 1024
MAX_EVENT_LINE = 8192


_OPEN = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
         | getattr(os, "O_CLOEXEC", 0))
_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}


def _not_regular(mode):
    return "is %s, not a regular file" % _KINDS.get(stat.S_IFMT(mode), "something else")


def open_regular(path, owner=None, follow=True):
    """(fd, fstat, None) for ``path`` opened read-only as a regular file, else (None, None,
    why) in one line (why None: it does not exist).  A FIFO or device is refused before
    ``open`` (a FIFO blocks it, some devices act on it) and on the descriptor (opened
    ``O_NONBLOCK``): what is checked is what is read.  ``follow`` False refuses a symbolic
    link (``O_NOFOLLOW``); ``owner`` is the uid the file must belong to."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return None, None, _not_regular(st.st_mode)
        fd = os.open(path, _OPEN | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None, None, None
        if exc.errno == errno.ELOOP:
            return None, None, _not_regular(stat.S_IFLNK)
        return None, None, exc.strerror or str(exc)
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = _not_regular(st.st_mode)
    elif owner is not None and st.st_uid != owner:
        why = "belongs to uid %d, not to the job's user (uid %d)" % (st.st_uid, owner)
    if why is not None:
        os.close(fd)
        return None, None, why
    return fd, st, None


class FileTail(object):
    """Follows a log file read-only from its end, surviving rotation and truncation.

    With ``lookback`` it starts that many bytes before the end (seeking there, never
    reading the whole file) and drops the cut line it lands in.

    Only regular files are read (``open_regular``), checked again on every reopen; a job's
    file (``owner``, ``follow`` False) never through a symbolic link swapped in later.
    ``refused`` says why the file is not read now.
    """

    def __init__(self, path, at_end=True, lookback=0, owner=None, follow=True):
        self.path = path
        self.owner = owner
        self.follow = follow
        self.refused = None
        self._f = None
        self._ino = None
        self._partial = b""
        self._skip_cut = False
        self._open(at_end=at_end, lookback=lookback)

    def _open(self, at_end, lookback=0):
        fd, st, why = open_regular(self.path, self.owner, self.follow)
        self.refused = why
        if fd is None:
            self._f = None
            return
        f = os.fdopen(fd, "rb")
        if at_end:
            start = max(0, st.st_size - max(0, lookback))
            f.seek(start)
            self._skip_cut = lookback > 0 and start > 0
        self._f, self._ino = f, (st.st_dev, st.st_ino)

    @property
    def reading(self):
        return self._f is not None

    def _close(self):
        if self._f is not None:
            self._f.close()
        self._f = None

    def lines(self, budget=MAX_TAIL_BYTES_PER_TICK):
        try:
            st = os.stat(self.path) if self.follow else os.lstat(self.path)
        except OSError:
            if self._f is None:
                self.refused = None
            return []
        if (self._f is None or (st.st_dev, st.st_ino) != self._ino
                or st.st_size < self._f.tell()):
            # a new file at the name (rotation, a swap): checked before any read
            self._close()
            self._skip_cut = False
            self._partial = b""
            self._open(at_end=False)
            if self._f is None:
                return []
        data = self._partial + self._f.read(budget)
        if self._skip_cut:
            nl = data.find(b"\n")
            if nl < 0:
                self._partial = b""
                return []
            data = data[nl + 1:]
            self._skip_cut = False
        parts = data.split(b"\n")
        self._partial = parts.pop()[-MAX_EVENT_LINE:]
        return [p[:MAX_EVENT_LINE].decode("utf-8", "replace").rstrip("\r") for p in parts if p]


KERNEL_BYTES_PER_TICK = 512 * 1024
KERNEL_READ_WAIT_S = 0.05


class ChildLines(object):
    """A following command (journalctl, dmesg) read without blocking: bounded bytes
    per tick, the partial line kept, lines cut like FileTail cuts them."""

    def __init__(self, argv, max_line):
        self.argv = list(argv)
        self.max_line = max_line
        self.proc = None
        self.eof = False
        self._partial = b""
        self._err = b""

    def start(self):
        """Start the command; returns None, or why it could not be started."""
        env = dict(os.environ)
        env["LC_ALL"] = "C"  # refusals are recognised by their English text
        env["SYSTEMD_COLORS"] = "0"
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                return "not installed"
            return exc.strerror or str(exc)
        track_child(proc)
        self.proc = proc
        os.set_blocking(proc.stdout.fileno(), False)
        os.set_blocking(proc.stderr.fileno(), False)
        return None

    def _read(self, stream, budget, wait):
        """Up to ``budget`` bytes that are there now, waiting at most ``wait`` s in all
        for more while they keep coming.  Returns (data, eof)."""
        fd = stream.fileno()
        chunks = []
        total = 0
        deadline = time.monotonic() + wait
        while total < budget:
            try:
                data = os.read(fd, min(65536, budget - total))
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    ready = select.select([fd], [], [], min(left, 0.005))[0]
                except (OSError, ValueError):
                    break
                if not ready:
                    break
                continue
            except OSError:
                return b"".join(chunks), True
            if not data:
                return b"".join(chunks), True
            chunks.append(data)
            total += len(data)
        return b"".join(chunks), False

    def lines(self, budget=KERNEL_BYTES_PER_TICK, wait=KERNEL_READ_WAIT_S):
        """Complete lines read this tick (bytes, cut at ``max_line``)."""
        if self.proc is None or self.eof:
            return []
        data, eof = self._read(self.proc.stdout, budget, wait)
        data = self._partial + data
        parts = data.split(b"\n")
        self._partial = parts.pop()[-self.max_line:]
        if eof:
            self.eof = True
            if self._partial:
                parts.append(self._partial)
            self._partial = b""
        return [p[:self.max_line].rstrip(b"\r") for p in parts if p.strip()]

    def stderr_text(self):
        """What the command has printed on stderr so far (the last 8 KiB)."""
        if self.proc is not None:
            data, _ = self._read(self.proc.stderr, 16384, 0.0)
            if data:
                self._err = (self._err + data)[-8192:]
        return self._err.decode("utf-8", "replace")

    def exited(self):
        """The exit status once the command has ended and its output is read, else None."""
        if self.proc is None:
            return -1
        code = self.proc.poll()
        return code if code is not None and self.eof else None

    def stop(self):
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        if proc.poll() is not None:
            forget_child(proc)
