"""Turn whatever the operator pasted into lines a parser can trust.

Input arrives as bytes in any state: CRLF, non-UTF-8, wrapped in markdown fences or quote
marks, right-padded.  Cleaning never adds or removes lines, so a finding's line number is
the line number in the file as given.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*(?:>\s*)*```[\w+-]*\s*$")
_GLUED_FENCE = re.compile(r"\s*```\s*$")
_QUOTE_PREFIX = re.compile(r"^(?:\s{0,3}>(?: |$))+")


def decode(raw: bytes) -> str:
    """UTF-8 where it is, U+FFFD where it is not; a BOM is dropped."""
    text = raw.decode("utf-8", errors="replace")
    return text[1:] if text.startswith("\ufeff") else text


def split_lines(text: str) -> list[str]:
    """``str.splitlines()``, the contract's definition of a line."""
    return text.splitlines()


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
