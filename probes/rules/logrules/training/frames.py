"""Python tracebacks in a log: the frames above an exception, and the innermost user one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from probes.rules.logrules.lines import LogLine

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<ln>\d+)(?:, in (?P<fn>[^\s,]+))?')
_LIBRARY = re.compile(r"[/\\](?:site-packages|dist-packages|lib[/\\]python\d[\d.]*)[/\\]"
                      r"|^<frozen |^<string>$")
FRAME_GAP = 4
"""Lines an exception may sit below its innermost frame (source line, ``^^^`` marks, a hint)."""


@dataclass(frozen=True)
class Frame:
    """One ``File "…", line N, in fn`` frame of a Python traceback."""

    path: str
    line: int
    function: str | None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}"
        return f"{where} in {self.function}" if self.function else where

    @property
    def short(self) -> str:
        base = re.split(r"[/\\]", self.path)[-1] or self.path
        where = f"{base}:{self.line}"
        return f"{where} in {self.function}" if self.function else where


def _frame(m: re.Match[str]) -> Frame:
    return Frame(m.group("path"), int(m.group("ln")), m.group("fn"))


def traceback_frames(lines: Sequence[LogLine], i: int, start: int) -> list[Frame]:
    """The frames of the traceback that ends at line ``i`` (outermost first; empty if none).

    The exception line follows its innermost frame within a few lines, or on the same line
    when a launcher flattened the traceback; each earlier frame is a few lines above the
    next.
    """
    same = list(_FRAME.finditer(lines[i].text[:start]))
    if same:
        return [_frame(m) for m in same]
    frames: list[Frame] = []
    limit = i - FRAME_GAP
    j = i - 1
    while j >= max(0, limit) and len(frames) < 200:
        found = list(_FRAME.finditer(lines[j].text))
        if found:
            frames[:0] = [_frame(m) for m in found]
            limit = j - FRAME_GAP
        elif "Traceback (most recent call last)" in lines[j].text:
            break
        j -= 1
    return frames


def user_frame(frames: list[Frame]) -> Frame | None:
    for f in reversed(frames):
        if not _LIBRARY.search(f.path):
            return f
    return None
