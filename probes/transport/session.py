"""Supervised host sessions: start the agent, read its stream, retry with backoff.

A session never raises into its caller: every failure becomes a ``Disconnected``
item with a reason the operator can act on, followed by a retry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind, TransportError
from probes.transport import TRANSPORTS, Transport, loop_clock, read_chunks
from probes.transport.host_clock import clocked
from probes.wire.events import ClockOffset, Connected, Disconnected, Emit, SessionItem, emit_each
from probes.wire.protocol import MessageReader
from probes.wire.samples import (
    KERNEL_SOURCE,
    AgentMessage,
    FabricSample,
    Hello,
    HostSample,
    LogEvent,
    LogSourceState,
    ProbeError,
)

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
HEALTHY_CAP_S = 5.0
"""The backoff cap of a host that has streamed before: it is back within seconds of its
sshd (a reboot, an sshd restart), not after a minute of doubling waits."""
ONCE_TIMEOUT_S = 20.0
ONCE_CONCURRENCY = 64
MAX_OTHERS = 10_000
"""The most items of other kinds one host's read keeps (a source gone wrong stays bounded)."""
MAX_HISTORY = 20_000
"""The most past samples one host's read keeps (a day-long recording read to its end):
past it, the older half goes; every detector's window is far shorter at the read's pace."""
MAX_EVENTS = 100_000
"""The most log lines one host's read keeps, the newest."""
"""``--once`` runs in flight at a time: enough for a fleet, not a thundering herd of SSH."""
MAX_BAD_LINES_IN_A_ROW = 50
"""This many garbled or over-long lines with nothing good between: not our agent, reconnect."""
FAILURES_THAT_KEEP_BACKING_OFF = frozenset({DisconnectKind.AGENT_FAILED, DisconnectKind.GARBLED})
"""Endings that do not reset the backoff even after good messages: a host whose stream
breaks the session each time (a hostile line after its hello) would otherwise cost a
fresh SSH handshake every second, forever."""
MAX_REASON_CHARS = 300
"""An unexpected error's text (it may quote what a host sent) is cut to this many characters."""
NewReader = Callable[[str], MessageReader]
"""Makes the reader of one connection to the named host."""
log = logging.getLogger(__name__)


def crash_reason(exc: BaseException) -> str:
    """One printable line for an error nobody expected: its class, then its (cut) text.

    The text may quote bytes a host sent, so control characters are shown escaped and the
    line is bounded: it becomes a host's state, shown on screens and stored in recordings.
    """
    text = str(exc)
    if len(text) > MAX_REASON_CHARS:
        text = text[:MAX_REASON_CHARS] + "…"
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class SessionPolicy:
    """Timing of one host's supervision; the defaults suit a 1 Hz soak watch."""

    backoff_base_s: float = BACKOFF_BASE_S
    backoff_cap_s: float = BACKOFF_CAP_S
    jitter: float = 0.2
    """Each delay is spread by up to this fraction, so hosts do not retry in lockstep."""
    stall_s: float | None = None
    """Reconnect after this long without a byte; None means max(15 s, 10 intervals)."""
    healthy_cap_s: float = HEALTHY_CAP_S
    """The cap once a host has streamed, unless its stream keeps breaking it (garbled,
    agent failing) or it refuses us."""

    def delay(self, attempt: int, kind: DisconnectKind, rng: random.Random,
              streamed: bool = False) -> float:
        """Seconds to wait before attempt ``attempt + 1``; a refusal waits the full cap.

        ``streamed``: the host has streamed in this session, so it is a host coming back,
        and it waits at most ``healthy_cap_s``.
        """
        if kind.refused:
            base = self.backoff_cap_s
        else:
            cap = self.backoff_cap_s
            if streamed and kind not in FAILURES_THAT_KEEP_BACKING_OFF:
                cap = min(cap, self.healthy_cap_s)
            base = min(cap, self.backoff_base_s * (2 ** min(attempt, 62)))
        return base * (1.0 + rng.uniform(-self.jitter, self.jitter))

    def stall_for(self, spec: HostSpec) -> float:
        """The silence after which a connection counts as dead."""
        return self.stall_s if self.stall_s is not None else max(15.0, 10.0 * spec.interval_s)


class RetryWake:
    """Lets the operator cut a host's wait before its next attempt (the ``R`` key).

    The session's backoff sleeps on it; ``poke`` ends that sleep at once.  A poke while
    the host is connecting or streaming does nothing (and says so): there is no wait.
    """

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        """Made by the first wait: most hosts never back off (an Event and its waiters'
        deque, ~1 KB a host in a collector; issue 38)."""
        self.waiting = False

    def poke(self) -> bool:
        """End the current wait; False when the session is not waiting."""
        if not self.waiting or self._event is None:
            return False
        self._event.set()
        return True

    async def sleep(self, delay: float) -> bool:
        """Wait ``delay`` seconds or until poked; True when poked."""
        event = self._event
        if event is None:
            event = self._event = asyncio.Event()
        event.clear()
        self.waiting = True
        try:
            await asyncio.wait_for(event.wait(), delay)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self.waiting = False


