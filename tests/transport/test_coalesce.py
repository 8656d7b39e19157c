"""The coalescing selector of a collector's loop (``probes.transport.coalesce``), on a
virtual clock: a pause never runs past the loop's own timeout (its next timer) but for
``GAP_S``, a loop with work ready is never paused, what the inner selector returns is
returned as it is, and the loop pauses only while its files become ready at a fleet's rate;
then a timer due waits at most ``GAP_S`` more.  Negative controls: a selector that sleeps
twice the gap whatever the timeout, and one that never pauses, are caught."""

from __future__ import annotations

import asyncio
import random
import selectors
import socket
from typing import Any

import pytest

from probes.transport import coalesce
from probes.transport.coalesce import GAP_S, MIN_PER_GAP, CoalescingSelector


class Clock:
    def __init__(self) -> None:
        self.t = 100.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        assert s >= 0
        self.slept.append(s)
        self.t += s


class Inner(selectors.BaseSelector):
    """Answers each poll from a script: (seconds it takes, how many files are ready)."""

    def __init__(self, clock: Clock, script: list[tuple[float, int]]) -> None:
        self.clock, self.script = clock, list(script)
        self.timeouts: list[float | None] = []
        self.keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, 0, events, data)
        self.keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self.keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.timeouts.append(timeout)
        took, n = self.script.pop(0)
        if timeout is not None:
            took = min(took, timeout)
        self.clock.t += took
        key = selectors.SelectorKey(0, 0, selectors.EVENT_READ, None)
        return [(key, selectors.EVENT_READ)] * n

    def get_map(self) -> Any:
        return self.keys


def make(script: list[tuple[float, int]], busy: bool | None
         ) -> tuple[CoalescingSelector, Inner, Clock]:
    clock = Clock()
    inner = Inner(clock, script)
    return CoalescingSelector(inner, GAP_S, clock.now, clock.sleep, busy), inner, clock


def test_a_busy_loop_waits_the_gap_out_and_a_timer_at_most_a_gap_more() -> None:
    sel, inner, clock = make([(0.0, 1), (0.0, 3), (0.0, 2), (0.0, 0), (0.0, 1), (0.0, 1)],
                             busy=True)
    assert len(sel.select(1.0)) == 1          # the first wait: nothing before it
    assert clock.slept == [] and inner.timeouts == [1.0 + GAP_S]
    clock.t += GAP_S / 4
    assert len(sel.select(1.0)) == 3          # paused the rest of the gap, then polled
    assert clock.slept == [pytest.approx(GAP_S * 3 / 4)]
    assert inner.timeouts[-1] == pytest.approx(1.0 + GAP_S - GAP_S * 3 / 4)
    clock.t += GAP_S * 0.85
    assert len(sel.select(0.001)) == 2        # a timer due sooner: a gap late at most
    assert clock.slept[-1] == pytest.approx(GAP_S * 0.15)
    assert inner.timeouts[-1] == pytest.approx(0.001 + GAP_S - GAP_S * 0.15)
    n = len(clock.slept)
    assert sel.select(0) == []                # work ready: never paused, never later
    assert len(clock.slept) == n and inner.timeouts[-1] == 0
    sel.select(None)                          # no timer at all: the gap, then the wait
    assert clock.slept[-1] == pytest.approx(GAP_S) and inner.timeouts[-1] is None
    clock.t += 1.0                            # long after the last wake: no pause
    sel.select(None)
    assert len(clock.slept) == n + 1
    assert sel.pauses == n + 1


def test_an_idle_loop_is_never_paused() -> None:
    sel, inner, clock = make([(0.001, 1)] * 50, busy=False)
    for _ in range(50):
        sel.select(0.5)
    assert clock.slept == [] and inner.timeouts == [0.5] * 50


@pytest.mark.parametrize("seed", range(8))
def test_random_waits_end_when_the_loop_asked_them_to(seed: int) -> None:
    """Whatever the script: pause + poll never outlasts the timeout asked, plus ``GAP_S``
    while busy (a timer waits for the next tick's wake); with a timeout 0 nothing sleeps or
    waits; each poll's files come back as they were."""
    rng = random.Random(seed)
    script = [(rng.choice([0.0, 0.001, 0.004, 0.03, 1.0]), rng.choice([0, 0, 1, 2, 5]))
              for _ in range(400)]
    sel, inner, clock = make(script, busy=None)
    for _took, n in script:
        timeout = rng.choice([None, 0.0, 0.0005, 0.002, 0.01, 0.05, 0.5])
        t0, slept0, busy = clock.t, len(clock.slept), sel.busy
        got = sel.select(timeout)
        assert len(got) == n
        spent = clock.t - t0
        if timeout is not None:
            late = GAP_S if busy else 0.0
            assert spent <= timeout + late + 1e-9
            assert inner.timeouts[-1] == pytest.approx(
                timeout + (late if timeout else 0.0) - sum(clock.slept[slept0:]))
        if timeout == 0:
            assert len(clock.slept) == slept0
    assert sel.pauses == len(clock.slept)


class Arrivals(Inner):
    """Files become ready at set times, whether or not anyone polls (a fleet's ticks)."""

    def __init__(self, clock: Clock, times: list[float]) -> None:
        super().__init__(clock, [])
        self.times = times

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self.timeouts.append(timeout)
        if self.times and self.times[0] > self.clock.t:
            until = self.times[0] if timeout is None else min(self.times[0],
                                                               self.clock.t + timeout)
            self.clock.t = max(self.clock.t, until)
        n = 0
        while self.times and self.times[0] <= self.clock.t:
            self.times.pop(0)
            n += 1
        key = selectors.SelectorKey(0, 0, selectors.EVENT_READ, None)
        return [(key, selectors.EVENT_READ)] * n


