"""What a collector process and the console say to each other over the child's pipes.

Console → collector (stdin): one frame holding the shard (``CollectorJob``), then text
command lines (``retry <index>``).  End of stdin tells the collector to stop its sessions
and exit.

Collector → console (stdout): frames, each a batch of ``(host index, entry)`` pairs in the
order they happened.  An entry is one of:

* ``bytes``: whole lines of what that host's agent sent, in order (``relay``: while the
  console does not read, only each host's newest sample is kept).  The console
  runs its own reader over it, so the samples are decoded once on each side (the
  collector's decode drives its session logic: garbage limits, the kernel-log cursor) and
  never pickled: unpickling an 8-GPU sample costs ~100 µs, decoding its v2 tick ~25 µs.
* ``None``: the stream ended cleanly; the console flushes its reader (a last line without
  its newline).
* a session item made by the session itself (``Connected``, ``Disconnected``, a transport
  note), or by the relay (``SourceHealth`` counting what it dropped): rare, pickled whole.

An empty batch is a heartbeat: a collector with nothing to send sends one every
``HEARTBEAT_S``, so the console can tell a quiet collector from a stalled one.

A frame is a 4-byte big-endian length and a pickle.  Pickle is safe here because both ends
are this program under the same user: host data inside a frame is ``bytes`` or an item
already sanitised by the collector's decode, never code.
"""

from __future__ import annotations

import pickle
import struct
import typing
from dataclasses import dataclass

from probes.config.fleet import HostSpec
from probes.wire.events import SessionItem

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 2**20
"""A frame longer than this is a broken pipe's garbage, not a batch."""
HEARTBEAT_S = 0.5
"""A collector with nothing to send sends an empty batch this often."""
RETRY = "retry"
"""Command: cut this host's backoff (``retry <index>``)."""

Entry = bytes | SessionItem | None
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
        if not (entry is None or isinstance(entry, (bytes, *_SESSION_ITEMS))):
            raise ValueError(f"an entry of type {type(entry).__name__}")
    return obj