class StreamStalled(TransportError):
    """Connected, but nothing arrived for too long."""

    title = "Stream stalled"

    kind = DisconnectKind.STALLED


class StreamGarbled(TransportError):
    """The other end is sending lines that are not protocol v1."""

    title = "Garbled agent output"

    kind = DisconnectKind.GARBLED


def make_transport(spec: HostSpec, once: bool = False,
                   gate: asyncio.Semaphore | None = None,
                   kernel_after: str | None = None) -> Transport:
    """The transport a host spec asks for, made by its ``TRANSPORTS`` factory.

    Raises:
        TransportError: the spec names a transport this build does not have.
    """
    factory = TRANSPORTS.get(spec.transport)
    if factory is None:
        raise TransportError(f"{spec.name}: transport {str(spec.transport)!r} is not available")
    return factory(spec, spec.agent_args(once=once, kernel_after=kernel_after), gate)


LATE_S = 2.0
"""A stall check this late means the process itself was not running (see ``_StallWatch``)."""


class _StallWatch:
    """Cancels the reading task when no chunk came for ``stall_s``; ``fired`` says it did.

    One timer checks the time of the last chunk and re-arms itself, instead of an
    ``asyncio.wait_for`` per chunk (a task, a timer and a future for every chunk of every
    host).  Used as a context
    manager by the code that reads, so the timer is gone whichever way reading ends.

    A check that runs ``LATE_S`` after it was due means this process did not run meanwhile
    (stopped with SIGSTOP, frozen, starved): the host's bytes may be waiting unread in the
    socket, so that time is not counted as the host's silence.  Otherwise a collector (or a
    console) that resumes would call every healthy host stalled before reading a byte.
    """

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self.fired = False
        self._loop = asyncio.get_running_loop()
        self._now = loop_clock(self._loop)
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._last = self._loop.time()
        self._due = self._last
        self._handle: asyncio.TimerHandle | None = None

    def __enter__(self) -> _StallWatch:
        self._arm(self.stall_s)
        return self

    def _arm(self, delay: float) -> None:
        self._due = self._loop.time() + delay
        self._handle = self._loop.call_later(delay, self._check)

    def __exit__(self, *_exc: object) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def fed(self) -> None:
        self._last = self._now()

    def _check(self) -> None:
        cancelling = getattr(self._task, "cancelling", None)  # Python 3.11+
        if cancelling is not None and cancelling():
            return  # someone else (a caller's own timeout, shutdown) cancels it already
        now = self._loop.time()
        if now - self._due > LATE_S:  # we were not running: not the host's silence
            self._last += now - self._due
        idle = now - self._last
        if idle >= self.stall_s:
            self.fired = True
            self._handle = None
            self._task.cancel()
        else:
            self._arm(self.stall_s - idle)

    def stalled(self) -> StreamStalled:
        """The error to raise for the cancel this watch caused (and the cancel undone)."""
        uncancel = getattr(self._task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()
        return StreamStalled(f"no data for {self.stall_s:g} s")


async def _stream_once(spec: HostSpec, emit: Emit, transport: Transport,
                       reader: MessageReader, stall_s: float) -> tuple[DisconnectKind, str, bool]:
    """Run one connection to its end; returns (kind, reason, whether any message came)."""
    got_any = False
    try:
        await transport.start()
        for note in transport.notes:
            emit(spec.name, ProbeError(time.time(), "transport", note))
        emit(spec.name, Connected(time.time()))
        with _StallWatch(stall_s) as watch:
            def feed(chunk: bytes) -> None:
                nonlocal got_any
                watch.fed()
                msgs = reader.feed(chunk)
                if msgs:  # nearly every chunk is a tick a collector relays: nothing to emit
                    got_any = emit_each(spec.name, msgs, emit) or got_any
                if reader.bad_streak > MAX_BAD_LINES_IN_A_ROW:
                    raise StreamGarbled(f"{reader.bad_streak} unusable lines in a row")
            try:
                await read_chunks(transport, feed)
            except asyncio.CancelledError:
                if not watch.fired:
                    raise
                raise watch.stalled() from None
        for msg in reader.close():
            emit(spec.name, msg)
        return DisconnectKind.DOWN, await transport.exit_reason(), got_any
    except TransportError as exc:
        return exc.kind, exc.msg, got_any
    except Exception as exc:  # any failure is this host's state, never a crash
        # A reader that raised on hostile input (RecursionError), a transport's bug: this
        # host shows agent-failed and retries; the other hosts never hear of it.
        log.warning("%s: session failed", spec.name, exc_info=True)
        return DisconnectKind.AGENT_FAILED, f"session failed: {crash_reason(exc)}", got_any
    finally:
        await _stop_quietly(spec, transport)


async def _stop_quietly(spec: HostSpec, transport: Transport) -> None:
    """Stop a transport; its own failure to stop is logged, never raised over the reason."""
    try:
        await transport.stop()
    except Exception:
        log.warning("%s: stopping the transport failed", spec.name, exc_info=True)


def _raise_if_cancelled() -> None:
    """Honour a cancel that ``asyncio.wait_for`` swallowed (a race in Python < 3.12)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    if cancelling is not None and cancelling():
        raise asyncio.CancelledError


async def run_session(spec: HostSpec, emit: Emit, policy: SessionPolicy | None = None,
                      gate: asyncio.Semaphore | None = None,
                      wake: RetryWake | None = None,
                      new_reader: NewReader | None = None) -> None:
    """Keep one host's agent streaming until cancelled, reconnecting with backoff.

    Args:
        spec: the host.
        emit: where items go; must not block.
        policy: backoff and stall timing.
        gate: shared limit on concurrent connection attempts (SSH handshakes).
        wake: lets the operator cut a backoff short (``retry_now``).
        new_reader: makes each connection's reader (a collector process relays the bytes
            its reader is fed); a plain ``MessageReader`` by default.
    """
    policy = policy or SessionPolicy()
    rng: random.Random | None = None  # the jitter: made at the first backoff (2.5 KB, #38)
    attempt = 0
    streamed = False
    cursor: str | None = None

    def emit_noting_cursor(host: str, item: SessionItem) -> None:
        nonlocal cursor
        if isinstance(item, LogEvent) and item.source == KERNEL_SOURCE and item.cursor:
            cursor = item.cursor
        emit(host, item)

    while True:
        reader = new_reader(spec.name) if new_reader is not None else MessageReader()
        try:
            transport = make_transport(spec, gate=gate, kernel_after=cursor)
        except TransportError as exc:
            emit(spec.name, Disconnected(time.time(), exc.msg, None, reader.stats,
                                         DisconnectKind.DOWN))
            return
        except Exception as exc:  # a bad spec fails its host only
            log.warning("%s: cannot make the transport", spec.name, exc_info=True)
            emit(spec.name, Disconnected(time.time(), f"cannot start: {crash_reason(exc)}",
                                         None, reader.stats, DisconnectKind.AGENT_FAILED))
            return
        kind, reason, got_any = await _stream_once(spec, emit_noting_cursor, transport, reader,
                                                   policy.stall_for(spec))
        _raise_if_cancelled()
        streamed = streamed or got_any
        if got_any and kind not in FAILURES_THAT_KEEP_BACKING_OFF:
            attempt = 0
        delay = policy.delay(attempt, kind, rng := rng or random.Random(spec.name), streamed)
        attempt += 1
        emit(spec.name, Disconnected(time.time(), reason, delay, reader.stats, kind))
        if wake is None:
            await asyncio.sleep(delay)
        elif await wake.sleep(delay):
            attempt = min(attempt, 1)  # the operator asked: the next wait starts short


@dataclass
class OnceResult:
    """What one ``--once`` run of the agent returned for one host."""

    spec: HostSpec
    hello: Hello | None = None
    sample: HostSample | None = None
    """The newest sample."""
    history: list[HostSample] = field(default_factory=list)
    """The samples before it, oldest first, when the read had a past (a simulated host's,
    a metrics server's window, a recording's)."""
    fabric: FabricSample | None = None
    """The host's IB ports and NVLinks, when it has any."""
    events: list[LogEvent] = field(default_factory=list)
    errors: list[ProbeError] = field(default_factory=list)
    log_source: LogSourceState | None = None
    """How the kernel log is read."""
    job_logs: list[LogSourceState] = field(default_factory=list)
    """How each file a job named is read (``job:<path>``): its newest state, one each."""
    others: list[SessionItem] = field(default_factory=list)
    """What else the read carried, folded as it came (an Xid a GPU monitor reported as a
    number, a source's health)."""
    failure: str | None = None
    garbled: int = 0
    clock: ClockOffset | None = None
    """The host's clock against this machine's, from its hello and sample (their times,
    and the events', are already corrected by it)."""


