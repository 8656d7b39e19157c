"""Running a Slurm client command (``squeue``, ``scontrol``, ``sinfo``) in bounded time and bytes.

Slurm's answers carry text a job's user wrote (its name, its paths, its comment), and a
broken or replaced client can print anything.  So a command runs with an argv (never a
shell) and a deadline, its answer is read up to :data:`MAX_ANSWER_BYTES` (more is refused,
not buffered), its stderr keeps only its last bytes, and bytes that are not UTF-8 become
U+FFFD instead of raising.  A failure is one line: the command and the last
:data:`ERROR_TAIL_CHARS` characters of what it said, cleaned for the terminal.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time

from probes.errors import ConfigError
from probes.wire.sanitize import clean_text

SLURM_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Most stdout one client command may print: one job's record is a few KiB, a 10,000-node
partition's node list a few hundred KiB."""
ERROR_TAIL_CHARS = 300
"""How much of a failing command's message is kept: its end says why."""
_STDERR_KEEP = 8192
_CHUNK = 65536


class SlurmError(ConfigError):
    """Slurm cannot tell about the job: no client, no such job, or an answer not understood."""

    title = "Slurm job unusable"
    exit_status: int | None = None
    """The command's exit status when it ran and failed; None when it never ended by itself
    (missing, timed out, too much output)."""


def _tail(data: bytes) -> str:
    """The last :data:`ERROR_TAIL_CHARS` characters of a message, as one clean line."""
    text = " ".join(data.decode("utf-8", "replace").split())
    if len(text) > ERROR_TAIL_CHARS:
        text = "…" + text[-ERROR_TAIL_CHARS:]
    return clean_text(text)


def run_slurm(argv: list[str], timeout_s: float = SLURM_TIMEOUT_S,
              max_bytes: int = MAX_ANSWER_BYTES, what: str | None = None) -> bytes:
    """``argv``'s stdout as bytes, read in bounded time and memory; ``what`` names the
    command in a failure (default: its first words).

    Raises:
        SlurmError: the command is missing, ran past ``timeout_s``, printed more than
            ``max_bytes``, or exited non-zero (then with the end of its stderr).
    """
    shown = what or " ".join(argv[:3])
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: run this where the Slurm client is "
                         "installed") from None
    except OSError as exc:
        raise SlurmError(f"{argv[0]}: cannot run: {exc.strerror or exc}") from None
    out, err, why = _collect(proc, timeout_s, max_bytes)
    if why is not None:
        proc.kill()
    try:
        code = proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        code = None
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    if why == "timeout":
        raise SlurmError(f"{shown} did not answer within {timeout_s:g} s")
    if why == "size":
        raise SlurmError(f"{shown} printed more than {max_bytes // (1024 * 1024)} MiB: "
                         "not read")
    if code != 0:
        said = _tail(err) or _tail(out) or f"exit status {code}"
        failed = SlurmError(f"{shown}: {said}")
        failed.exit_status = code
        raise failed
    return out


def _collect(proc: subprocess.Popen[bytes], timeout_s: float,
             max_bytes: int) -> tuple[bytes, bytes, str | None]:
    """(stdout, the end of stderr, None | "timeout" | "size") once both pipes close."""
    assert proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    err = bytearray()
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "timeout"
            for key, _ in sel.select(min(left, 1.0)):
                data = os.read(key.fd, _CHUNK)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                buf = key.data
                buf += data
                if buf is out and len(out) > max_bytes:
                    return bytes(out[:max_bytes]), bytes(err), "size"
                if buf is err and len(err) > 2 * _STDERR_KEEP:
                    del err[:-_STDERR_KEEP]
    return bytes(out), bytes(err[-_STDERR_KEEP:]), None
