"""The alert hook is bounded: time, processes (grandchildren too), output and concurrency.

Real processes throughout.  A hook prints ``$$`` first: it leads its own session, so that is
its process-group id, and /proc then shows whether anything of the group is left.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.analysis.alerts import Alert
from probes.analysis.findings import Finding
from probes.analysis.hook import (
    HOOK_OUTPUT_LIMIT,
    HookGate,
    HookResult,
    group_members,
    run_hook,
)
from probes.triage import Severity, Step

GRACE = 0.5
SLACK = 1.5
"""Scheduling slack on two shared cores."""


def alert() -> Alert:
    return Alert(Finding(Step.GPU, "temp-near-slowdown", Severity.WARNING, "GPU3 at 88 °C",
                         "gpu017", gpu=3, ts=1.0), 2.0)


def pgid_of(output: str) -> int:
    return int(output.split()[0])


@pytest.fixture(autouse=True)
def no_strays() -> Iterator[list[int]]:
    """Groups a test started; whatever a failing assertion left is killed, by group."""
    groups: list[int] = []
    yield groups
    for g in groups:
        if group_members(g):
            os.killpg(g, signal.SIGKILL)


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def timed(argv: list[str], timeout_s: float) -> tuple[float, HookResult]:
    t0 = time.monotonic()
    result = await run_hook(argv, alert(), timeout_s, grace_s=GRACE)
    return time.monotonic() - t0, result


async def test_a_hook_with_a_sleeping_grandchild_is_killed_whole(
        no_strays: list[int]) -> None:
    took, result = await timed(["sh", "-c", "echo $$; sleep 300 & sleep 300"], 1.0)
    assert took < 1.0 + 2 * GRACE + SLACK, took
    assert result.returncode is None
    assert "did not finish within 1 s" in (result.error or "")
    pgid = pgid_of(result.output)
    no_strays.append(pgid)
    assert group_members(pgid) == []


async def test_a_hook_that_exits_but_leaves_a_child_on_the_pipe_ends_at_the_deadline(
        no_strays: list[int]) -> None:
    # the child holds stdout open: reading to EOF would wait for it forever
    took, result = await timed(["sh", "-c", "echo $$; sleep 300 & exit 0"], 1.0)
    assert took < 1.0 + 2 * GRACE + SLACK, took
    pgid = pgid_of(result.output)
    no_strays.append(pgid)
    assert result.ok
    assert group_members(pgid) == []


async def test_a_hook_that_ignores_sigterm_gets_sigkill(no_strays: list[int]) -> None:
    script = "trap '' TERM; echo $$; sleep 300 & sleep 300 & wait"
    took, result = await timed(["sh", "-c", script], 1.0)
    assert took < 1.0 + 2 * GRACE + SLACK, took
    pgid = pgid_of(result.output)
    no_strays.append(pgid)
    assert result.returncode is None
    assert group_members(pgid) == []


async def test_a_hung_hook_returns_at_its_timeout() -> None:
    took, result = await timed(["sleep", "300"], 0.5)
    assert 0.5 <= took < 0.5 + 2 * GRACE + SLACK, took
    assert result.returncode is None


async def test_a_flooding_hook_costs_no_memory_and_is_killed_at_its_timeout() -> None:
    peak = 0
    before = rss_kib()

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_kib())
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    cpu = time.process_time()
    took, result = await timed(["yes", "A" * 200], 2.0)
    cpu = time.process_time() - cpu
    sampler.cancel()
    assert cpu < 1.0, cpu  # discarding is paced: was a whole core (2.5 s of CPU in 3 s)
    assert took < 2.0 + 2 * GRACE + SLACK, took
    assert result.truncated and result.returncode is None
    assert len(result.output.encode()) < HOOK_OUTPUT_LIMIT + 200
    assert "more bytes of output discarded" in result.output
    # before the fix: 540 MiB after one second, 1.1 GiB after two
    assert peak - before < 32 * 1024, (before, peak)


async def test_a_chatty_hook_that_finishes_is_not_blocked_by_its_own_output() -> None:
    took, result = await timed(["sh", "-c", "yes | head -c 5000000; echo; exit 0"], 10.0)
    assert result.ok and result.truncated, result
    assert took < 5.0, took


async def test_a_cancelled_hook_run_leaves_no_process(no_strays: list[int],
                                                     tmp_path: Path) -> None:
    marker = tmp_path / "pgid"
    task = asyncio.create_task(run_hook(
        ["sh", "-c", f"echo $$ > {marker}; sleep 300 & sleep 300"], alert(), 60.0))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if marker.exists() and marker.read_text().strip():
            break
    pgid = int(marker.read_text())
    no_strays.append(pgid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(40):  # SIGKILL is delivered at once; the processes take a moment to go
        if not group_members(pgid):
            break
        await asyncio.sleep(0.05)
    assert group_members(pgid) == []


async def test_the_gate_runs_a_few_at_once_queues_some_and_drops_the_rest() -> None:
    gate = HookGate(at_once=2, waiting=2)
    admitted = [gate.admit() for _ in range(6)]
    assert admitted == [True, True, True, True, False, False]
    assert gate.dropped == 2
    most = 0

    async def watch() -> None:
        nonlocal most
        while True:
            most = max(most, gate.running)
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    t0 = time.monotonic()
    results = await asyncio.gather(*(gate.run(["sleep", "0.4"], alert(), 5.0)
                                     for _ in range(4)))
    took = time.monotonic() - t0
    watcher.cancel()
    assert all(r.ok for r in results)
    assert most == 2
    assert took >= 0.8  # two rounds of two
    assert gate.admitted == 0 and gate.running == 0
    assert gate.admit()  # places free again
