"""Local transport and supervised sessions with real agent subprocesses."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from probes.fleet import HostSpec, demo_fleet
from probes.samples import Hello, HostSample, LogEvent
from probes.session import SessionPolicy, collect_once, run_session
from probes.session_events import Connected, Disconnected, SessionItem
from probes.transport.local import LocalTransport


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


async def test_local_transport_streams_and_stop_leaves_no_process() -> None:
    transport = LocalTransport(["--simulate", "healthy", "--interval", "0.1"])
    await transport.start()
    assert transport._proc is not None
    pid = transport._proc.pid
    data = b""
    async for chunk in transport.chunks():
        data += chunk
        if data.count(b"\n") >= 3:
            break
    await transport.stop()
    assert data.startswith(b'{"type":"hello"')
    assert not _alive(pid)


async def test_session_reconnects_after_the_agent_exits() -> None:
    items: list[SessionItem] = []
    spec = HostSpec(name="h1", simulate=("healthy",), interval_s=0.05,
                    extra_args=("--count", "2"))
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i),
                                           SessionPolicy(0.05, 0.05, jitter=0.0)))
    for _ in range(200):
        await asyncio.sleep(0.05)
        if sum(isinstance(i, Disconnected) for i in items) >= 2:
            break
    task.cancel()
    kinds = [type(i) for i in items]
    assert kinds[:5] == [Connected, Hello, HostSample, HostSample, Disconnected]
    assert kinds.count(Connected) >= 2
    first_drop = next(i for i in items if isinstance(i, Disconnected))
    assert first_drop.reason == "agent exited with status 0"
    assert first_drop.retry_in_s == 0.05


async def test_unstartable_interpreter_is_reported_not_raised() -> None:
    items: list[SessionItem] = []
    spec = HostSpec(name="h2", python="/nonexistent/python3", simulate=("healthy",))
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i),
                                           SessionPolicy(0.05, 1.0, jitter=0.0)))
    await asyncio.sleep(0.5)
    task.cancel()
    drops = [i for i in items if isinstance(i, Disconnected)]
    assert len(drops) >= 2
    assert "cannot start /nonexistent/python3" in drops[0].reason
    assert [d.retry_in_s for d in drops[:2]] == [0.05, 0.1]


async def test_collect_once_for_the_whole_demo_fleet() -> None:
    results = await asyncio.gather(*(collect_once(s) for s in demo_fleet()))
    assert len(results) == 8
    for r in results:
        assert r.failure is None
        assert r.hello is not None and len(r.hello.facts.gpus) == 8
        assert r.sample is not None and len(r.sample.gpus) == 8
        assert r.hello.facts.hostname == r.spec.name


async def test_collect_once_times_out_on_a_silent_host(tmp_path: Path) -> None:
    """A host whose interpreter starts but never answers: bounded, reported, no leftover."""
    silent = tmp_path / "python3"
    silent.write_text("#!/bin/sh\nexec sleep 30\n")
    silent.chmod(0o755)
    spec = HostSpec(name="silent", python=str(silent), simulate=("healthy",))
    t0 = time.monotonic()
    r = await collect_once(spec, timeout_s=1.0)
    assert time.monotonic() - t0 < 6.0
    assert r.sample is None
    assert r.failure == "no complete answer within 1 s"


async def test_a_reconnect_resumes_the_journal_after_the_last_cursor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second connection asks journalctl for what came after the last line it got."""
    from tests.test_agent_kernel_log import FAKE_JOURNALCTL, _exe

    bindir = tmp_path / "bin"
    bindir.mkdir()
    _exe(bindir / "journalctl", FAKE_JOURNALCTL)
    root = tmp_path / "root"
    (root / "var" / "log" / "journal" / "m").mkdir(parents=True)
    (root / "var" / "log" / "journal" / "m" / "system.journal").write_bytes(b"")
    (root / "proc" / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "random" / "boot_id").write_text("b007b007\n")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    spec = HostSpec(name="h1", interval_s=0.3,
                    extra_args=("--count", "4", "--log-root", str(root), "--kernel-log", "journal"))
    items: list[SessionItem] = []
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i),
                                           SessionPolicy(0.05, 0.05, jitter=0.0)))
    try:
        for _ in range(300):
            await asyncio.sleep(0.05)
            argv = [i.line for i in items if isinstance(i, LogEvent) and i.line.startswith("argv")]
            if len(argv) >= 2:
                break
    finally:
        task.cancel()
    assert len(argv) >= 2, items
    assert argv[0].endswith("--follow --lines=2000")
    assert argv[1].endswith("--follow --after-cursor=s=abc;i=4")
