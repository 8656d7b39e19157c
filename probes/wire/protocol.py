"""Reading the agent's wire protocol v1: newline-delimited JSON, one object per line.

The reader is tolerant by design: unknown fields and unknown message types are
ignored, and a garbled, partial or over-long line is counted and skipped.  A host
that prints junk (a login banner, a Python warning, a half-written line when the
link drops) must never take the console down.

Here a host's stream becomes lines and each line a message; what one parsed object's
fields become, each checked by its type, is ``decode_fields``.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

try:
    import orjson as _orjson
except ImportError:  # the console still works on the standard library, only slower
    _orjson = None  # type: ignore[assignment]
from orjson import dumps as _dumps  # a dependency whatever the above (``sanitize``)

from probes.errors import ProtocolError
from probes.wire import structs
from probes.wire.compact import COMPACT_VERSION, CompactStream
from probes.wire.decode_fields import _DECODERS, _FAST_DECODERS, _decode_sample, _index
from probes.wire.fabric_fast import decode_fabric, fabric_shell
from probes.wire.hello_shared import reshared
from probes.wire.samples import AgentMessage, Hello, HostSample
from probes.wire.sanitize import check_depth, clean_tree, may_need_cleaning

PROTOCOL_VERSION = 1
_BLOCK_KEYS = frozenset({"topo_text", "nvlink_text"})
"""Fields whose newlines and tabs are their layout (``nvidia-smi topo -m``)."""
MAX_LINE_BYTES = 256 * 1024
"""A hello for a 16-GPU host is about 5 KiB; anything this long is not ours."""


@dataclass
class StreamStats:
    """Counters of what the reader skipped, shown per host so junk is visible."""

    lines: int = 0
    garbled: int = 0
    overlong: int = 0
    unknown_type: int = 0


class LineSplitter:
    """Split a byte stream into lines with a bounded buffer.

    An over-long line is dropped as it arrives, never held whole; reading resumes after it.
    """

    def __init__(self, stats: StreamStats, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._discarding = False
        self._max = max_line_bytes
        self._stats = stats

    def feed(self, chunk: bytes) -> Iterator[bytes | None]:
        """Yield the complete lines that ``chunk`` finishes, without their newline.

        An over-long line yields ``None`` where it ended, so readers see it in order.
        """
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._keep(chunk[start:])
                return
            piece = chunk[start:nl]
            start = nl + 1
            if self._discarding:
                self._discarding = False
                self._buf.clear()
                yield None
                continue
            if not self._buf and len(piece) <= self._max:  # a whole line in this chunk:
                yield piece  # no copy through the buffer (nearly every tick's line)
                continue
            if len(self._buf) + len(piece) > self._max:
                self._stats.overlong += 1
                self._buf.clear()
                yield None
                continue
            self._buf += piece
            line = bytes(self._buf)
            self._buf.clear()
            yield line

    def idle(self) -> bool:
        """Nothing held of a line and none being dropped: a chunk's first line is whole
        from its first byte."""
        return not self._buf and not self._discarding

    def flush(self) -> Iterator[bytes]:
        """Yield a final line that had no newline (the stream ended)."""
        if self._buf and not self._discarding:
            yield bytes(self._buf)
        self._buf.clear()
        self._discarding = False

    def _keep(self, rest: bytes) -> None:
        if self._discarding:
            return
        if len(self._buf) + len(rest) > self._max:
            self._stats.overlong += 1
            self._buf.clear()
            self._discarding = True
            return
        self._buf += rest


class MessageReader:
    """Turn raw stream chunks into typed messages, counting what is skipped."""

    builds_ticks = True
    """False: a v2 tick is only checked (its verdict counts as for any line) and no sample
    is returned; a collector relays the bytes and the console decodes them (issue 38).
    Likewise a ``fabric`` report the one-pass decode takes is only checked, and comes back
    as its shell (``fabric_fast.fabric_shell``: its time, no ports or links), which the
    session counts as a message and nothing reads (issue 38, start-up)."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.stats = StreamStats()
        self._splitter = LineSplitter(self.stats, max_line_bytes)
        self.bad_streak = 0
        """Garbled or over-long lines since the last good message."""
        self.compact: CompactStream | None = None
        """The stream's v2 state, from its v2 hello (None: v1, the default)."""
        self.tick_row: Any = None
        """A reader that does not build ticks: the row of the last tick its fast path took
        whole (``CompactStream.readable``), else None; a collector relays it."""

    def feed(self, chunk: bytes) -> list[AgentMessage]:
        """Decode every complete line in ``chunk``."""
        return [m for line in self._splitter.feed(chunk) if (m := self._decode(line)) is not None]

    def close(self) -> list[AgentMessage]:
        """Decode what is left when the stream ends."""
        return [m for line in self._splitter.flush() if (m := self._decode(line)) is not None]

    def _decode(self, line: bytes | None) -> AgentMessage | None:
        if line is None:
            self.bad_streak += 1
            return None
        if not line.strip():
            return None
        self.stats.lines += 1
        try:
            obj = None
            if self.compact is not None:
                msg = self._decode_v2(line)
            else:
                msg, obj = _decode_line(line, self.builds_ticks)
            if msg is None:
                return None
            if isinstance(msg, Hello):  # the columns from the object it was decoded from
                self.compact = None if msg.protocol < COMPACT_VERSION else \
                    self._stream(_columns(line) if obj is None else _columns_of(obj))
        except UnknownMessageType:
            self.stats.unknown_type += 1
            return None
        except Exception:  # any failure is one host's junk line, never the fleet's
            self.stats.garbled += 1
            self.bad_streak += 1
            return None
        self.bad_streak = 0
        return msg


    def _stream(self, columns: Any) -> CompactStream:
        """A v2 stream's state, new at its hello (``columns``: the hello's, cleaned)."""
        return CompactStream(columns, _decode_sample, builds=self.builds_ticks, parse=_parsed,
                             gpu_index=_index, statics=_static_half)

    def relayed_hello(self, hello: Hello, columns: Any) -> Hello:
        """Take a hello a collector decoded from this stream's line (``columns``: that
        line's, cleaned, as ``_columns`` gave them there) as ``feed`` takes the line: the
        line counted, the stream's v2 state new, the streak ended.  The facts the decode
        shares come back as this process's shared objects (``shared``)."""
        self.stats.lines += 1
        self.compact = None if hello.protocol < COMPACT_VERSION else \
            self._stream(shared_columns(columns))
        self.bad_streak = 0
        return reshared(hello)

    def _decode_v2(self, line: bytes) -> AgentMessage | None:
        """A line of a v2 stream: an array is a tick, ``static`` updates the state."""
        assert self.compact is not None
        head = line.lstrip()[:1]
        if head == b"[":
            raw = None if may_need_cleaning(line) else line
            if not self.builds_ticks:
                self.tick_row = self.compact.readable(raw, lambda: _parsed(line))
                self.bad_streak = 0  # a good line, as when a sample is returned
                return None
            return self.compact.sample(raw, lambda: _parsed(line))
        if b'"static"' in line:  # else no need to parse it twice
            obj, finite = _loads(line)
            if may_need_cleaning(line):  # as ``_parsed``
                obj = clean_tree(obj, _BLOCK_KEYS)
            if isinstance(obj, dict) and obj.get("type") == "static":
                self.compact.static(obj, zlib.crc32(line), line, finite)
                return None
        return _decode_line(line, self.builds_ticks)[0]


