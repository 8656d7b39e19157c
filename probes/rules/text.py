"""Turn whatever the operator pasted into lines a parser can trust.

Input arrives as bytes in any state: CRLF, non-UTF-8, wrapped in markdown fences or quote
marks, right-padded.  Cleaning never adds or removes lines, so a finding's line number is
the line number in the file as given.
"""

from __future__ import annotations

import re

from probes.wire.sanitize import clean_log_line

_FENCE = re.compile(r"^\s*(?:>\s*)*```[\w+-]*\s*$")
_GLUED_FENCE = re.compile(r"\s*```\s*$")
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
    line = _QUOTE_PREFIX.sub("", line)
    line = _GLUED_FENCE.sub("", line)
    return line.rstrip()


def clean_lines(lines: list[str]) -> list[str]:
    """``clean_line`` over every line, keeping the count."""
    return [clean_line(line) for line in lines]
