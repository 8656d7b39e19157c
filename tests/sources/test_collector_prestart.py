"""Collectors started before the loop runs, adopted by the backend's first run (#38 item 5).

Real processes: the collectors are the console's own, the hosts the demo's simulated agents
over the local transport.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from probes.config.fleet import demo_fleet
from probes.sources import collector_start
from probes.sources.collector_start import EarlyCollector
from probes.sources.collectors import CollectorBackend
from probes.transport.collector_wire import CollectorJob, frame
from probes.wire.events import Connected, Disconnected, SessionItem
from probes.wire.samples import Hello, HostSample


async def _until(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_prestarted_collectors_are_the_ones_that_run_and_stopping_leaves_nothing() -> None:
    specs = demo_fleet(speed=60)[:4]
    backend = CollectorBackend(specs, 2, flush_s=0.02)
    backend.prestart()
    early = [s.early.popen.pid for s in backend._shards if s.early is not None]
    assert len(early) == 2
    items: dict[str, list[SessionItem]] = defaultdict(list)
    task = asyncio.create_task(backend.run(lambda h, i: items[h].append(i)))
    names = [s.name for s in specs]
    try:
        await _until(lambda: all(sum(isinstance(i, HostSample) for i in items[n]) >= 2
                                 for n in names), 30.0)
        assert sorted(backend.pids()) == sorted(early)  # adopted: no second process
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for name in names:
        got = items[name]
        assert isinstance(got[0], Connected) and isinstance(got[1], Hello)
        assert not any(isinstance(i, Disconnected) for i in got)
    await _until(lambda: all(_gone(p) for p in early), 10.0)
    assert backend.pids() == []


async def test_a_job_larger_than_the_pipe_is_written_whole_once_adopted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in collector that answers with the number of bytes its stdin carried.
    monkeypatch.setattr(collector_start, "collector_argv", lambda: [
        sys.executable, "-c",
        "import sys, time; time.sleep(0.5); sys.stdout.write(str(len(sys.stdin.buffer.read())))"])
    spec = demo_fleet(speed=60)[0]
    specs = tuple(dataclasses.replace(spec, name=f"host-{k:05d}") for k in range(3000))
    job = CollectorJob(specs, 8, 0.05, "collector 1")
    size = len(frame(job))
    early = EarlyCollector.spawn(job)
    assert 0 < len(early.unsent) < size  # the pipe took a part, not all
    proc = await early.adopt()
    proc.stdin.close()
    assert (await proc.stdout.read()).decode() == str(size)
    assert await proc.wait() == 0 and proc.returncode == 0


async def test_a_prestarted_collector_that_died_is_started_again() -> None:
    specs = demo_fleet(speed=60)[:2]
    backend = CollectorBackend(specs, 1, flush_s=0.02, restart_s=0.1)
    backend.prestart()
    shard = backend._shards[0]
    assert shard.early is not None
    dead = shard.early.popen.pid
    os.killpg(dead, 9)
    shard.early.popen.wait()
    items: dict[str, list[SessionItem]] = defaultdict(list)
    task = asyncio.create_task(backend.run(lambda h, i: items[h].append(i)))
    try:
        await _until(lambda: all(any(isinstance(i, HostSample) for i in items[s.name])
                                 for s in specs), 30.0)
        assert backend.pids() and dead not in backend.pids()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
