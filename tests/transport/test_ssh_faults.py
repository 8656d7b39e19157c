"""Fault injection with asyncssh's own server: drops, silence, garbage, key changes, bad auth."""

from __future__ import annotations

import asyncio
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import asyncssh
import pytest

from probes.analysis import reach_tracker
from probes.config.fleet import HostKeyChecking, HostSpec, SshOptions
from probes.fleet_state import FleetState, HostStatus
from probes.transport.session import SessionPolicy, run_session
from probes.wire.events import Connected, Disconnected, SessionItem
from probes.wire.samples import Hello, HostSample, ProbeError
from tests.conftest import AGENT_SOURCE

Handler = Callable[[asyncssh.SSHServerProcess[bytes]], Awaitable[None]]
FAST = SessionPolicy(backoff_base_s=0.1, backoff_cap_s=0.5, jitter=0.0, stall_s=1.0)


@pytest.fixture(scope="module")
def canned() -> list[bytes]:
    """A real agent's stream (hello, then samples) for the fake servers to replay."""
    out = subprocess.run([sys.executable, "-I", "-", "--simulate", "healthy", "--fast",
                          "--count", "40", "--interval", "0.2"], input=AGENT_SOURCE,
                         capture_output=True, check=True).stdout
    # the simulated host's fabric messages are no part of what these faults test
    return [line + b"\n" for line in out.splitlines() if b'"type":"fabric"' not in line]