def test_the_loop_pauses_only_at_a_fleets_rate() -> None:
    """Busy is judged each ``RATE_S``: on while at least ``MIN_PER_GAP`` files a gap become
    ready, off again when the rate falls; paused, a wake serves several."""
    per_s = MIN_PER_GAP / GAP_S  # the rate at which it turns busy
    clock = Clock()
    dense = [clock.t + i / (2 * per_s) for i in range(int(3 * 2 * per_s))]
    sparse = [dense[-1] + (i + 1) / (per_s / 2) for i in range(int(3 * per_s / 2))]
    inner = Arrivals(clock, dense + sparse)
    sel = CoalescingSelector(inner, GAP_S, clock.now, clock.sleep)
    states, wakes = [], {"dense": 0, "sparse": 0}
    while inner.times:
        phase = "dense" if inner.times[0] <= dense[-1] else "sparse"
        if sel.select(1.0):
            wakes[phase] += 1
        states.append((phase, sel.busy))
    assert not states[0][1]
    assert [b for p, b in states if p == "dense"][-1]     # busy within the dense seconds
    assert not states[-1][1]                              # and not after the sparse ones
    assert wakes["dense"] < 0.7 * len(dense)              # several ticks a wake
    assert wakes["sparse"] >= len(sparse) - 2             # a sparse stream: one a wake


def test_negative_control_a_pause_past_the_timeout_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def select(self: CoalescingSelector, timeout: float | None = None) -> Any:
        self._sleep(2 * self.gap_s)  # twice the gap, whatever the timer
        return self._inner.select(timeout)
    monkeypatch.setattr(CoalescingSelector, "select", select)
    with pytest.raises(AssertionError):
        test_random_waits_end_when_the_loop_asked_them_to(0)


def test_negative_control_a_selector_that_never_pauses_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CoalescingSelector, "select",
                        lambda self, timeout=None: self._inner.select(timeout))
    with pytest.raises(AssertionError):
        test_a_busy_loop_waits_the_gap_out_and_a_timer_at_most_a_gap_more()


def test_files_registered_through_it_are_the_inner_selectors() -> None:
    a, b = socket.socketpair()
    try:
        sel = CoalescingSelector(selectors.DefaultSelector(), GAP_S)
        key = sel.register(a, selectors.EVENT_READ, "data")
        assert sel.get_key(a) is key and a in sel.get_map()
        b.send(b"x")
        assert [(k.data, ev) for k, ev in sel.select(1.0)] == [("data", selectors.EVENT_READ)]
        sel.modify(a, selectors.EVENT_READ | selectors.EVENT_WRITE, "more")
        assert sel.get_key(a).data == "more"
        sel.unregister(a)
        assert a not in sel.get_map()
        sel.close()
    finally:
        a.close()
        b.close()


def test_run_runs_on_the_coalescing_loop() -> None:
    async def main() -> bool:
        await asyncio.sleep(0)
        sel = getattr(asyncio.get_running_loop(), "_selector", None)
        return isinstance(sel, CoalescingSelector) and sel.gap_s == GAP_S

    assert coalesce.run(main()) is (hasattr(asyncio, "Runner"))


def test_the_collector_runs_its_loop_through_it() -> None:
    import inspect

    from probes.transport import collector_worker
    assert "coalesce.run(_main(parent))" in inspect.getsource(collector_worker.main)


def test_a_busy_loop_is_not_paused_while_a_connection_is_being_made() -> None:
    """An SSH handshake is a dozen round trips: each would wait out a pause (at 1024 hosts
    the last host's first sample came ~1 s later).  While ``hold`` answers True a busy loop
    polls as asyncio's does; once it answers False the pauses are back (the control)."""
    sel, inner, clock = make([(0.0, 1)] * 6, busy=True)
    connecting = [True]
    sel.hold = lambda: connecting[0]
    for _ in range(3):
        sel.select(1.0)
        clock.t += GAP_S / 4
    assert clock.slept == [] and sel.pauses == 0
    assert inner.timeouts == [1.0] * 3       # nor is a timer made to wait
    connecting[0] = False
    for _ in range(3):
        sel.select(1.0)
        clock.t += GAP_S / 4
    assert sel.pauses == 3 and clock.slept == [pytest.approx(GAP_S * 3 / 4)] * 3


def test_the_collector_holds_its_loop_while_its_sessions_connect() -> None:
    """``hold_while`` reaches the running loop's selector only on a coalescing loop."""
    from probes.transport.sessions import SessionFleet

    fleet = SessionFleet([])

    async def on_loop() -> tuple[bool, Any]:
        held = coalesce.hold_while(fleet.handshaking)
        selector = coalesce._SELECTORS.get(asyncio.get_running_loop())
        return held, None if selector is None else selector.hold

    held, hold = coalesce.run(on_loop())
    assert held is True and hold == fleet.handshaking
    assert asyncio.run(on_loop()) == (False, None)


async def test_the_connect_gate_says_while_a_connection_holds_it() -> None:
    """``SessionFleet.handshaking`` reads ``ConnectGate.held``: taken and given back through
    ``async with``, a waiter cancelled before its turn never counted, the limit kept."""
    from probes.transport.sessions import ConnectGate

    gate = ConnectGate(2)
    inside = asyncio.Event()
    leave = asyncio.Event()

    async def connect() -> None:
        async with gate:
            inside.set()
            await leave.wait()

    first = asyncio.create_task(connect())
    second = asyncio.create_task(connect())
    await inside.wait()
    await asyncio.sleep(0)
    assert gate.held == 2 and gate.locked()
    waiter = asyncio.create_task(connect())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert gate.held == 2
    leave.set()
    await asyncio.gather(first, second)
    assert gate.held == 0 and not gate.locked()
