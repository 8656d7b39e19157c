"""Writing an output file (``export -o``, ``manifest -o``) that only its owner can read.

Exports and manifests hold host names, log lines, process owners and serials, so they are
written with mode 0600 whatever the umask.  They never follow a symlink at the target: the
text goes to a new temporary file in the target's directory (``mkstemp``: O_EXCL,
O_NOFOLLOW, mode 0600), which then replaces the target with ``os.replace`` (a rename, which
replaces a symlink itself, never what it points to).  A write that fails half-way leaves the
target as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

PRIVATE_MODE = 0o600


@contextlib.contextmanager
def private_file(path: Path) -> Iterator[TextIO]:
    """A text file opened for writing that becomes ``path`` (mode 0600) when the block ends.

    Raises OSError when ``path`` is there but is neither a file nor a symlink (a directory,
    a device, a FIFO), when its directory cannot take the file, or when the rename fails;
    the temporary file is removed then, and ``path`` is untouched.
    """
    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        # a directory, device or FIFO is not ours to replace
        raise OSError(errno.EEXIST, "exists and is not a regular file", str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, PRIVATE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
