"""Commands and files, read-only: every child the agent starts is tracked so none outlives it."""

from __future__ import annotations

import os
import subprocess
import threading

_CHILDREN = set()  # type: set[subprocess.Popen]
_CHILDREN_LOCK = threading.Lock()


def track_child(proc):
    """Remember a started command, so exit_now kills it."""
    with _CHILDREN_LOCK:
        _CHILDREN.add(proc)


def forget_child(proc):
    """A command that has ended needs no killing."""
    with _CHILDREN_LOCK:
        _CHILDREN.discard(proc)


def exit_now(code=0):
    """Leave at once, killing commands still running so none outlives the agent."""
    with _CHILDREN_LOCK:
        for proc in list(_CHILDREN):
            try:
                proc.kill()
            except OSError:
                pass
    os._exit(code)


def run_command(argv, timeout):
    """Run a read-only command with a deadline.

    Returns (returncode, stdout, stderr); returncode None means it timed out.  A
    child stuck in D state cannot be reaped, so after the kill we wait only
    briefly and abandon it rather than block the stream.
    """
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        return -1, "", str(exc)
    track_child(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            out, err = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None, "", "timed out after %gs (process abandoned)" % timeout
        return None, _text(out), "timed out after %gs" % timeout
    finally:
        if proc.poll() is not None:
            forget_child(proc)
    return proc.returncode, _text(out), _text(err)


def _text(data):
    if data is None:
        return ""
    return data.decode("utf-8", "replace")


def read_text(path):
    try:
        with open(path, "r") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def rooted(root, path):
    """``path`` under ``root`` (the hidden --log-root test option, for /proc, /var and /usr
    look-ups; "/" on a host)."""
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def one_line(text, limit=300):
    return " ".join((text or "").split())[:limit]
