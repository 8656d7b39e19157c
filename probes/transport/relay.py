"""A collector's pipe to the console, written so that no session ever waits on the console.

A console that stops reading (its UI thread stuck in one long redraw, a machine under load)
once froze every SSH session of its collectors for minutes: the collector's blocking write
stopped its event loop, so no agent's stream was read (performance review 2026-12-06 §1b).

Here the pipe is non-blocking.  Entries wait in one queue, in the order they happened, and
go out as one frame per ``flush_s``; when the pipe does not take a whole frame, the rest is
sent as the console drains it, and meanwhile the queue is bounded per host:

* a sample (a v2 tick, a v1 ``sample`` line) replaces that host's older unsent sample:
  the newest wins, each replaced one is counted;
* an agent's log lines, fabric reports and the pieces of an over-long line are kept in
  order up to ``LOG_BYTES`` a host, then counted and dropped;
* its other lines (hello, static, logsource, error) up to ``KEEP_BYTES`` (a hello its
  reader decoded, relayed decoded, counts as its line), and the
  session's own items (connected, disconnected, the end of a stream) always.

When the console reads again, each host that lost something gets one ``SourceHealth``
with the counts (``dropped_samples``, ``dropped_lines``) after its newest entries, at
most once per ``REPORT_S``.  While
the console reads, nothing is replaced: every sample reaches it.

The relay forwards whole lines (a host's partial line waits for its newline), so what it
drops is always a whole line and the console's reader stays in step.  A session's reader
(``RelayReader``) hands it whole lines, and a v2 tick its stream decoded on the fast path
as that tick's row (``collector_wire.RelayedTick``): a sample like the tick's line.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from enum import Enum

from probes.transport.collector_wire import (
    HEARTBEAT_S,
    Batch,
    CollectorJob,
    Entry,
    RelayedHello,
    RelayedTick,
    frame,
    relayed_hello,
    relayed_tick,
)
from probes.wire.events import Connected, Disconnected, SessionItem, SourceHealth
from probes.wire.protocol import MAX_LINE_BYTES, MessageReader
from probes.wire.samples import AgentMessage, Hello
from probes.wire.sanitize import may_need_cleaning

LOG_BYTES = 256 * 1024
"""A host's log lines (and fabric reports) held while the console does not read."""
KEEP_BYTES = 1024 * 1024
"""A host's other lines held while the console does not read (a hello is ~5-70 KiB)."""

REPORT_S = 5.0
"""Counts go out at most this often: a console that reads, but slowly, gets one report per
host per ``REPORT_S`` (one more item each flush would slow it further)."""

_TYPE = re.compile(rb'\s*\{\s*"type"\s*:\s*"([a-z_]{1,16})"')
_LOG_TYPES = frozenset({b"event", b"fabric"})


def _is_static(line: bytes) -> bool:
    m = _TYPE.match(line, 0, 64)
    return m is not None and m.group(1) == b"static"


class Kind(Enum):
    """How a queued line may be treated while the console does not read."""

    SAMPLE = "sample"
    """Replaced by the host's next sample."""
    LOG = "log"
    """Kept up to ``LOG_BYTES``."""
    KEEP = "keep"
    """Kept up to ``KEEP_BYTES``."""


def kind_of_line(line: bytes) -> Kind:
    """What a complete line of the agent's stream is, from its first bytes only."""
    if line[:1] == b"[":
        return Kind.SAMPLE
    m = _TYPE.match(line, 0, 64)
    if m is None:
        return Kind.KEEP
    word = m.group(1)
    if word == b"sample":
        return Kind.SAMPLE
    return Kind.LOG if word in _LOG_TYPES else Kind.KEEP


