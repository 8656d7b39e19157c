"""The live log rules run on a worker thread, off the console's UI loop (issue #35 item 1).

Security review 2026-12-06, E1: one 8 KB ``CUDA out of memory. Tried to allocate 111…1`` line
in a followed job log froze the console, because the rules ran on the UI loop when a redraw
asked for findings.  The patterns are linear now and a scan is budgeted; with the worker,
folding a line on the loop only queues it, and the scan happens on the worker's thread.
These tests check where the rules run, that the answer is the same as a scan on the loop,
and that one host's flood does not hold back another host's finding.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.rules.logrules import live
from probes.rules.logrules.families import Family
from probes.rules.logrules.lines import LogLine
from probes.rules.logrules.scan_worker import ScanWorker
from probes.rules.result import ExplainFinding
from probes.triage import Code, Severity
from probes.wire.samples import KERNEL_SOURCE, LogEvent, job_source
from tests.support.tui_fakes import (
    FakeBackend,
    FrozenClock,
    fleet_items,
    fleet_specs,
    settled,
    wait_until,
)
from tui.app import make_app
from tui.console_options import ConsoleOptions

T0 = 1_796_532_000.0
JOB = job_source("/scratch/alice/train.log")
HOSTILE = "CUDA out of memory. Tried to allocate " + "1" * 8000
"""The review's E1 line (8 KB of digits after the OOM words)."""
OOM = ("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
       "GPU 1 has a total capacity of 79.19 GiB of which 1.03 GiB is free.")
WATCHDOG = ("[rank0]:[E1206 05:41:12.101202 1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before "
            "timing out.")
FRAGMENTS = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, " * 130)[:8000]
"""The review's E3b line: 8 KB that a digit cut does not shorten, cued for the NCCL rules."""
XID = "NVRM: Xid (PCI:0000:48:00): 79, pid=0, GPU has fallen off the bus."


@pytest.fixture
def worker() -> Iterator[ScanWorker]:
    w = ScanWorker()
    w.start()
    yield w
    w.stop()


def _fleet(worker: ScanWorker | None, *names: str) -> FleetState:
    return FleetState([HostSpec(n) for n in names], scan_worker=worker)


def _lines() -> list[tuple[str, str]]:
    return [(JOB, "step 10 loss 2.31"), (JOB, OOM), (JOB, "step 11 loss 2.30"),
            (JOB, WATCHDOG), (KERNEL_SOURCE, XID)]


def _feed(fleet: FleetState, host: str, lines: Sequence[tuple[str, str]]) -> None:
    for i, (source, line) in enumerate(lines):
        fleet.apply(host, LogEvent(T0 + i, source, line), T0 + i)


def _answer(fleet: FleetState) -> list[tuple[object, ...]]:
    return sorted((str(f.code), f.host, f.ts, str(f.clock), f.line, f.summary)
                  for f in fleet.all_findings())


def test_the_worker_finds_what_a_scan_on_the_loop_finds(worker: ScanWorker) -> None:
    on_loop, apart = _fleet(None, "h1"), _fleet(worker, "h1")
    _feed(on_loop, "h1", _lines())
    _feed(apart, "h1", _lines())
    assert worker.settle()
    assert apart.take_scans()
    on_loop.scan_logs()  # the owner's write before a read (the app's tick)
    want = _answer(on_loop)
    assert {c[0] for c in want} >= {Code.CUDA_OOM, Code.XID}, want
    assert _answer(apart) == want


def test_the_rules_never_run_on_the_thread_that_folds(monkeypatch: pytest.MonkeyPatch,
                                                      worker: ScanWorker) -> None:
    threads: list[int] = []
    real = live.scan_lines

    def where(lines: Sequence[LogLine], families: Sequence[Family]) -> list[ExplainFinding]:
        threads.append(threading.get_ident())
        return real(lines, families)

    monkeypatch.setattr(live, "scan_lines", where)
    fleet = _fleet(worker, "h1")
    _feed(fleet, "h1", [(JOB, HOSTILE)] * 50 + _lines())
    fleet.all_findings()  # a redraw asking: takes what is there, scans nothing itself
    assert worker.settle()
    fleet.take_scans()
    assert threads and threading.get_ident() not in threads
    assert Code.CUDA_OOM in {f.code for f in fleet.all_findings()}


def test_one_hosts_flood_does_not_hold_back_another_hosts_finding(worker: ScanWorker) -> None:
    fleet = _fleet(worker, "flood", "quiet")
    flood, quiet = fleet.hosts["flood"].logs.scanner, fleet.hosts["quiet"].logs.scanner
    waiting_when_quiet_ran: list[int] = []
    real_work = quiet.work

    def work() -> tuple[bool, bool]:
        waiting_when_quiet_ran.append(flood.pending + len(flood.inbox))
        return real_work()

    quiet.work = work  # type: ignore[method-assign]
    _feed(fleet, "flood", [(JOB, FRAGMENTS)] * 200)  # 1.6 MB of cue lines: dozens of scans
    _feed(fleet, "quiet", [(KERNEL_SOURCE, XID)])
    assert worker.settle(60.0)
    fleet.take_scans()
    # the quiet host's line was scanned while the flood still had lines waiting
    assert waiting_when_quiet_ran and waiting_when_quiet_ran[0] > 0, waiting_when_quiet_ran
    assert Code.XID in {f.code for f in fleet.hosts["quiet"].findings()}
    assert worker.scans > 10  # the flood took many budgeted turns, not one long scan


def test_a_rule_that_raises_costs_its_turn_not_the_worker(monkeypatch: pytest.MonkeyPatch,
                                                          worker: ScanWorker) -> None:
    fleet = _fleet(worker, "h1", "h2")
    calls = {"n": 0}
    real = live.scan_lines

    def once_broken(lines: Sequence[LogLine], families: Sequence[Family]
                    ) -> list[ExplainFinding]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a rule's bug")
        return real(lines, families)

    monkeypatch.setattr(live, "scan_lines", once_broken)
    _feed(fleet, "h1", [(JOB, OOM)])
    assert worker.settle()
    _feed(fleet, "h2", [(KERNEL_SOURCE, XID)])
    assert worker.settle()
    fleet.take_scans()
    assert Code.XID in {f.code for f in fleet.hosts["h2"].findings()}


async def test_the_console_shows_what_the_worker_found() -> None:
    """Through the app: the worker's finding reaches the fleet's status line and triage
    without a key or a tick of the fake clock."""
    backend = FakeBackend(fleet_specs(), fleet_items())
    app = make_app(backend, ConsoleOptions(demo=True, scan_logs_apart=True), clock=FrozenClock())
    assert app.scan_worker is not None
    async with app.run_test(size=(160, 48)) as pilot:
        await settled(pilot, backend)
        backend.push("gpu-t03", LogEvent(T0, KERNEL_SOURCE, XID))
        state = app.fleet.hosts["gpu-t03"]
        # the app takes the worker's hits itself (nothing here asks for findings)
        kept = state.findings_kept
        await wait_until(pilot, lambda: any(f.code == Code.XID for f in kept.sticky.values()))
        rows = {r.name: r for r in app.fleet.rows(FrozenClock()())}
        assert rows["gpu-t03"].worst is Severity.CRITICAL
    assert app.scan_worker.scans >= 1