SIM_HISTORY_ARG = "--sim-history"
LIVED_ARGS = ("--count", "1", "--fast")
"""A simulated host with a simulated past runs through it, then one live sample, and exits:
``--once`` would answer with the first instant of its run, before any trouble began."""


def lived(spec: HostSpec) -> HostSpec | None:
    """The spec that runs a simulated host through its ``--sim-history`` to now, or None
    for a host whose ``--once`` sample is already its present (a real one)."""
    if not spec.simulate or SIM_HISTORY_ARG not in spec.extra_args:
        return None
    return dataclasses.replace(spec, extra_args=spec.extra_args + LIVED_ARGS)


async def collect_once(spec: HostSpec, timeout_s: float = ONCE_TIMEOUT_S, *,
                       to_now: bool = False) -> OnceResult:
    """One host's hello, newest sample and log events: one ``--once`` run of its agent.

    With ``to_now``, a simulated host with a history is streamed through it (the same
    session the console runs) until its agent ends: its samples and log lines are then
    those the console shows at start, a lost GPU included.  A real host's ``--once`` sample
    is already its present.
    """
    run = lived(spec) if to_now else None
    if run is not None:
        return await _collect_lived(spec, run, timeout_s)
    result = OnceResult(spec)
    reader = MessageReader()

    def file(_host: str, item: SessionItem) -> None:
        file_item(result, item)

    keep = clocked(file)

    try:
        transport = make_transport(spec, once=True)
        # The whole run's timeout is the one that speaks; the stall watchdog only backs it.
        _, reason, _ = await asyncio.wait_for(
            _stream_once(spec, keep, transport, reader, 2 * timeout_s), timeout_s)
    except TransportError as exc:
        reason = exc.msg
    except asyncio.TimeoutError:
        reason = f"no complete answer within {timeout_s:g} s"
    except Exception as exc:  # one host's failure is its result, not the run's
        reason = f"session failed: {crash_reason(exc)}"
    result.garbled = reader.stats.garbled + reader.stats.overlong
    if result.sample is None:
        result.failure = reason
    return result