class FaultServer:
    """asyncssh server on 127.0.0.1 whose sessions run a swappable handler."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.identity = root / "id_client"
        self.client_key.write_private_key(str(self.identity))
        self.known_hosts = root / "known_hosts"
        self.handler: Handler | None = None
        self.connections = 0
        self.port = 0
        self._server: asyncssh.SSHAcceptor | None = None
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")

    async def start(self, *, trust: bool = True, authorize: bool = True) -> None:
        pub = self.client_key if authorize else asyncssh.generate_private_key("ssh-ed25519")
        server = self

        class Counting(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                server.connections += 1

        self._server = await asyncssh.listen(
            "127.0.0.1", self.port, server_host_keys=[self.host_key], reuse_address=True,
            authorized_client_keys=asyncssh.import_authorized_keys(
                pub.export_public_key().decode()),
            process_factory=self._run, encoding=None, server_factory=Counting)
        self.port = self._server.get_port()
        if trust:
            self.trust()

    def trust(self) -> None:
        line = f"[127.0.0.1]:{self.port} {self.host_key.export_public_key().decode().strip()}"
        self.known_hosts.write_text(line + "\n")

    async def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        assert self.handler is not None
        try:
            await self.handler(process)
        except (asyncssh.Error, OSError, BrokenPipeError):
            pass
        finally:
            if not process.channel.is_closing():
                process.exit(0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def spec(self, **ssh: object) -> HostSpec:
        opts = SshOptions(address="127.0.0.1", port=self.port, user="ops",
                          identity=str(self.identity), known_hosts=str(self.known_hosts),
                          connect_timeout_s=3.0, login_timeout_s=3.0, keepalive_interval_s=1.0)
        return HostSpec(name="faulty", transport="ssh", interval_s=0.2,
                        ssh=replace(opts, **ssh))  # type: ignore[arg-type]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[FaultServer]:
    s = FaultServer(tmp_path)
    yield s
    await s.stop()


async def run_for(spec: HostSpec, seconds: float, policy: SessionPolicy = FAST,
                  until: Callable[[list[SessionItem]], bool] | None = None
                  ) -> list[SessionItem]:
    items: list[SessionItem] = []
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i), policy))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (until and until(items)):
        await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return items


def replay(lines: list[bytes], then: str = "exit", samples: int = 5) -> Handler:
    async def handler(process: asyncssh.SSHServerProcess[bytes]) -> None:
        for line in lines[:samples + 1]:
            process.stdout.write(line)
            await asyncio.sleep(0.02)
        if then == "drop":
            process.channel.get_connection().abort()
        elif then == "silent":
            await asyncio.sleep(3600)

    return handler


def kinds(items: list[SessionItem]) -> list[str]:
    return [type(i).__name__ for i in items]


async def test_drop_mid_stream_reconnects_and_resumes(server: FaultServer,
                                                      canned: list[bytes]) -> None:
    server.handler = replay(canned, then="drop", samples=3)
    await server.start()
    items = await run_for(server.spec(), 10,
                          until=lambda it: sum(isinstance(i, Hello) for i in it) >= 3)
    assert sum(isinstance(i, Hello) for i in items) >= 3
    drops = [i for i in items if isinstance(i, Disconnected)]
    assert drops and drops[0].kind in ("unreachable", "down")
    first_drop = items.index(drops[0])
    assert isinstance(items[first_drop + 1], Connected)
    assert any(isinstance(i, HostSample) for i in items[first_drop:])


async def test_silent_server_goes_stale_then_reconnects(
        server: FaultServer, canned: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach_tracker, "STALE_MIN_S", 0.5)
    server.handler = replay(canned, then="silent", samples=1)
    await server.start()
    spec = server.spec()
    fleet = FleetState([spec])
    seen: list[HostStatus] = []
    items: list[SessionItem] = []

    def emit(host: str, item: SessionItem) -> None:
        items.append(item)
        fleet.apply(host, item, time.time())

    policy = replace(FAST, stall_s=2.0)
    task = asyncio.create_task(run_session(spec, emit, policy))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
            isinstance(i, Disconnected) for i in items):
        seen.append(fleet.rows(time.time())[0].status)
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.6)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert HostStatus.STREAMING in seen and HostStatus.STALE in seen
    assert seen.index(HostStatus.STALE) > seen.index(HostStatus.STREAMING)
    drop = next(i for i in items if isinstance(i, Disconnected))
    assert (drop.kind, drop.reason) == ("stalled", "no data for 2 s")
    assert kinds(items).count("Connected") >= 2


async def test_garbage_and_10_mib_lines_are_counted_cut_and_reconnected(
        server: FaultServer, canned: list[bytes]) -> None:
    async def handler(process: asyncssh.SSHServerProcess[bytes]) -> None:
        process.stdout.write(canned[0])
        big = b"y" * (1024 * 1024)
        for _ in range(10):
            process.stdout.write(big)
            await process.stdout.drain()
        process.stdout.write(b"\n" + canned[1] + b"not json at all\n" * 5 + canned[2])
        process.stdout.write(b"\x00\xffjunk\n" * 80)
        await process.stdout.drain()
        await asyncio.sleep(3600)

    server.handler = handler
    await server.start()
    items = await run_for(server.spec(), 15,
                          until=lambda it: kinds(it).count("Connected") >= 2)
    drop = next(i for i in items if isinstance(i, Disconnected))
    assert drop.kind == "garbled"
    assert drop.stats is not None
    assert drop.stats.overlong == 1
    assert drop.stats.garbled > 50
    first = items[:items.index(drop)]
    assert kinds(first).count("HostSample") == 2
    assert kinds(items).count("Connected") >= 2


async def test_changed_host_key_is_refused_with_the_fix(server: FaultServer,
                                                        canned: list[bytes]) -> None:
    server.handler = replay(canned, then="exit", samples=2)
    await server.start()
    items = await run_for(server.spec(), 5, until=lambda it: isinstance(it[-1], Disconnected)
                          if it else False)
    assert kinds(items)[:2] == ["Connected", "Hello"]
    await server.stop()
    server.host_key = asyncssh.generate_private_key("ssh-ed25519")
    await server.start(trust=False)
    policy = replace(FAST, backoff_cap_s=30.0)
    items = await run_for(server.spec(), 3, policy)
    [drop] = [i for i in items if isinstance(i, Disconnected)]
    assert drop.kind == "host-key-refused"
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in drop.reason
    assert f"ssh-keygen -R '[127.0.0.1]:{server.port}' -f {server.known_hosts}" in drop.reason
    assert drop.retry_in_s is not None and drop.retry_in_s >= 24.0
    assert not any(isinstance(i, Connected) for i in items)


async def test_unknown_key_strict_refuses_accept_new_records(server: FaultServer,
                                                             canned: list[bytes]) -> None:
    server.handler = replay(canned, then="silent", samples=2)
    await server.start(trust=False)
    server.known_hosts.unlink(missing_ok=True)
    items = await run_for(server.spec(), 2, until=lambda it: bool(it))
    assert isinstance(items[0], Disconnected) and items[0].kind == "host-key-refused"
    assert "ssh-keyscan" in items[0].reason and "accept-new" in items[0].reason

    spec = server.spec(host_key_checking=HostKeyChecking.ACCEPT_NEW)
    items = await run_for(spec, 5, until=lambda it: any(isinstance(i, HostSample) for i in it))
    notes = [i for i in items if isinstance(i, ProbeError) and i.probe == "transport"]
    assert notes and "recorded new host key" in notes[0].message
    recorded = server.known_hosts.read_text()
    assert recorded.startswith(f"[127.0.0.1]:{server.port} ssh-ed25519 ")
    assert stat.S_IMODE(server.known_hosts.stat().st_mode) == 0o600
    assert any(isinstance(i, HostSample) for i in items)
    # The next connection is verified against what was recorded: no new note.
    items = await run_for(spec, 5, until=lambda it: any(isinstance(i, HostSample) for i in it))
    assert not any(isinstance(i, ProbeError) for i in items)


async def test_host_key_checking_off_warns_every_start(server: FaultServer,
                                                       canned: list[bytes]) -> None:
    server.handler = replay(canned, then="silent", samples=1)
    await server.start(trust=False)
    spec = server.spec(host_key_checking=HostKeyChecking.OFF)
    items = await run_for(spec, 5, until=lambda it: any(isinstance(i, HostSample) for i in it))
    warnings = [i.message for i in items if isinstance(i, ProbeError)]
    assert any("host key checking is OFF" in w for w in warnings)


async def test_auth_failure_is_reported_without_a_retry_storm(server: FaultServer,
                                                              canned: list[bytes]) -> None:
    server.handler = replay(canned)
    await server.start(authorize=False)
    policy = replace(FAST, backoff_cap_s=30.0)
    items = await run_for(server.spec(), 2.0, policy)
    drops = [i for i in items if isinstance(i, Disconnected)]
    assert [d.kind for d in drops] == ["auth-failed"]
    assert "permission denied" in drops[0].reason
    assert server.connections == 1


async def _first_drop(server: FaultServer, handler: Handler) -> Disconnected:
    """Serve every exec with ``handler``; the session's first Disconnected."""
    server.handler = handler
    await server.start()
    items = await run_for(server.spec(), 3, until=lambda it: any(
        isinstance(i, Disconnected) for i in it))
    return next(i for i in items if isinstance(i, Disconnected))


