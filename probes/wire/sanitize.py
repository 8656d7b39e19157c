"""Make text written on a host safe to show: the one boundary every host string crosses.

A job log, a process name or a disk name is written by whoever can write on a watched
host.  Shown raw, an ESC sequence in it would reach the operator's terminal (OSC 0 sets
the title, OSC 52 writes the clipboard, CSI 2J clears the screen), a bidi override would
make a line read backwards, and a lone surrogate would make the terminal write raise.
So every string that comes off the wire (``probes.wire.protocol``) or out of a pasted
file (``probes.rules.text``) passes through :func:`clean_text` once, before any other
code sees it; widgets, reports and alerts downstream can then trust it is printable.

Nothing is silently lost: a control character becomes its escape (``\\x1b``), an
invisible formatting character its code point (``<U+202E>``), so the evidence stays
readable and a reviewer can see something was there.
"""

from __future__ import annotations

import re
from array import array
from itertools import accumulate
from typing import Any

import orjson

from probes.errors import ProtocolError

_UNSAFE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f"  # C0 (tab apart), DEL, C1 (incl. CSI U+009B, OSC U+009D)
    "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"  # bidi marks, zero width
    "\u2028\u2029\ufeff\ufff9-\ufffb"  # line/paragraph separators, BOM, annotations
    "\ud800-\udfff]"  # lone surrogates (json decodes "\ud800"); a terminal write would raise
)
_UNSAFE_OR_TAB = re.compile(_UNSAFE.pattern[:1] + "\t" + _UNSAFE.pattern[1:])
_LAYOUT_UNSAFE = re.compile(_UNSAFE.pattern.replace("\x0a-\x1f", "\x0b-\x1f"))
"""For multi-line text (``nvidia-smi topo -m``): newline and tab are its layout."""

MAX_DEPTH = 64
"""The deepest JSON nesting a wire line or its walk may have; ours is 5 deep."""


class TooDeep(ProtocolError):
    """A wire line nested deeper than :data:`MAX_DEPTH`: a hostile line, not ours."""

    title = "Agent output nested too deep"


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if ch == "\t":
        return " "
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    return f"<U+{code:04X}>"


def clean_text(text: str) -> str:
    """``text`` as one printable line: controls escaped, invisibles named, tabs as spaces.

    The all-printable case costs one precompiled search and returns ``text`` itself.
    """
    if _UNSAFE_OR_TAB.search(text) is None:
        return text
    return _UNSAFE_OR_TAB.sub(_visible, text)


def clean_log_line(line: str) -> str:
    """Like :func:`clean_text` but tabs are kept: pasted tables align columns with them."""
    if _UNSAFE.search(line) is None:
        return line
    return _UNSAFE.sub(_visible, line)


def clean_block(text: str) -> str:
    """Like :func:`clean_text` but newlines and tabs are kept (a table's layout)."""
    if _LAYOUT_UNSAFE.search(text) is None:
        return text
    return _LAYOUT_UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def may_need_cleaning(line: bytes) -> bool:
    """Whether a raw wire line could decode to a string :func:`clean_text` would change.

    The agent writes ASCII JSON (``ensure_ascii``), where every control and non-ASCII
    character arrives as a backslash escape; a line without a backslash, DEL or a
    non-ASCII byte holds none.  Two C-speed scans, so a sample line pays almost nothing.
    """
    return b"\\" in line or b"\x7f" in line or not line.isascii()


def clean_json(value: Any, block_keys: frozenset[str] = frozenset(), depth: int = 0) -> Any:
    """A parsed JSON value with every string (keys included) cleaned.

    Values under a key in ``block_keys`` keep their newlines (:func:`clean_block`).

    Raises:
        TooDeep: nesting beyond :data:`MAX_DEPTH` (a hostile line, not ours).
    """
    if isinstance(value, str):
        return clean_text(value)
    if depth > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH}")
    # A number, a bool or null one level down is itself (the call below would return it
    # unchanged; at the last level it raises): a hello holds hundreds, and a call for each
    # was most of a connect storm's walk (issue 38 item 5).
    plain = _PLAIN if depth < MAX_DEPTH else frozenset()
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k:
                (v if type(v) in plain else clean_block(v) if isinstance(v, str) and k in
                 block_keys else clean_json(v, block_keys, depth + 1))
                for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in plain else clean_json(v, block_keys, depth + 1)
                for v in value]
    return value


_PLAIN = frozenset({int, float, bool, type(None)})
"""Exact types ``clean_json`` returns as they are (JSON's numbers, booleans, null)."""


_ESCAPE = re.compile(rb'\\[^"\\]')
"""In orjson's output, an escape other than ``\\"`` and ``\\\\``: a control character
(orjson writes every other character as itself; where this also matches the second half
of an escaped backslash, the walk below is merely not skipped)."""