def _static_half(obj: dict[str, Any]) -> HostSample:
    """``_decode_sample(obj)`` of a ``static`` message's half as v1's sample, every float
    finite (``CompactStream._check_all``), as ``decode_line`` takes such a line: its orjson
    text, where it needs no cleaning, in one pass (``structs.decode_sample``: the checked
    decoder's answer, types and signs too, or a refusal), else the checked decoder (issue
    38, start-up: ~70 µs of the console's ~200 µs a ``static`` message)."""
    try:
        line = _dumps(obj)
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        return _decode_sample(obj)
    if not may_need_cleaning(line):
        try:
            check_depth(line)
            return structs.decode_sample(line)
        except Exception:  # the checked decoder decides
            pass
    return _decode_sample(obj)


def _parsed(line: bytes) -> Any:
    """One line parsed and every string sanitised (the checked path's first step)."""
    obj, _ = _loads(line)
    return clean_tree(obj, _BLOCK_KEYS) if may_need_cleaning(line) else obj


COLUMNS_SHARED_MAX = 64
"""Distinct ``columns`` declarations kept for sharing (a fleet runs a few agent versions)."""
_columns_seen: dict[str, Any] = {}


def _columns(hello: bytes) -> Any:
    """A v2 hello's ``columns``, cleaned: the whole hello is not walked a second time.

    Equal declarations (``repr``: the same keys, names and JSON types, in order) are one
    parsed object, so every host's stream holds the same names (issue 38, memory: ~4 KB a
    host in the console and in a collector).  Nothing writes to it."""
    obj, _ = _loads(hello)
    if not isinstance(obj, dict):
        return None
    cols = obj.get("columns")
    return shared_columns(clean_tree(cols, _BLOCK_KEYS, 1) if may_need_cleaning(hello) else cols)


