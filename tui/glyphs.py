"""Plain glyphs for terminals without braille, block or box-drawing characters.

The Linux console, a serial line or a ``LANG=C`` session over an old jump host show
braille charts and box lines as garbage.  Rather than every widget carrying two glyph
sets, the console adds one line filter that maps each such character to an ASCII one of
the same width as the screen is drawn: charts become dots, bars ``#``, boxes ``+-|``,
``91 °C`` becomes ``  91C``.  Status never depends on a glyph alone (a word goes with it),
so nothing is lost.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

ASCII_ENV = "RIGWATCH_ASCII"

_SYMBOLS = {
    "▁": "_", "▂": "_", "▃": ".", "▄": "-", "▅": "=", "▆": "=", "▇": "#", "█": "#",
    "▏": "|", "▎": "|", "▍": "#", "▌": "#", "▋": "#", "▊": "#", "▉": "#", "▐": "|",
    "▔": "-", "▀": "-", "░": ".", "▒": ":", "▓": "#",
    # a lost GPU (✗) and a down host (×) must not read the same: X and x
    "✓": "+", "✔": "+", "✗": "X", "✘": "X", "×": "x", "⚠": "!", "●": "*", "•": "*",
    "○": "o", "◆": "*", "·": ".", "…": "~", "▲": "^", "▼": "v", "△": "^", "▽": "v",
    "▶": ">", "◀": "<", "▸": ">", "◂": "<", "↑": "^", "↓": "v", "→": ">", "←": "<",
    "≥": ">", "≤": "<", "≈": "=", "−": "-", "–": "-", "—": "-", "⏎": "<", "⏵": ">", "°": "o",
}
DEGREES = re.compile(r"(-?\d+(?:\.\d+)?)( ?)°C")
"""A temperature: its degree sign goes and the number moves right by as much, so a
right-aligned column stays aligned (``91 °C`` → ``  91C``); any other ``°`` reads ``o``."""


def _degrees(m: re.Match[str]) -> str:
    return " " * (len(m[2]) + 1) + m[1] + "C"


def plain_text(text: str) -> str:
    """``text`` in ASCII of the same width (what the line filter does to each segment)."""
    if "°" in text:
        text = DEGREES.sub(_degrees, text)
    return text.translate(ASCII_TABLE)


def _box(char: str) -> str:
    name = unicodedata.name(char, "")
    if " AND " in name or "CROSS" in name:
        return "+"  # corners, tees and crossings
    if "DIAGONAL" in name:
        return {"╱": "/", "╲": "\\"}.get(char, "x")
    if "HORIZONTAL" in name or name.endswith((" LEFT", " RIGHT")):
        return "-"
    return "|"


def _table() -> dict[int, str]:
    table = {ord(c): a for c, a in _SYMBOLS.items()}
    table.update({c: _box(chr(c)) for c in range(0x2500, 0x2580)})
    table.update({ord("╼"): "-", ord("╾"): "-", ord("╽"): "|", ord("╿"): "|"})
    # braille: an empty cell stays empty, any dots become one
    table.update({c: "." for c in range(0x2801, 0x2900)})
    table[0x2800] = " "
    return table


ASCII_TABLE: Mapping[int, str] = _table()


class AsciiGlyphs(LineFilter):
    """Map braille, blocks, box drawing and symbols to ASCII of the same width."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        """Translate each segment's text; styles and controls are kept."""
        return [Segment(plain_text(text), style, control)
                for text, style, control in segments]


def wants_ascii(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to draw plain glyphs: asked for, or a terminal or locale that lacks them.

    ``RIGWATCH_ASCII=1`` forces plain glyphs and ``=0`` forbids them; otherwise the Linux
    virtual console (``TERM=linux``, no braille in its font) and a locale whose character
    set is not UTF-8 get them.
    """
    forced = environ.get(ASCII_ENV)
    if forced is not None and forced != "":
        return forced not in ("0", "no", "false")
    if environ.get("TERM") == "linux":
        return True
    for var in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = environ.get(var)
        if value:
            return not _is_utf8(value)
    return False


def _is_utf8(locale_name: str) -> bool:
    if locale_name in ("C.UTF-8", "C.utf8"):
        return True
    charset = locale_name.partition(".")[2].partition("@")[0]
    return charset.lower().replace("-", "") == "utf8"