def clean_tree(value: Any, block_keys: frozenset[str] = frozenset(), depth: int = 0) -> Any:
    """What :func:`clean_json` returns (or raises) for a tree ``orjson.loads`` made, without
    walking it when no string in it needs cleaning (issue 38 item 5).

    A hello's topology text (a ``block_keys`` value) is full of ``\\n`` escapes, so the
    whole hello "may need cleaning" (``may_need_cleaning``), and the walk over its ~1,400
    values was half of its decode in a connect storm.  Here the string values under
    ``block_keys`` at the top and one level down are set aside, the rest is written back
    with orjson (C speed) and searched: ASCII with no escape but ``\\"``/``\\\\`` and no DEL
    means no string (key or value) holds a character :func:`clean_text` would change; the
    set-aside texts get :func:`clean_block` as the walk gives them, and the nesting is
    checked as the walk checks it.  Anything else (a non-ASCII character, an escape, a lone
    surrogate orjson will not write) takes the walk itself.  The tree may be changed in
    place (its block texts cleaned); the walk's copy is returned otherwise.

    Raises:
        TooDeep: as :func:`clean_json`.
    """
    held: list[tuple[dict[str, Any], str, str]] = []
    if block_keys and type(value) is dict:
        for d in (value, *(v for v in value.values() if type(v) is dict)):
            for key in block_keys:
                text = d.get(key)
                if type(text) is str:
                    held.append((d, key, text))
                    d[key] = ""
    try:
        quiet = _nothing_to_clean(value, depth)
    finally:
        for d, key, text in held:
            d[key] = text
    if not quiet:
        return clean_json(value, block_keys, depth)
    for d, key, text in held:
        d[key] = clean_block(text)
    return value


def _nothing_to_clean(value: Any, depth: int) -> bool:
    try:
        dumped = orjson.dumps(value)
    except (TypeError, ValueError):  # a lone surrogate, a key that is no string: walk
        return False
    if not dumped.isascii() or b"\x7f" in dumped or _ESCAPE.search(dumped) is not None:
        return False
    return _shallow_enough(value, depth, dumped)


def _shallow_enough(value: Any, depth: int, dumped: bytes) -> bool:
    """Whether :func:`clean_json` would not raise ``TooDeep``: it does for any node but a
    string deeper than :data:`MAX_DEPTH`."""
    if dumped.count(b"[") + dumped.count(b"{") <= MAX_DEPTH - depth:
        return True  # not enough containers to reach that deep (brackets in strings count)
    if b"\\" not in dumped and _nesting(_unquoted(dumped)) <= MAX_DEPTH - depth:
        # orjson's text of the tree, its strings removed: its deepest container is at
        # ``depth`` + nesting - 1, below ``MAX_DEPTH`` (a hello's ~300 containers, walked
        # one by one, were ~50 µs of its ~95 µs clean; issue 38, start-up)
        return True
    todo: list[tuple[Any, int]] = [(value, depth)]
    while todo:
        node, level = todo.pop()
        if level > MAX_DEPTH:
            return False
        kids = node.values() if type(node) is dict else node if type(node) is list else ()
        for kid in kids:
            if type(kid) is dict or type(kid) is list:
                todo.append((kid, level + 1))
            elif level == MAX_DEPTH and type(kid) is not str:
                return False
    return True


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""An opener as +1 and a closer as -1 (``array("b")`` reads ``0xff`` as -1)."""
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def check_depth(line: bytes) -> None:
    """Refuse a line nested deeper than :data:`MAX_DEPTH` before a recursive parser sees it.

    Counting openers is enough for almost every line; only one with more openers than
    the cap is scanned (strings removed first, so a ``[`` inside a log line is no level).
    The scan is C-speed: a line without a backslash has no escaped quote, so its strings
    are every other piece between quotes (as ``_STRINGS`` matches them, an unclosed last
    quote's rest kept); the brackets left become +1 and -1 steps and the deepest point is
    their running sum's maximum (issue 38: a fabric report's ~360 brackets, one by one in
    Python, cost ~110 µs of its ~200 µs decode in the collector and again in the console).

    Raises:
        TooDeep: the line is nested too deep.
    """
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return
    if _nesting(_STRINGS.sub(b"", line) if b"\\" in line else _unquoted(line)) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH}")


def _unquoted(text: bytes) -> bytes:
    """``text`` without its strings, where it holds no backslash (so no escaped quote):
    every other piece between quotes, as ``_STRINGS`` removes them (the rest after an
    unclosed last quote kept, as that regex keeps it)."""
    pieces = text.split(b'"')
    outside = b"".join(pieces[::2])
    if not len(pieces) % 2:  # an odd count of quotes: the last one opens no string
        outside += pieces[-1]
    return outside


def _nesting(outside: bytes) -> int:
    """The deepest point of the brackets in ``outside`` (strings already removed), counting
    an opener as +1 and a closer as -1 whatever their kind: the running sum's maximum."""
    steps = array("b", outside.translate(_STEPS, _NOT_BRACKETS))
    return max(accumulate(steps), default=0)
