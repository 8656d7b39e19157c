"""``--collectors N``: sessions in worker processes, the console folding what they relay.

Real processes throughout: the collectors are started as the console starts them, and the
hosts are the demo's simulated agents (local transport, the agent's real code and wire
protocol v2), so the bytes a collector relays are what an agent writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from probes.config.fleet import demo_fleet
from probes.sources.collectors import CollectorBackend, auto_collectors
from probes.transport.collector_wire import (
    CollectorJob,
    RelayedHello,
    frame,
    frame_length,
    unframe,
)
from probes.transport.relay import Relay
from probes.wire.events import Connected, Disconnected, SessionItem
from probes.wire.protocol import decode_line
from probes.wire.samples import Hello, HostSample
from tests.support.tui_fakes import wait_until
from tui.app import make_app
from tui.cli import build_parser
from tui.console_options import ConsoleOptions

Items = dict[str, list[SessionItem]]


async def _until(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _streaming(items: Items, hosts: list[str], samples: int = 2) -> bool:
    return all(sum(isinstance(i, HostSample) for i in items[h]) >= samples for h in hosts)


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)  # the collector ran in its own session: its agents too
    except ProcessLookupError:
        return True
    return False


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_every_host_streams_through_two_collectors_and_stopping_leaves_nothing() -> None:
    specs = demo_fleet(speed=60)[:6]
    backend = CollectorBackend(specs, 2, flush_s=0.02)
    items: Items = defaultdict(list)
    task = asyncio.create_task(backend.run(lambda h, i: items[h].append(i)))
    names = [s.name for s in specs]
    try:
        await _until(lambda: _streaming(items, names), 30.0)
        pids = backend.pids()
        assert len(set(pids)) == 2
    finally:
        await _stop(task)
    for name in names:
        got = items[name]
        assert isinstance(got[0], Connected) and isinstance(got[1], Hello)
        assert got[1].protocol == 2 and got[1].facts.hostname  # decoded here, from bytes
        seqs = [i.seq for i in got if isinstance(i, HostSample)]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert all(len(i.gpus) >= 7 for i in got if isinstance(i, HostSample))  # b02 loses one
        # the collector's own decode never travels: each sample arrives exactly once
        assert not any(isinstance(i, Disconnected) for i in got)
    await _until(lambda: all(_gone(p) for p in pids), 10.0)
    assert backend.pids() == []


# A collector that dies, stalls or sends garbage: tests/transport/test_collector_faults.py


async def test_retry_now_reaches_the_collector_and_cuts_the_wait() -> None:
    spec = dataclasses.replace(demo_fleet(speed=60)[0], name="broken",
                               python="/nonexistent/python3")
    backend = CollectorBackend([spec], 1)
    items: Items = defaultdict(list)
    task = asyncio.create_task(backend.run(lambda h, i: items[h].append(i)))

    def downs() -> list[Disconnected]:
        return [i for i in items["broken"] if isinstance(i, Disconnected)]
    try:
        await _until(lambda: any((d.retry_in_s or 0) >= 1.5 for d in downs()), 20.0)
        last = downs()[-1]
        assert last.retry_in_s is not None and "cannot start" in last.reason
        assert backend.retry_now("broken")
        assert not backend.retry_now("no-such-host")
        count = len(downs())
        await _until(lambda: len(downs()) > count, 10.0)
        # the next attempt came at once, not after the announced wait
        assert downs()[count].ts < last.ts + last.retry_in_s - 0.5
    finally:
        await _stop(task)


async def test_the_console_runs_the_demo_through_a_collector() -> None:
    specs = demo_fleet(speed=60)
    backend = CollectorBackend(specs, 1)
    app = make_app(backend, ConsoleOptions(demo=True))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: len(app.fleet.hosts) == len(specs) and all(
            h.last is not None for h in app.fleet.hosts.values()), timeout_s=40.0)
        assert sum(len(h.last.gpus) for h in app.fleet.hosts.values()
                   if h.last is not None) >= 8 * len(specs) - 1
        pids = backend.pids()
        assert len(pids) == 1
        await pilot.press("q")
    await asyncio.sleep(0)
    assert backend.pids() == []


def test_the_relay_sends_lines_and_the_sessions_items_and_drops_its_own_decodes() -> None:
    """What one frame holds: whole lines in order (a line cut across chunks travels once it
    is whole), a clean end as None, session items whole; never the messages the
    collector's reader decoded, but for a hello: the one it decoded (issue 38, start-up)."""
    specs = tuple(demo_fleet()[:2])
    r, w = os.pipe()

    async def run() -> None:
        relay = Relay(CollectorJob(specs, 4, 0.01), w)
        reader = relay.new_reader(specs[1].name)
        relay.emit(specs[1].name, Connected(1.0))
        hello = b'{"type":"hello","v":1,"agent":"t","ts":1,"host":{"hostname":"x"},"gpus":[]}\n'
        for msg in reader.feed(hello[:20]) + reader.feed(hello[20:]):
            relay.emit(specs[1].name, msg)  # the session's own use: not relayed
        for msg in reader.close():
            relay.emit(specs[1].name, msg)
        relay.emit(specs[1].name, Disconnected(2.0, "agent exited", 1.0))
        await asyncio.sleep(0.05)

    try:
        asyncio.run(run())
        data = os.read(r, 1 << 16)
    finally:
        os.close(r)
        os.close(w)
    batch = unframe(data[4:4 + frame_length(data[:4])])
    assert isinstance(batch, list)
    kinds = [(i, type(e).__name__) for i, e in batch]
    assert kinds == [(1, "Connected"), (1, "RelayedHello"), (1, "NoneType"), (1, "Disconnected")]
    hello = b'{"type":"hello","v":1,"agent":"t","ts":1,"host":{"hostname":"x"},"gpus":[]}\n'
    assert batch[1][1] == RelayedHello(decode_line(hello), None, len(hello))  # decoded there


def test_frames_round_trip_and_refuse_a_silly_length() -> None:
    job = CollectorJob(tuple(demo_fleet()[:3]), 8, 0.05)
    data = frame(job)
    assert unframe(data[4:4 + frame_length(data[:4])]) == job
    with pytest.raises(ValueError):
        frame_length((2**31).to_bytes(4, "big"))


@pytest.mark.parametrize(("hosts", "cpus", "want"), [
    (9, 16, 0), (255, 16, 0), (256, 1, 0), (256, 2, 1), (1024, 2, 1), (1024, 16, 4),
    (5000, 64, 8)])
def test_the_automatic_count(hosts: int, cpus: int, want: int) -> None:
    assert auto_collectors(hosts, cpus) == want


def test_the_flag_takes_a_count_and_refuses_nonsense(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["--collectors", "3"]).collectors == 3
    assert build_parser().parse_args([]).collectors is None
    for bad in ("-1", "many", "65"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["--collectors", bad])
    assert "--collectors" in capsys.readouterr().err
