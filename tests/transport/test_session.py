"""Local transport and supervised sessions with real agent subprocesses."""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec, TransportName, demo_fleet
from probes.errors import DisconnectKind
from probes.transport import TRANSPORTS
from probes.transport.local import LocalTransport
from probes.transport.session import SessionPolicy, collect_once, make_transport, run_session
from probes.wire.events import Connected, Disconnected, SessionItem
from probes.wire.samples import (
    JOB_SOURCE_PREFIX,
    KERNEL_SOURCE,
    FabricSample,
    Hello,
    HostSample,
    LogEvent,
    job_path,
    job_source,
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_every_transport_name_has_one_factory() -> None:
    assert set(TRANSPORTS) == set(TransportName)


def test_a_spec_names_its_transport_by_member_and_the_registry_makes_it() -> None:
    spec = HostSpec("h", transport="local")  # type: ignore[arg-type]  # as a script writes it
    assert spec.transport is TransportName.LOCAL and f"{spec.transport}" == "local"
    assert isinstance(make_transport(spec), LocalTransport)
    with pytest.raises(ValueError, match="'telnet' is not a valid TransportName"):
        HostSpec("h", transport="telnet")  # type: ignore[arg-type]


def test_the_agent_names_log_sources_as_the_console_reads_them() -> None:
    from probes.transport.bootstrap import agent_source

    source = agent_source(simulate=False).decode()
    assert f'"source": "{KERNEL_SOURCE}"' in source and f'"{JOB_SOURCE_PREFIX}" + ' in source
    assert job_path(job_source("/var/log/train.log")) == "/var/log/train.log"
    assert job_path(KERNEL_SOURCE) is None


def test_a_refused_login_waits_the_full_cap_and_other_drops_back_off() -> None:
    policy = SessionPolicy(backoff_base_s=1.0, backoff_cap_s=60.0, jitter=0.0)
    rng = random.Random(0)
    assert policy.delay(0, DisconnectKind.AUTH_FAILED, rng) == 60.0
    assert policy.delay(0, DisconnectKind.HOST_KEY_REFUSED, rng) == 60.0
    assert [policy.delay(a, DisconnectKind.STALLED, rng) for a in range(3)] == [1.0, 2.0, 4.0]


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
    await asyncio.gather(task, return_exceptions=True)  # its agent stopped, not left to GC
    kinds = [type(i) for i in items if not isinstance(i, FabricSample)]  # beside its sample
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
    await asyncio.gather(task, return_exceptions=True)
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
    from tests.agent.test_agent_kernel_log import FAKE_JOURNALCTL, _exe

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
        await asyncio.gather(task, return_exceptions=True)  # its agent stopped, not orphaned
    assert len(argv) >= 2, items
    assert argv[0].endswith("--follow --lines=2000")
    assert argv[1].endswith("--follow --after-cursor=s=abc;i=4")


class _ScriptedTransport:
    """A transport that sends ``chunks`` ``gap_s`` apart, then hangs or ends."""

    def __init__(self, chunks: list[bytes], gap_s: float, hang: bool,
                 stop_s: float = 0.0) -> None:
        self.notes: list[str] = []
        self._chunks, self._gap, self._hang, self._stop_s = chunks, gap_s, hang, stop_s
        self.stopped = 0

    async def start(self) -> None:
        return None

    async def chunks(self):  # type: ignore[no-untyped-def]
        for c in self._chunks:
            await asyncio.sleep(self._gap)
            yield c
        if self._hang:
            await asyncio.sleep(3600)

    async def exit_reason(self) -> str:
        return "agent closed its output"

    async def stop(self) -> None:
        await asyncio.sleep(self._stop_s)
        self.stopped += 1


def _sample_line(seq: int) -> bytes:
    return (f'{{"type":"sample","v":1,"ts":{1000.0 + seq},"seq":{seq},"gpus":[],'
            f'"host":{{}}}}\n').encode()


async def _session_with(monkeypatch: pytest.MonkeyPatch, transports: list[_ScriptedTransport],
                        stall_s: float, until: int, limit_s: float = 10.0) -> list[SessionItem]:
    import probes.transport.session as session

    queue = list(transports)
    monkeypatch.setattr(session, "make_transport", lambda *_a, **_k: queue.pop(0))
    items: list[SessionItem] = []
    task = asyncio.create_task(run_session(
        HostSpec(name="h1"), lambda _h, i: items.append(i),
        SessionPolicy(0.01, 0.01, jitter=0.0, stall_s=stall_s)))
    t0 = time.monotonic()
    while sum(isinstance(i, Disconnected) for i in items) < until and queue:
        assert time.monotonic() - t0 < limit_s, items
        await asyncio.sleep(0.02)
    while sum(isinstance(i, Disconnected) for i in items) < until:
        assert time.monotonic() - t0 < limit_s, items
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    # Under load a further attempt may begin before the cancel lands (the queue is empty
    # then, which is that attempt's own failure): the items asked for end at ``until``.
    drops = [n for n, i in enumerate(items) if isinstance(i, Disconnected)]
    return items[:drops[until - 1] + 1]


async def test_a_silent_stream_is_stalled_and_the_session_reconnects(
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = _ScriptedTransport([_sample_line(1)], 0.01, hang=True)
    second = _ScriptedTransport([_sample_line(2)], 0.01, hang=True)
    t0 = time.monotonic()
    items = await _session_with(monkeypatch, [first, second], stall_s=0.3, until=2)
    downs = [i for i in items if isinstance(i, Disconnected)]
    assert [d.kind for d in downs] == ["stalled", "stalled"]
    assert downs[0].reason == "no data for 0.3 s"
    assert sum(isinstance(i, Connected) for i in items) == 2
    assert [i.seq for i in items if isinstance(i, HostSample)] == [1, 2]
    assert first.stopped == second.stopped == 1
    assert time.monotonic() - t0 >= 0.6  # each connection got its full stall_s


async def test_a_steady_stream_slower_than_nothing_is_never_stalled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks every 0.1 s for 1.2 s under a 0.3 s stall limit: the watchdog re-arms."""
    steady = _ScriptedTransport([_sample_line(s) for s in range(12)], 0.1, hang=False)
    items = await _session_with(monkeypatch, [steady], stall_s=0.3, until=1)
    downs = [i for i in items if isinstance(i, Disconnected)]
    assert downs[0].kind == "down" and downs[0].reason == "agent closed its output"
    assert len([i for i in items if isinstance(i, HostSample)]) == 12


async def test_the_stall_watch_ends_with_its_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection dropped for garbage while its stream is still open, with a stop slower
    than the stall limit: that connection's watchdog must not cancel what comes next."""
    garbled = _ScriptedTransport([_sample_line(1), b"junk\n" * 60], 0.01, hang=True,
                                 stop_s=0.5)
    stays = _ScriptedTransport([_sample_line(s) for s in range(2, 14)], 0.1, hang=False)
    items = await _session_with(monkeypatch, [garbled, stays], stall_s=0.3, until=2)
    assert [i.kind for i in items if isinstance(i, Disconnected)] == ["garbled", "down"]
    assert len([i for i in items if isinstance(i, HostSample)]) == 13
    assert garbled.stopped == 1


async def test_a_cancelled_fleet_returns_once_every_agent_is_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Quitting waits for the backend: it must not return while sessions still close."""
    import probes.transport.session as session
    from probes.sources.agents import AgentFleetBackend

    transports = [_ScriptedTransport([_sample_line(1)], 0.01, hang=True, stop_s=0.05 * i)
                  for i in range(1, 7)]
    queue = list(transports)
    monkeypatch.setattr(session, "make_transport", lambda *_a, **_k: queue.pop(0))
    items: list[tuple[str, SessionItem]] = []
    backend = AgentFleetBackend([HostSpec(name=f"h{i}") for i in range(6)])
    task = asyncio.create_task(backend.run(lambda h, i: items.append((h, i))))
    while sum(isinstance(i, HostSample) for _, i in items) < 6:
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert [t.stopped for t in transports] == [1] * 6


# ---- one host can never stop the others ------------------------------------------------

FAST_RETRY = SessionPolicy(backoff_base_s=0.1, backoff_cap_s=0.3, jitter=0.0, stall_s=5.0)


def _canned_hello_and_sample() -> bytes:
    """A real agent's first two lines (hello, sample), for a fake agent to replay."""
    import subprocess
    import sys

    from tests.conftest import AGENT_SOURCE

    out = subprocess.run([sys.executable, "-I", "-", "--simulate", "healthy", "--fast",
                          "--count", "2", "--interval", "0.2"], input=AGENT_SOURCE,
                         capture_output=True, check=True).stdout
    return b"".join(line + b"\n" for line in out.splitlines()[:2])


async def _watch_fleet(specs: list[HostSpec], seconds: float,
                       ) -> tuple[list[tuple[float, str, SessionItem]], asyncio.Task[None]]:
    """Run the fleet backend for ``seconds``; every (time, host, item) and the run's task."""
    from probes.sources.agents import AgentFleetBackend

    got: list[tuple[float, str, SessionItem]] = []
    task = asyncio.create_task(AgentFleetBackend(specs, policy=FAST_RETRY, crash_retry_s=0.3)
                               .run(lambda h, i: got.append((time.monotonic(), h, i))))
    await asyncio.sleep(seconds)
    return got, task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_deeply_nested_line_from_one_host_leaves_the_others_streaming(
        tmp_path: Path) -> None:
    """Review finding 4: '[' * 100000 made the reader raise RecursionError, the fleet's
    gather propagated it and every host stopped.  Now the healthy host streams on."""
    lines = _canned_hello_and_sample()
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + lines.decode() + "[" * 100000
                    + "\nEOF\nexec sleep 30\n")
    fake.chmod(0o755)
    specs = [HostSpec("evil", python=str(fake)),
             HostSpec("good", simulate=("healthy",), interval_s=0.1)]
    got, task = await _watch_fleet(specs, 4.0)
    try:
        assert not task.done(), task.exception()
        end = time.monotonic()
        late = [i for t, h, i in got if h == "good" and isinstance(i, HostSample)
                and t > end - 1.0]
        assert late, "the healthy host stopped streaming"
        evil = [i for _t, h, i in got if h == "evil"]
        assert any(isinstance(i, Hello) for i in evil)
        # Whichever way the reader copes (a garbled line, or a failure), nothing escaped.
        for drop in (i for i in evil if isinstance(i, Disconnected)):
            assert drop.kind in (DisconnectKind.AGENT_FAILED, DisconnectKind.GARBLED)
    finally:
        await _stop(task)


class _Exploding:
    """A transport whose stream raises something no transport is meant to raise."""

    def __init__(self, exc: BaseException, where: str) -> None:
        self.notes: list[str] = []
        self.exc, self.where = exc, where
        self.stopped = 0

    async def start(self) -> None:
        if self.where == "start":
            raise self.exc

    async def chunks(self):  # type: ignore[no-untyped-def]
        yield b'{"type":"sample"'
        raise self.exc

    async def exit_reason(self) -> str:
        return "never"

    async def stop(self) -> None:
        self.stopped += 1


@pytest.mark.parametrize(("exc", "where"), [
    (RecursionError("maximum recursion depth exceeded while decoding a JSON array"), "chunks"),
    (RuntimeError("\x1b]0;pwned\x07 boom"), "chunks"),
    (KeyError("hello"), "start"),
])
async def test_any_session_failure_is_that_hosts_agent_failed_state_and_it_retries(
        monkeypatch: pytest.MonkeyPatch, exc: BaseException, where: str) -> None:
    from probes.transport import session

    made: list[_Exploding] = []

    def factory(spec: HostSpec, args: list[str], gate: object) -> object:
        if spec.name == "bad":
            made.append(_Exploding(exc, where))
            return made[-1]
        return TRANSPORTS[TransportName.LOCAL](spec, args, None)

    monkeypatch.setattr(session, "TRANSPORTS", {TransportName.LOCAL: factory})
    specs = [HostSpec("bad"), HostSpec("good", simulate=("healthy",), interval_s=0.1)]
    got, task = await _watch_fleet(specs, 3.0)
    try:
        assert not task.done()
        drops = [i for _t, h, i in got if h == "bad" and isinstance(i, Disconnected)]
        assert len(drops) >= 3, "the failing host must retry with backoff"
        assert {d.kind for d in drops} == {DisconnectKind.AGENT_FAILED}
        assert drops[0].reason.startswith(f"session failed: {type(exc).__name__}")
        assert "\x1b" not in drops[0].reason and all(d.retry_in_s for d in drops)
        assert all(t.stopped == 1 for t in made[:-1])  # every failed attempt was cleaned up
        end = time.monotonic()
        assert [i for t, h, i in got if h == "good" and isinstance(i, HostSample)
                and t > end - 1.0]
    finally:
        await _stop(task)


async def test_a_host_that_breaks_its_session_after_good_lines_keeps_backing_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hello then a hostile line, every time: the retries slow down to the cap instead of
    a fresh handshake every base delay (good messages alone do not reset the backoff)."""
    import probes.transport.session as session

    class GoodThenBad(_ScriptedTransport):
        async def chunks(self):  # type: ignore[no-untyped-def]
            yield _sample_line(1)
            raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(session, "make_transport",
                        lambda *_a, **_k: GoodThenBad([], 0.0, hang=False))
    items: list[SessionItem] = []
    task = asyncio.create_task(run_session(
        HostSpec(name="h1"), lambda _h, i: items.append(i),
        SessionPolicy(0.05, 0.4, jitter=0.0, stall_s=5.0)))
    t0 = time.monotonic()
    while sum(isinstance(i, Disconnected) for i in items) < 5 and time.monotonic() - t0 < 5:
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    delays = [i.retry_in_s for i in items if isinstance(i, Disconnected)][:5]
    assert delays == [0.05, 0.1, 0.2, 0.4, 0.4]


def test_a_host_that_streamed_before_waits_at_most_the_healthy_cap() -> None:
    policy = SessionPolicy(backoff_base_s=1.0, backoff_cap_s=60.0, jitter=0.0)
    rng = random.Random(0)
    never = [policy.delay(a, DisconnectKind.UNREACHABLE, rng) for a in range(7)]
    assert never == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
    back = [policy.delay(a, DisconnectKind.UNREACHABLE, rng, streamed=True) for a in range(7)]
    assert back == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]
    assert policy.delay(9, DisconnectKind.STALLED, rng, streamed=True) == 5.0
    # refusals, and hosts whose stream keeps breaking the session, keep backing off
    assert policy.delay(0, DisconnectKind.HOST_KEY_REFUSED, rng, streamed=True) == 60.0
    assert policy.delay(9, DisconnectKind.GARBLED, rng, streamed=True) == 60.0
    assert policy.delay(9, DisconnectKind.AGENT_FAILED, rng, streamed=True) == 60.0
    assert policy.delay(10_000, DisconnectKind.DOWN, rng) == 60.0  # no overflow


async def test_retry_now_cuts_a_long_wait_and_says_when_there_is_none() -> None:
    from probes.sources.agents import AgentFleetBackend

    items: list[tuple[str, SessionItem]] = []
    spec = HostSpec(name="h1", simulate=("healthy",), interval_s=0.05,
                    extra_args=("--count", "10"))
    backend = AgentFleetBackend([spec], policy=SessionPolicy(30.0, 60.0, jitter=0.0,
                                                             healthy_cap_s=30.0))
    task = asyncio.create_task(backend.run(lambda h, i: items.append((h, i))))
    try:
        for _ in range(200):
            await asyncio.sleep(0.02)
            if any(isinstance(i, HostSample) for _, i in items):
                break
        assert not any(isinstance(i, Disconnected) for _, i in items)
        assert not backend.retry_now("h1")  # streaming: there is no wait to cut
        for _ in range(200):
            await asyncio.sleep(0.02)
            if any(isinstance(i, Disconnected) for _, i in items):
                break
        drop = next(i for _, i in items if isinstance(i, Disconnected))
        assert drop.retry_in_s == 30.0
        assert not backend.retry_now("nope")
        t0 = time.monotonic()
        assert backend.retry_now("h1")
        for _ in range(200):
            await asyncio.sleep(0.02)
            if sum(isinstance(i, Hello) for _, i in items) >= 2:
                break
        assert sum(isinstance(i, Hello) for _, i in items) == 2
        assert time.monotonic() - t0 < 3.0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_refused_connect_reads_as_its_cause_not_as_python() -> None:
    import socket

    from probes.transport.dial import NoBanner, dial

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NoBanner) as caught:
        await dial("127.0.0.1", port, 2.0)
    assert caught.value.msg == \
        f"connection refused by 127.0.0.1:{port} (sshd down or port closed)"
    assert "Connect call failed" not in caught.value.msg


def test_every_connect_failure_names_a_likely_cause() -> None:
    import errno
    import socket

    from probes.transport.dial import describe_os_error, describe_timeout

    asyncio_text = OSError(errno.ECONNREFUSED, "Connect call failed ('10.0.0.7', 22)")
    assert describe_os_error("10.0.0.7", 22, asyncio_text) == \
        "connection refused by 10.0.0.7:22 (sshd down or port closed)"
    assert describe_os_error("10.0.0.7", 22, OSError(errno.EHOSTUNREACH, "x")).startswith(
        "no route to 10.0.0.7:22 (host down")
    assert describe_os_error("10.0.0.7", 22, OSError(errno.ENETUNREACH, "x")).startswith(
        "network unreachable for 10.0.0.7:22")
    assert "(a typo, or not in DNS or /etc/hosts?)" in describe_os_error(
        "gpu-b0x", 22, socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    assert describe_timeout("10.0.0.7", 22, "TCP connect", 5.0) == \
        "no answer from 10.0.0.7:22 within 5 s (host down, or a firewall drops the packets)"
    assert describe_timeout("gpu-b0x", 22, "name lookup", 5.0).startswith(
        "name lookup for gpu-b0x took over 5 s")
    assert describe_timeout("10.0.0.7", 22, "SSH banner", 5.0) == \
        "10.0.0.7:22: no SSH banner within 5 s (it accepts TCP but does not speak SSH)"


class _CountedRandom(random.Random):
    made = 0

    def __init__(self, seed: object = None) -> None:
        type(self).made += 1
        super().__init__(seed)


async def test_a_streaming_session_holds_no_random_until_it_backs_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``Random`` is 2.5 KB; 1024 streaming sessions need none (issue 38).  The first
    backoff makes it, seeded by the host's name: the jitter is what it was."""
    import probes.transport.session as session_module

    monkeypatch.setattr(session_module.random, "Random", _CountedRandom)
    _CountedRandom.made = 0
    items: list[SessionItem] = []
    spec = HostSpec(name="h-jitter", simulate=("healthy",), interval_s=0.05,
                    extra_args=("--count", "8"))
    policy = SessionPolicy(0.05, 0.05, jitter=0.5)
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i), policy))
    for _ in range(200):
        await asyncio.sleep(0.05)
        if sum(isinstance(i, HostSample) for i in items) >= 3 or \
                any(isinstance(i, Disconnected) for i in items):
            break
    assert not any(isinstance(i, Disconnected) for i in items)
    assert _CountedRandom.made == 0, "a streaming session made its jitter early"
    for _ in range(200):
        await asyncio.sleep(0.05)
        if sum(isinstance(i, Disconnected) for i in items) >= 2:
            break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    drops = [i.retry_in_s for i in items if isinstance(i, Disconnected)][:2]
    assert _CountedRandom.made == 1
    want = random.Random(spec.name)
    assert drops == [0.05 * (1.0 + want.uniform(-0.5, 0.5)) for _ in drops]