async def _collect_lived(spec: HostSpec, run: HostSpec, timeout_s: float) -> OnceResult:
    """A simulated host streamed through its history until its agent ends."""
    result = OnceResult(spec)
    ended = asyncio.Event()

    def keep(_host: str, item: SessionItem) -> None:
        file_item(result, item)
        if isinstance(item, Disconnected):
            ended.set()

    session = asyncio.create_task(run_session(run, clocked(keep)))
    try:
        await asyncio.wait_for(ended.wait(), timeout_s)
    except asyncio.TimeoutError:
        if result.sample is None:
            result.failure = f"no complete answer within {timeout_s:g} s"
    finally:
        session.cancel()
        await asyncio.gather(session, return_exceptions=True)
    return result


async def collect_all(specs: list[HostSpec], concurrency: int = ONCE_CONCURRENCY, *,
                      to_now: bool = False) -> list[OnceResult]:
    """``collect_once`` for every host, ``concurrency`` at a time, in the specs' order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(spec: HostSpec) -> OnceResult:
        async with gate:
            return await collect_once(spec, to_now=to_now)

    return list(await asyncio.gather(*(one(s) for s in specs)))


def file_item(result: OnceResult, item: object) -> None:
    """File one item of a host's read into its result (a newer sample pushes the one
    before into ``history``; a disconnect before any sample is the read's failure)."""
    msg: AgentMessage | object = item
    if isinstance(msg, Hello):
        result.hello = msg
    elif isinstance(msg, HostSample):
        if result.sample is not None:
            result.history.append(result.sample)
            if len(result.history) > MAX_HISTORY:
                del result.history[:MAX_HISTORY // 2]
        result.sample = msg
        result.failure = None
    elif isinstance(msg, FabricSample):
        result.fabric = msg
    elif isinstance(msg, LogEvent):
        result.events.append(msg)
        if len(result.events) > MAX_EVENTS:
            del result.events[:MAX_EVENTS // 2]
    elif isinstance(msg, ProbeError):
        if len(result.errors) < MAX_OTHERS:
            result.errors.append(msg)
    elif isinstance(msg, LogSourceState):
        keep_log_source(result, msg)
    elif isinstance(msg, ClockOffset):
        result.clock = msg
    elif isinstance(msg, Disconnected):
        if result.sample is None:
            result.failure = msg.reason
        if msg.stats is not None:  # a session's stream ended: what its reader skipped
            result.garbled = msg.stats.garbled + msg.stats.overlong
    elif not isinstance(msg, Connected) and len(result.others) < MAX_OTHERS:
        result.others.append(msg)  # type: ignore[arg-type]


def keep_log_source(result: OnceResult, msg: LogSourceState) -> None:
    """The kernel log's state, or a job file's (its newest only): one never hides the other."""
    if msg.source == KERNEL_SOURCE:
        result.log_source = msg
    elif len(result.job_logs) < 64 or any(s.source == msg.source for s in result.job_logs):
        result.job_logs[:] = [s for s in result.job_logs if s.source != msg.source] + [msg]
