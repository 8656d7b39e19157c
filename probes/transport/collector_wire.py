"""What a collector process and the console say to each other over the child's pipes.

Console → collector (stdin): one frame holding the shard (``CollectorJob``), then text
command lines (``retry <index>``).  End of stdin tells the collector to stop its sessions
and exit.

Collector → console (stdout): frames, each a batch of ``(host index, entry)`` pairs in the
order they happened.  An entry is one of:

* ``bytes``: whole lines of what that host's agent sent, in order (``relay``: while the
  console does not read, only each host's newest sample is kept).  The console runs its
  own reader over them: hellos, ``static`` messages, logs, fabric reports, v1 samples and
  any v2 tick the collector's fast path did not take whole (the checked path: text to
  sanitise, odd values) are decoded on each side (the collector's decode drives its
  session logic: garbage limits, the kernel-log cursor).
* a ``RelayedTick``, ``(static_id, body)``: a v2 tick the collector's stream decoded on its
  fast path (nearly every line, the ticks with PCIe chains too), as its typed row
  (``compact.SampleRow``) in msgpack, and the CRC-32 of the ``static`` line in force. The
  console builds the sample from the row against its own reader's stream, at the same
  ``static`` line only (a relay that dropped one, while the console did not read, sends the
  ticks as text until the next), with the fast path's checks and the row decoder's bounds,
  and never parses the tick's text (tests/bench/RESULTS.md, "#38 decode once": the
  console's steady cost per host-sample 11.8 µs instead of 15.7 µs; the collector's 1.4 µs
  more for the encode).
  A decoded ``HostSample`` is never pickled: unpickling an 8-GPU one costs ~100 µs.
* a ``RelayedHello``: a hello the collector's reader decoded (every string sanitised
  there by the same ``decode_line``), with its line's ``columns`` (cleaned) and length.
  The console's reader takes it as it takes the line (``MessageReader.relayed_hello``:
  counted, a new v2 state from the columns, the shared facts shared) and never parses the
  hello's text (~1 ms a host at start-up, issue 38).  The relay keeps or drops it as it
  would the hello's line (a ``KEEP`` line of its length).
* ``None``: the stream ended cleanly; the console flushes its reader (a last line without
  its newline).
* a session item made by the session itself (``Connected``, ``Disconnected``, a transport
  note), or by the relay (``SourceHealth`` counting what it dropped): rare, pickled whole.

An empty batch is a heartbeat: a collector with nothing to send sends one every
``HEARTBEAT_S``, so the console can tell a quiet collector from a stalled one.

A frame is a 4-byte big-endian length and a pickle.  Pickle is safe here because both ends
are this program under the same user: host data inside a frame is ``bytes``, a tick's row
the console decodes and checks as it checks a tick's text (``relayed_sample``), or an item
(a hello too) already sanitised by the collector's decode, never code.
"""

from __future__ import annotations

import copy
import pickle
import struct
import typing
from dataclasses import dataclass
from typing import Any

import msgspec

from probes.config.fleet import HostSpec
from probes.errors import ProtocolError
from probes.wire.compact import SampleRow
from probes.wire.events import SessionItem
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, HostSample
from probes.wire.structs import chain_texts

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 2**20
"""A frame longer than this is a broken pipe's garbage, not a batch."""
HEARTBEAT_S = 0.5
"""A collector with nothing to send sends an empty batch this often."""
RETRY = "retry"
"""Command: cut this host's backoff (``retry <index>``)."""

RelayedTick = tuple[int, bytes]
"""A v2 tick as its decoded row: (its ``static`` line's CRC-32, the row in msgpack)."""


@dataclass(frozen=True)
class RelayedHello:
    """A hello the collector decoded, as the console's reader needs it."""

    hello: Hello
    """As decoded from the line (not as the collector's clock watch corrected it after)."""
    columns: Any
    """The line's ``columns``, cleaned (``protocol._columns``); None for a v1 hello."""
    size: int
    """The line's length with its newline: what the relay's ``KEEP_BYTES`` counts."""


Entry = bytes | RelayedTick | RelayedHello | SessionItem | None
Batch = list[tuple[int, Entry]]


@dataclass(frozen=True)
class CollectorJob:
    """One collector's shard: its hosts and how to run their sessions."""

    specs: tuple[HostSpec, ...]
    max_connecting: int
    flush_s: float
    """How long entries wait to be sent together (one frame per flush, not one per line)."""
    name: str = "collector"
    """How the operator knows it (``collector 2``): the source of its ``SourceHealth``."""


def frame(obj: object) -> bytes:
    """``obj`` as one frame."""
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    """The body length a frame header announces; ValueError when it cannot be one."""
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {length} bytes")
    return int(length)


