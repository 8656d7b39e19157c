"""Turn whatever the operator pasted into lines a parser can trust.

Input arrives as bytes in any state: CRLF, non-UTF-8, wrapped in markdown fences or quote
marks, right-padded.  Cleaning never adds or removes lines, so a finding's line number is
the line number in the file as given.
"""

from __future__ import annotations

import re

from probes.wire.sanitize import clean_log_line

_FENCE = re.compile(r"^\s*(?:>\s*)*```[\w+-]*\s*$")
_QUOTE_PREFIX = re.compile(r"^(?:\s{0,3}>(?: |$))+")


def decode(raw: bytes) -> str:
    """UTF-8 where it is, U+FFFD where it is not; a BOM is dropped."""
    text = raw.decode("utf-8", errors="replace")
    return text[1:] if text.startswith("\ufeff") else text


def split_lines(text: str) -> list[str]:
    """``str.splitlines()``, the contract's definition of a line, each made safe to show.

    A pasted log is written by whoever could write on the host: an ESC sequence in it
    (OSC 52 writes the clipboard) or a bidi override must not reach the operator's
    terminal through ``explain``'s report.  Each line is cleaned after the split, so line
    numbers stay those of the file; controls show as ``\\x1b``, tabs stay (columns).
    """
    return [clean_log_line(line) for line in text.splitlines()]


def clean_line(line: str) -> str:
    """One line without the decorations a paste adds: fences, ``> `` quotes, right padding.

    Leading indentation is kept, because several formats (``nvidia-smi -q``, lspci) carry
    structure in it.
    """
    if _FENCE.match(line):
        return ""
    line = _QUOTE_PREFIX.sub("", line).rstrip()
    # a fence glued to the line's end; a string test, as ``\s*```\s*$`` cost the square
    # of a line of spaces (it restarts at every space)
    return line[:-3].rstrip() if line.endswith("```") else line


MAX_RULE_CHARS = 8192
"""The most of one log line that any log rule reads.  The agent sends at most this much of a
line (``MAX_EVENT_LINE``), and a real line that matters is shorter: an NCCL watchdog or
``ncclInternalError`` line is a few hundred characters, a ring listing of a thousand ranks
or a traceback a launcher flattened onto one line a few KB.  A longer line keeps its head
and its tail (:func:`rule_line`), so an error at the end of a flattened traceback is still
read, and no line, however a host or job writes it, costs more than this many characters."""
RULE_TAIL_CHARS = 2048
"""Of a cut line, the characters kept from its end (a flattened traceback's exception)."""
MAX_DIGIT_RUN = 64
"""Digits in a row that a rule reads; a longer run keeps its first digits and ``…``.  No
real amount, id or count is this long, and ``int()`` refuses a run over 4,300 digits, so a
hostile ``Tried to allocate 111…1`` must not reach one."""
CUT = "…"
_LONG_DIGITS = re.compile(rf"(?<!\d)\d{{{MAX_DIGIT_RUN + 1},}}")


def rule_line(line: str) -> str:
    """What of one log line the rules read: at most :data:`MAX_RULE_CHARS` characters (head
    and tail, joined by ``…``), digit runs at most :data:`MAX_DIGIT_RUN` long.

    Every log rule's cost is linear in its line; this bounds the line, so one line costs at
    most a few milliseconds of all the rules together, and the pattern-cost test holds the
    rules linear up to this length and beyond.
    """
    if len(line) > MAX_RULE_CHARS:
        head = MAX_RULE_CHARS - RULE_TAIL_CHARS - len(CUT)
        line = line[:head] + CUT + line[-RULE_TAIL_CHARS:]
    if len(line) > MAX_DIGIT_RUN:
        line = _LONG_DIGITS.sub(lambda m: m.group()[:MAX_DIGIT_RUN] + CUT, line)
    return line


def clean_lines(lines: list[str]) -> list[str]:
    """``clean_line`` over every line, keeping the count."""
    return [clean_line(line) for line in lines]