class RelayReader(MessageReader):
    """A session's reader that also hands every line it reads to the relay, in order.

    The messages it decodes are the session's to act on, not to forward: the console
    decodes the same lines itself.  ``mine`` holds them (strongly, so no id is reused)
    until the next chunk; the relay's emit drops any item it finds there.  A v2 tick,
    nearly every line, is only checked, not built into a sample (``builds_ticks``): the
    session needs its verdict, never the sample.  Where the check decoded the tick on the
    fast path, its row goes to the relay instead of its text, so the console builds the
    sample without parsing it again (issue 38, decode once); a hello goes as the ``Hello``
    it decoded (``RelayedHello``: issue 38, start-up).  An over-long line is counted
    here (the session's garbage limit) and not relayed: the console has no use for it.
    A chunk that is one whole tick (nearly every chunk) takes one step (``feed``).
    """

    builds_ticks = False

    def __init__(self, index: int, relay: Relay) -> None:
        super().__init__()
        self._index = index
        self._relay = relay
        self.mine: dict[int, AgentMessage] = {}

    def feed(self, chunk: bytes) -> list[AgentMessage]:
        # Nearly every chunk is one whole v2 tick (a line a second, one SSH packet): judged
        # and relayed in one step, as ``_relay_lines`` would (the same verdict, counts and
        # entry), without its per-line steps; any other chunk, and a tick this step does
        # not take whole, goes the general way (issue 38, the collector's CPU).
        # The chunk is judged with its newline (JSON's whitespace: the same decode and
        # verdict as the line's, without a copy of the line a tick).
        stream = self.compact
        if stream is not None and chunk[:1] == b"[" and chunk.find(b"\n") == len(chunk) - 1:
            relay, index = self._relay, self._index
            if self._splitter.idle() and len(chunk) <= MAX_LINE_BYTES + 1 and \
                    index not in relay.lost_static and not may_need_cleaning(chunk):
                try:
                    row = stream.quick_row(chunk)
                except Exception:  # the general way judges it (``_decode`` catches all)
                    row = None
                if row is not None:
                    self.stats.lines += 1
                    self.bad_streak = 0
                    if self.mine:
                        self.mine = {}
                    relay.add_tick(index, relayed_tick(stream.static_id, row))
                    return []
        return self._relay_lines(self._splitter.feed(chunk))

    def close(self) -> list[AgentMessage]:
        items = self._relay_lines(self._splitter.flush())
        self._relay.add(self._index, None)
        return items

    def _relay_lines(self, lines: Iterable[bytes | None]) -> list[AgentMessage]:
        """Decode each line, and relay it (runs of lines as one entry) or its tick's row."""
        items: list[AgentMessage] = []
        run: list[bytes] = []
        relay, index = self._relay, self._index
        for line in lines:
            self.tick_row = None
            msg = self._decode(line)
            if msg is not None:
                items.append(msg)
            if line is None:  # over-long: counted, not relayed
                continue
            if type(msg) is Hello:  # decoded here: the console takes it as it is
                if run:
                    relay.add(index, b"".join(run))
                    run = []
                relay.add_hello(index, relayed_hello(self, line, msg), line)
                continue
            row = self.tick_row
            if row is not None and self.compact is not None:
                if run:  # first what came before (a static line the relay may drop)
                    relay.add(index, b"".join(run))
                    run = []
                if index not in relay.lost_static:
                    relay.add_tick(index, relayed_tick(self.compact.static_id, row))
                    continue
            run += (line, b"\n")
        if run:
            relay.add(index, b"".join(run))
        self.tick_row = None
        self.mine = {id(m): m for m in items} if items else {}
        return items