def _columns_of(hello: dict[str, Any]) -> Any:
    """``_columns`` of a hello's line from the object it was decoded from (sanitised whole,
    so its ``columns`` are those ``_columns`` cleans one level down): no second parse."""
    return shared_columns(hello.get("columns"))


def shared_columns(cols: Any) -> Any:
    """``cols`` (a hello's ``columns``, cleaned), or the equal declaration met before."""
    key = repr(cols)
    seen = _columns_seen.get(key)
    if seen is not None:
        return seen
    if len(_columns_seen) >= COLUMNS_SHARED_MAX:
        _columns_seen.clear()
    _columns_seen[key] = cols
    return cols


class UnknownMessageType(ProtocolError):
    """A well-formed line of a type this console does not know (a newer agent)."""


def decode_line(line: bytes | str) -> AgentMessage:
    """Decode one wire line.

    Args:
        line: one line, with or without its newline.

    Returns:
        The typed message.

    Raises:
        UnknownMessageType: valid JSON object with a ``type`` we do not know.
        ProtocolError: not JSON, not an object, or a known type with unusable fields.
    """
    return _decode_line(line)[0]


def _decode_line(line: bytes | str, builds: bool = True) -> tuple[AgentMessage, Any]:
    """``decode_line``, and the parsed, sanitised object it decoded the message from (None
    where a one-pass path decoded it: a sample or a fabric report, never a hello).  Not
    ``builds``: a fabric report the one-pass path takes comes back as its shell."""
    if type(line) is bytes and line.startswith(b'{"type":"sample"'):
        try:  # the one-pass path for a clean line; anything it refuses is judged below
            if not may_need_cleaning(line):
                check_depth(line)
                return structs.decode_sample(line), None
        except Exception:  # the checked path below decides
            pass
    elif type(line) is bytes and line.startswith(b'{"type":"fabric"'):
        try:  # the same for the agent's fabric report (fabric_fast)
            if not may_need_cleaning(line):
                check_depth(line)
                return decode_fabric(line) if builds else fabric_shell(line), None
        except Exception:  # the checked path below decides
            pass
    obj, finite = _loads(line)
    if may_need_cleaning(line if isinstance(line, bytes) else line.encode("utf-8", "replace")):
        obj = clean_tree(obj, _BLOCK_KEYS)  # raises TooDeep, a ProtocolError
    if not isinstance(obj, dict):
        raise ProtocolError("not a JSON object")
    kind = obj.get("type")
    decoder = None
    if isinstance(kind, str):
        decoder = (_FAST_DECODERS.get(kind) if finite else None) or _DECODERS.get(kind)
    if decoder is None:
        raise UnknownMessageType(f"unknown message type {kind!r}")
    try:
        return decoder(obj), obj
    except Exception as exc:  # any decoder failure is a garbled line
        raise ProtocolError(f"bad {kind} message: {exc!r}") from None


def _loads(line: bytes | str) -> tuple[Any, bool]:
    """Parse one line; the flag says every float in the result is finite.

    orjson (a console dependency) parses a sample line three times faster than the
    standard library and refuses NaN, Infinity and numbers that overflow a double, so
    what it returns needs no finiteness checks.  A line it refuses gets a second chance
    with ``json``, whose result takes the fully checked path.
    """
    if _orjson is not None:
        try:
            return _orjson.loads(line), True
        except _orjson.JSONDecodeError:
            pass
    try:
        check_depth(line if isinstance(line, bytes) else line.encode("utf-8", "replace"))
        return json.loads(line), False
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