def unframe(body: bytes) -> object:
    """A frame's body back to its object."""
    return pickle.loads(body)


_SESSION_ITEMS = tuple(typing.get_args(SessionItem))
"""What a collector may relay whole: any session item (the session's own, and what its
emit adds); agents' data travels as bytes."""


def check_batch(obj: object, hosts: int) -> Batch:
    """``obj`` if it is a batch for a shard of ``hosts`` hosts; ValueError naming what is
    wrong otherwise (a broken or tampered pipe must not reach another host's state)."""
    if not isinstance(obj, list):
        raise ValueError(f"a frame holds {type(obj).__name__}, not a batch")
    for pair in obj:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ValueError("a batch entry is not an (index, entry) pair")
        i, entry = pair
        if type(i) is not int or not 0 <= i < hosts:
            raise ValueError(f"host index {i!r} outside the shard's {hosts} hosts")
        if type(entry) is tuple:
            if not (len(entry) == 2 and type(entry[0]) is int and type(entry[1]) is bytes):
                raise ValueError("a relayed tick is not an (int, bytes) pair")
        elif type(entry) is RelayedHello:
            if type(entry.hello) is not Hello or type(entry.size) is not int:
                raise ValueError("a relayed hello holds no hello")
        elif not (entry is None or isinstance(entry, (bytes, *_SESSION_ITEMS))):
            raise ValueError(f"an entry of type {type(entry).__name__}")
    return obj


_encode_row = msgspec.msgpack.Encoder().encode
_decode_row = msgspec.msgpack.Decoder(SampleRow).decode


def relayed_tick(static_id: int, row: SampleRow) -> RelayedTick:
    """What a collector relays for a tick its stream decoded on the fast path."""
    return static_id, _encode_row(row)


def relayed_hello(reader: MessageReader, line: bytes, hello: Hello) -> RelayedHello:
    """What a collector relays for a hello its ``reader`` just decoded from ``line``: a
    copy (the collector's clock watch corrects the decoded one in place before the frame
    goes), the columns the reader's new v2 state was made from."""
    stream = reader.compact
    return RelayedHello(copy.copy(hello), None if stream is None else stream.columns,
                        len(line) + 1)


PRINTABLE_KEPT = 1024
"""Distinct texts of relayed ticks (disk names, clock-event reasons) kept as proven
printable ASCII: a fleet has a few dozen; past this many the set starts again."""
_printable: set[str] = set()


def _proven(text: str) -> bool:
    """``text`` is printable ASCII (then kept as such), or not."""
    if not (text.isascii() and text.isprintable()):
        return False
    if len(_printable) >= PRINTABLE_KEPT:
        _printable.clear()
    _printable.add(text)
    return True


def _texts_printable(row: SampleRow) -> bool:
    """Every text in the row is printable ASCII, as in a line the fast path takes.

    Both are properties of each character, so the texts are judged one by one (the same
    verdict as their concatenation), and a disk name or a clock-event reason met before
    is known good (issue 38, session 13: a tick's names are its last tick's; the list, the
    join and the two scans cost ~1 µs a tick)."""
    seen = _printable
    for d in row.disks:
        name = d.name
        if name not in seen and not _proven(name):
            return False
    for g in row.gpus:
        reasons = g.clock_reasons
        if reasons:
            for reason in reasons:
                if reason not in seen and not _proven(reason):
                    return False
    if row.pcie is not None:
        text = "".join(chain_texts(row.pcie))
        return text.isascii() and text.isprintable()
    return True


def relayed_sample(reader: MessageReader, tick: RelayedTick) -> HostSample | None:
    """The sample of a relayed tick, built by the console's ``reader`` of that host as its
    fast path builds a tick's text; None, counted as a garbled line, where it cannot be.

    Nothing in the tick is believed that the text's decode would not check: the row is
    decoded with the same typed, bounded structs, its texts (disk names, clock-event
    reasons, the PCIe chains' bus ids, addresses and CPU lists) must be printable ASCII as a
    line the fast path takes is, the fast path's
    checks against the static facts run again (``CompactStream.from_row``), and a tick of
    another ``static`` message than the reader's (one the relay dropped) is refused.
    """
    static_id, body = tick
    reader.stats.lines += 1
    stream = reader.compact
    try:
        if stream is None or stream.static_id != static_id:
            raise ProtocolError("a relayed tick of another static message")
        row = _decode_row(body)
        if not _texts_printable(row):
            raise ProtocolError("a relayed tick's text is not printable")
        sample = stream.from_row(row)
    except Exception:  # one host's garbled tick, as its text would have been
        reader.stats.garbled += 1
        reader.bad_streak += 1
        return None
    reader.bad_streak = 0
    return sample