class Relay:
    """The collector's queue toward the console and its non-blocking pipe (see the module)."""

    def __init__(self, job: CollectorJob, fd: int,
                 on_broken: Callable[[], None] | None = None) -> None:
        self.job = job
        self.index = {spec.name: i for i, spec in enumerate(job.specs)}
        self.readers: dict[str, RelayReader] = {}
        self._fd = fd
        os.set_blocking(fd, False)
        self._on_broken = on_broken
        self._queue: list[tuple[int, Entry] | None] = []
        """Entries in order; None where a replaced sample stood."""
        self._tail: dict[int, bytes] = {}
        """Each host's partial line, waiting for its newline."""
        self._long: set[int] = set()
        """Hosts inside an over-long line: its pieces travel as they come."""
        self._sample_at: dict[int, int] = {}
        """Queue position of each host's newest unsent sample."""
        self._last_at: dict[int, int] = {}
        """Queue position of each host's newest unsent entry."""
        self._held: Counter[int] = Counter()
        """Bytes of each host's unsent lines other than samples."""
        self.lost_static: set[int] = set()
        """Hosts whose newest ``static`` line was dropped: their ticks go as text (the
        console decodes them against the facts it has) until one is queued again."""
        self.dropped_samples: Counter[int] = Counter()
        self.dropped_lines: Counter[int] = Counter()
        """Counts not yet reported to the console, per host index."""
        self._unsent: memoryview | None = None
        """The rest of a frame the pipe did not take: the console is not reading."""
        self._flush: asyncio.TimerHandle | None = None
        self._beat: asyncio.TimerHandle | None = None
        self._wrote = time.monotonic()
        self._reported = float("-inf")

    @property
    def blocked(self) -> bool:
        """The console has not taken the last frame whole."""
        return self._unsent is not None

    def new_reader(self, host: str) -> MessageReader:
        reader = RelayReader(self.index[host], self)
        self.readers[host] = reader
        return reader

    def emit(self, host: str, item: SessionItem) -> None:
        """The sessions' emit: items the reader decoded stay here, the rest travel."""
        reader = self.readers.get(host)
        if reader is not None and reader.mine.pop(id(item), None) is not None:
            return
        self.add(self.index[host], item)

    def add(self, index: int, entry: bytes | SessionItem | None) -> None:
        """Queue a chunk of a host's stream, its end (None) or a session item."""
        if isinstance(entry, bytes):
            self._chunk(index, entry)
        else:
            if entry is None:  # a clean end: its last line may lack its newline
                rest = self._tail.pop(index, b"")
                self._long.discard(index)
                if rest:
                    self._line(index, rest, Kind.KEEP)
            elif isinstance(entry, (Connected, Disconnected)):
                # a stream that broke off mid-line: the console's next reader starts afresh,
                # and the new stream must not begin with the old one's half line
                self._tail.pop(index, None)
                self._long.discard(index)
            self._put(index, entry)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self.job.flush_s, self.flush)

    def add_tick(self, index: int, tick: RelayedTick) -> None:
        """Queue a v2 tick decoded by the host's stream: a sample, as the tick's line is."""
        if self._unsent is None:  # the console reads: queued as it came (``_line``)
            self._queue.append((index, tick))
        else:
            self._line(index, tick, Kind.SAMPLE)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self.job.flush_s, self.flush)

    def add_hello(self, index: int, hello: RelayedHello, line: bytes) -> None:
        """Queue a hello the host's reader decoded from ``line``, kept or dropped as that
        line would be (``_chunk``, ``_line``: a ``KEEP`` line of its length)."""
        if not self.blocked and self.lost_static and index in self.lost_static \
                and b'"static"' in line:
            self.lost_static.discard(index)
        self._line(index, hello, Kind.KEEP)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(self.job.flush_s, self.flush)

    def _chunk(self, index: int, chunk: bytes) -> None:
        data = self._tail.pop(index) + chunk if index in self._tail else chunk
        if index in self._long:  # the rest of an over-long line, piece by piece
            cut = data.find(b"\n") + 1
            if cut == 0:
                self._line(index, data, Kind.LOG)
                return
            self._line(index, data[:cut], Kind.LOG)
            self._long.discard(index)
            data = data[cut:]
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) > MAX_LINE_BYTES:
                self._long.add(index)
                self._line(index, data, Kind.LOG)
            elif data:
                self._tail[index] = data
            return
        if end + 1 < len(data):
            self._tail[index] = data[end + 1:]
            data = data[:end + 1]
        if not self.blocked:  # the console reads: the lines go as they came
            if self.lost_static and index in self.lost_static and b'"static"' in data:
                self.lost_static.discard(index)
            self._queue.append((index, data))
            return
        lines = data.split(b"\n")
        lines.pop()  # what follows the last newline: nothing
        for line in lines:
            line += b"\n"
            self._line(index, line, kind_of_line(line))

    def _line(self, index: int, line: bytes | RelayedTick | RelayedHello, kind: Kind) -> None:
        if not self.blocked:
            self._queue.append((index, line))
            return
        if kind is Kind.SAMPLE:
            at = self._sample_at.get(index)
            if at is not None:
                self.dropped_samples[index] += 1
                if self._last_at.get(index) == at:  # nothing of this host after it
                    self._queue[at] = (index, line)
                    return
                self._queue[at] = None  # the new one goes after what followed the old
            self._put(index, line, True)
            return
        limit = LOG_BYTES if kind is Kind.LOG else KEEP_BYTES
        static = kind is Kind.KEEP and isinstance(line, bytes) and _is_static(line)
        size = line.size if isinstance(line, RelayedHello) else len(line)
        if self._held[index] + size > limit:
            self.dropped_lines[index] += 1
            if static:
                self.lost_static.add(index)
            return
        if static:
            self.lost_static.discard(index)
        self._held[index] += size
        self._put(index, line)

    def _put(self, index: int, entry: Entry, sample: bool = False) -> None:
        """Queue an entry; while blocked, remember where the host's newest ones stand (the
        queue holds only what came since the block: ``_take`` emptied it)."""
        if not self.blocked:
            self._queue.append((index, entry))
            return
        self._last_at[index] = len(self._queue)
        if sample:
            self._sample_at[index] = len(self._queue)
        self._queue.append((index, entry))

    def _take(self) -> Batch:
        """The queue as a batch, with a report for each host that lost something."""
        batch = [e for e in self._queue if e is not None]
        self._queue = []
        self._sample_at.clear()
        self._last_at.clear()
        self._held.clear()
        if time.monotonic() - self._reported < REPORT_S or not (
                self.dropped_samples or self.dropped_lines):
            return batch
        self._reported = time.monotonic()
        now = time.time()
        for i in sorted(set(self.dropped_samples) | set(self.dropped_lines)):
            samples, lines = self.dropped_samples[i], self.dropped_lines[i]
            batch.append((i, SourceHealth(
                now, self.job.name, None,
                f"the console did not read: {samples} samples skipped (newest kept), "
                f"{lines} lines dropped", dropped_samples=samples, dropped_lines=lines)))
        self.dropped_samples.clear()
        self.dropped_lines.clear()
        return batch

    def flush(self) -> None:
        """Send the queue as one frame, unless the pipe still holds the last one (then
        ``_drain`` sends it as soon as the console has read that)."""
        self._flush = None
        if self.blocked or not self._queue:
            return
        self._send(frame(self._take()))

    def heartbeat(self) -> None:
        """An empty batch when nothing was sent for ``HEARTBEAT_S``; then again and again."""
        if not self.blocked and time.monotonic() - self._wrote >= HEARTBEAT_S:
            self._send(frame(self._take()))  # empty, or counts that waited for ``REPORT_S``
        self._beat = asyncio.get_running_loop().call_later(HEARTBEAT_S, self.heartbeat)

    def _send(self, data: bytes) -> None:
        try:
            n = os.write(self._fd, data)
        except BlockingIOError:
            n = 0
        except OSError:  # the console is gone: nobody reads what we would send
            self._broken()
            return
        if n == len(data):
            self._wrote = time.monotonic()
            return
        self._unsent = memoryview(data)[n:]
        asyncio.get_running_loop().add_writer(self._fd, self._drain)

    def _drain(self) -> None:
        """The pipe has room: the rest of the frame, then what gathered meanwhile."""
        if self._unsent is None:
            asyncio.get_running_loop().remove_writer(self._fd)
            return
        try:
            n = os.write(self._fd, self._unsent)
        except BlockingIOError:
            return
        except OSError:
            self._broken()
            return
        self._unsent = self._unsent[n:]
        if len(self._unsent):
            return
        self._unsent = None
        asyncio.get_running_loop().remove_writer(self._fd)
        self._wrote = time.monotonic()
        self.flush()

    def _broken(self) -> None:
        if self._unsent is not None:
            asyncio.get_running_loop().remove_writer(self._fd)
            self._unsent = None
        self._queue.clear()
        if self._on_broken is not None:
            self._on_broken()

    async def close(self, timeout: float) -> None:
        """Send what is left, waiting at most ``timeout`` for a console that does not read;
        then stop the heartbeat."""
        if self._beat is not None:
            self._beat.cancel()
        deadline = time.monotonic() + timeout
        self.flush()
        while self.blocked and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self._unsent is not None:
            asyncio.get_running_loop().remove_writer(self._fd)
            self._unsent = None