async def test_missing_python_on_the_host_is_agent_failed(server: FaultServer) -> None:
    async def handler(process: asyncssh.SSHServerProcess[bytes]) -> None:
        process.stderr.write(b"sh: 1: python3: not found\n")
        process.exit(127)

    drop = await _first_drop(server, handler)
    assert drop.kind == "agent-failed"
    assert drop.reason == "agent exited with status 127: sh: 1: python3: not found"


async def test_an_agent_killed_by_a_signal_says_which(server: FaultServer,
                                                      canned: list[bytes]) -> None:
    """The OOM killer takes the agent: the host says so with exit-signal, not a status."""
    async def handler(process: asyncssh.SSHServerProcess[bytes]) -> None:
        process.stdout.write(canned[0])
        await asyncio.sleep(0.2)
        process.exit_with_signal("KILL")

    drop = await _first_drop(server, handler)
    assert drop.kind == "agent-failed"
    assert drop.reason == "agent killed by signal KILL"


async def test_the_exec_request_is_the_quoted_bootstrap(server: FaultServer,
                                                        canned: list[bytes]) -> None:
    commands: list[str] = []

    async def handler(process: asyncssh.SSHServerProcess[bytes]) -> None:
        commands.append(process.command or "")
        data = b""
        while len(data) < len(AGENT_SOURCE):  # a read returns what has come so far
            chunk = await process.stdin.read(10 ** 6)
            if not chunk:
                break
            data += chunk
        commands.append(str(len(data)))

    server.handler = handler
    await server.start()
    spec = replace(server.spec(), simulate=("leak",), logs=("/var/log/job's $(rm -rf x).log",))
    await run_for(spec, 2, until=lambda _it: len(commands) >= 2)
    cmd = commands[0]
    assert cmd.startswith("python3 -u -c 'import sys;exec(compile(sys.stdin.buffer.read(")
    assert "'--tail=/var/log/job'\"'\"'s $(rm -rf x).log'" in cmd  # one quoted word
    assert int(commands[1]) == len(AGENT_SOURCE)  # the whole source came on stdin


async def test_connection_attempts_are_bounded(tmp_path: Path, canned: list[bytes]) -> None:
    """Six hosts, a gate of two: never more than two handshakes at once on the server."""
    from probes.sources.agents import AgentFleetBackend

    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    identity = tmp_path / "id"
    client_key.write_private_key(str(identity))
    active = peak = done = 0

    class SlowAuth(asyncssh.SSHServer):
        def begin_auth(self, username: str) -> bool:
            return True

        def public_key_auth_supported(self) -> bool:
            return True

        async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
            nonlocal active, peak, done
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.3)
            active -= 1
            done += 1
            return key.public_data == client_key.public_data

    async def handler(process: asyncssh.SSHServerProcess[bytes]) -> None:
        for line in canned[:3]:
            process.stdout.write(line)
        await asyncio.sleep(3600)

    server = await asyncssh.listen("127.0.0.1", 0, server_host_keys=[host_key],
                                   server_factory=SlowAuth, process_factory=handler,
                                   encoding=None)
    port = server.get_port()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
    ssh = SshOptions(address="127.0.0.1", port=port, user="ops", identity=str(identity),
                     known_hosts=str(known))
    specs = [HostSpec(name=f"h{i}", transport="ssh", ssh=ssh) for i in range(6)]
    hellos: set[str] = set()
    task = asyncio.create_task(AgentFleetBackend(specs, max_connecting=2).run(
        lambda h, i: hellos.add(h) if isinstance(i, Hello) else None))
    try:
        deadline = time.monotonic() + 15
        while len(hellos) < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        server.close()
    assert len(hellos) == 6
    assert done >= 6 and peak == 2
