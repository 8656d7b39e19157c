"""Reading ``explain``'s inputs in bounded memory, however large they are.

A pasted command output is kilobytes and is read whole, as it always was.  A log can be
hundreds of megabytes: holding it as one list of lines and then as peeled ``LogLine``s cost
about ten times its size (2.1 GB for a 200 MB kernel log).  So an input larger than
:data:`WHOLE_BYTES` is read in blocks: its kind is decided from its head, and a log runs
through every log-rule family one window of lines at a time, the findings of all windows
folded as one input's are (``merge_same``: the first line is the evidence, the count adds
up).  Line numbers stay those of the file.

What a window boundary costs: a rule that reads a neighbouring line (an Xid line continued
on the next, a traceback's frames) sees only its own window's lines, so an incident that
straddles a boundary may lose that context.  Windows are :data:`BLOCK_BYTES` of text each,
so this concerns a few lines per two megabytes.

What is skipped is said, in ``parsed``: a line longer than :data:`MAX_LINE_CHARS` keeps its
head (``long_lines_cut``), and a structured output (a table, ``-q``, CSV) larger than
:data:`MAX_STRUCTURED_BYTES` is parsed from its first bytes only (``bytes_skipped``).
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Iterator
from typing import BinaryIO

from probes.explain.detect import LOG, detect_kind
from probes.explain.run import ExplainedInput, ExplainInputError, explain_bytes
from probes.rules.logrules.families import scan_lines
from probes.rules.logrules.lines import log_line
from probes.rules.result import ExplainFinding, KindResult, merge_same
from probes.rules.text import split_lines
from probes.rules.throughput import Seen, assemble, collect

BLOCK_BYTES = 2 * 1024 * 1024
"""Bytes read at a time, and so about the text of one window of log lines."""
WHOLE_BYTES = 4 * 1024 * 1024
"""An input up to this size is read whole and explained exactly as a pasted output is."""
DETECT_BYTES = 1024 * 1024
"""How much of a larger input's head decides its kind (every signature is in its first lines)."""
MAX_STRUCTURED_BYTES = 32 * 1024 * 1024
"""A structured output larger than this is parsed from its head; the rest is skipped."""
MAX_LINE_CHARS = 1024 * 1024
"""A line longer than this keeps its head: no rule needs more, and memory stays bounded."""
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""The characters ``str.splitlines`` ends a line at (the contract's definition of a line)."""


def open_input(path: str) -> BinaryIO:
    """``path`` opened for reading; ``-`` is standard input.

    Raises:
        ExplainInputError: the file cannot be opened.
    """
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")  # the caller closes it
    except IsADirectoryError:
        raise ExplainInputError(f"{path}: is a directory") from None
    except OSError as exc:
        raise ExplainInputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read(path: str, fh: BinaryIO, n: int) -> bytes:
    try:
        return fh.read(n)
    except OSError as exc:
        raise ExplainInputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def explain_stream(path: str, fh: BinaryIO, kind: str | None = None) -> ExplainedInput:
    """Detect (unless ``kind`` is given) and explain one input read from ``fh``."""
    head = _read(path, fh, WHOLE_BYTES + 1)
    if len(head) <= WHOLE_BYTES:
        return explain_bytes(path, head, kind)
    chosen = kind
    if chosen is None:
        text = _decoder().decode(head[:DETECT_BYTES])
        chosen = detect_kind(split_lines(text[:_cut(text)]))
    if chosen == LOG:
        return ExplainedInput(path, explain_log_blocks(_blocks(path, fh, head)))
    return _structured_head(path, fh, head, chosen)


def _structured_head(path: str, fh: BinaryIO, head: bytes, kind: str) -> ExplainedInput:
    """A structured output too large to be one: its first bytes, the rest counted."""
    raw = head + _read(path, fh, MAX_STRUCTURED_BYTES - len(head))
    skipped = 0
    while block := _read(path, fh, BLOCK_BYTES):
        skipped += len(block)
    done = explain_bytes(path, raw, kind)
    if not skipped:
        return done
    parsed = {**done.result.parsed, "bytes_read": len(raw), "bytes_skipped": skipped}
    return ExplainedInput(path, KindResult(done.result.kind, parsed, done.result.findings))


def _decoder() -> codecs.IncrementalDecoder:
    """UTF-8 where it is, U+FFFD where it is not (as ``probes.rules.text.decode``)."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


def _blocks(path: str, fh: BinaryIO, first: bytes) -> Iterator[bytes]:
    for at in range(0, len(first), BLOCK_BYTES):
        yield first[at:at + BLOCK_BYTES]
    while block := _read(path, fh, BLOCK_BYTES):
        yield block


def _cut(text: str) -> int:
    """Where the complete lines of ``text`` end: after its last line break, but never
    between a CR and the LF that may follow in the next block."""
    end = len(text) - 1 if text.endswith("\r") else len(text)
    return max(text.rfind(c, 0, end) for c in _BREAKS) + 1


class _Lines:
    """Blocks of bytes in, windows of whole lines out; overlong lines cut to their head."""

    def __init__(self) -> None:
        self.decoder = _decoder()
        self.carry = ""
        self.first = True
        self.dropping = False  # the carry is the head of a cut line: drop up to its end
        self.long_lines = 0

    def feed(self, block: bytes, final: bool = False) -> list[str]:
        new = self.decoder.decode(block, final)
        if self.first and new:
            self.first = False
            new = new[1:] if new.startswith("\ufeff") else new
        if self.dropping:
            j = _first_break(new)
            if j < 0 and not final:
                return []
            new = new[j:] if j >= 0 else ""
            self.dropping = False
        text = self.carry + new
        cut = len(text) if final else _cut(text)
        done, rest = text[:cut], text[cut:]
        ended = rest.endswith("\r")  # the line has ended; only its LF may follow
        if len(rest) - ended > MAX_LINE_CHARS:
            self.long_lines += 1
            rest, self.dropping = rest[:MAX_LINE_CHARS] + "\r" * ended, not ended
        self.carry = rest
        return split_lines(done) if done else []


def _first_break(text: str) -> int:
    """Where the first line break of ``text`` is, -1 when it has none."""
    found = [i for i in (text.find(c) for c in _BREAKS) if i >= 0]
    return min(found) if found else -1


def explain_log_blocks(blocks: Iterator[bytes]) -> KindResult:
    """The ``log`` kind over an input given as blocks of bytes, a window at a time.

    ``parsed`` is the contract's ``lines`` count, plus ``long_lines_cut`` when a line
    over :data:`MAX_LINE_CHARS` was cut to its head.
    """
    reader = _Lines()
    found: list[ExplainFinding] = []
    seen: list[Seen] = []
    count = 0
    for block in blocks:
        count = _scan(reader.feed(block), count, found, seen)
        found[:] = merge_same(found)
    count = _scan(reader.feed(b"", final=True), count, found, seen)
    parsed: dict[str, object] = {"lines": count}
    speed = assemble(seen)
    if speed is not None:
        parsed["throughput"] = speed.to_parsed()
    if reader.long_lines:
        parsed["long_lines_cut"] = reader.long_lines
        parsed["max_line_chars"] = MAX_LINE_CHARS
    return KindResult(LOG, parsed, tuple(merge_same(found)))


def _scan(lines: list[str], before: int, found: list[ExplainFinding], seen: list[Seen]) -> int:
    """Peel and scan one window; line numbers continue from ``before``.  Returns the count."""
    window = [log_line(i, raw) for i, raw in enumerate(lines, before + 1)]
    found.extend(scan_lines(window))
    collect(window, seen)
    return before + len(lines)
