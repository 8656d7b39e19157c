"""Tarpits: hosts that accept TCP but never speak SSH must not starve the healthy ones.

Review finding 9: 128 such hosts listed first held the 32 handshake slots for their whole
connect timeout, so a good host listed last connected only after 128/32 × the timeout.
Now the TCP connect and the banner are waited for before a slot is taken, within
``banner_timeout_s``; only real handshakes are rationed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec
from probes.sources.agents import AgentFleetBackend
from probes.transport.dial import NoBanner, dial
from probes.wire.events import Disconnected, SessionItem
from probes.wire.samples import HostSample
from tests.transport.test_ssh_faults import FaultServer, canned, replay, server

__all__ = ["canned", "server"]  # fixtures used by name
TARPITS = 128


class Tarpit:
    """A listener on 127.0.0.1 that accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self.accepted = 0
        self._held: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        async def hold(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self.accepted += 1
            self._held.append(w)

        self._server = await asyncio.start_server(hold, "127.0.0.1", 0, backlog=512)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for w in self._held:
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def tarpit() -> AsyncIterator[Tarpit]:
    t = Tarpit()
    await t.start()
    yield t
    await t.stop()


async def test_a_silent_listener_is_given_up_on_after_the_banner_timeout(
        tarpit: Tarpit) -> None:
    t0 = time.monotonic()
    with pytest.raises(NoBanner, match=r"no SSH banner within 0.5 s \(it accepts TCP"):
        await dial("127.0.0.1", tarpit.port, 0.5)
    assert 0.4 < time.monotonic() - t0 < 2.0
    assert tarpit.accepted == 1


async def test_a_listener_that_hangs_up_or_a_closed_port_fails_at_once() -> None:
    async def hang_up(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.close()

    srv = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        with pytest.raises(NoBanner, match=r"before its SSH banner|reset"):
            await dial("127.0.0.1", port, 5.0)
    finally:
        srv.close()
        await srv.wait_closed()
    t0 = time.monotonic()
    with pytest.raises(NoBanner, match="refused"):
        await dial("127.0.0.1", port, 5.0)
    assert time.monotonic() - t0 < 1.0


async def test_128_tarpits_listed_first_do_not_hold_back_a_healthy_host(
        tarpit: Tarpit, server: FaultServer, canned: list[bytes]) -> None:
    server.handler = replay(canned, then="silent", samples=5)
    await server.start()
    good = server.spec()
    pit_ssh = replace(good.ssh, port=tarpit.port, banner_timeout_s=2.0, connect_timeout_s=10.0)
    specs = [HostSpec(name=f"pit{i:03d}", transport="ssh", ssh=pit_ssh)
             for i in range(TARPITS)] + [replace(good, name="good")]
    first_sample: float | None = None
    pit_drops: dict[str, tuple[float, Disconnected]] = {}
    t0 = time.monotonic()

    def emit(host: str, item: SessionItem) -> None:
        nonlocal first_sample
        if host == "good" and isinstance(item, HostSample) and first_sample is None:
            first_sample = time.monotonic() - t0
        if host.startswith("pit") and isinstance(item, Disconnected):
            pit_drops.setdefault(host, (time.monotonic() - t0, item))

    lag = 0.0

    async def ticker() -> None:
        nonlocal lag
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.05)
            lag = max(lag, time.monotonic() - before - 0.05)

    task = asyncio.create_task(AgentFleetBackend(specs).run(emit))
    tick = asyncio.create_task(ticker())
    try:
        deadline = t0 + 10.0
        while time.monotonic() < deadline and (first_sample is None
                                               or len(pit_drops) < TARPITS):
            await asyncio.sleep(0.05)
    finally:
        for t in (task, tick):
            t.cancel()
        await asyncio.gather(task, tick, return_exceptions=True)
    print(f"\ngood host's first sample after {first_sample} s; "
          f"{len(pit_drops)} tarpits given up on, the last after "
          f"{max((t for t, _ in pit_drops.values()), default=0):.2f} s; "
          f"worst loop lag {lag * 1000:.0f} ms; {tarpit.accepted} tarpit connections")
    assert first_sample is not None and first_sample < 10.0
    assert first_sample < 2.0  # it never waited for a tarpit's slot
    assert len(pit_drops) == TARPITS
    for _t, drop in pit_drops.values():
        assert drop.kind == "unreachable"
        assert "no SSH banner within 2 s" in drop.reason
    assert max(t for t, _ in pit_drops.values()) < 5.0  # the banner timeout, not 10 s


def test_the_banner_timeout_is_an_inventory_setting(tmp_path: Path) -> None:
    from probes.config.fleet import SshOptions
    from probes.config.inventory import load_inventory

    path = tmp_path / "inv.yaml"
    path.write_text("defaults:\n  banner_timeout: 1.5\nhosts:\n  - name: a\n  - name: b\n"
                    "    banner_timeout: 3\n")
    a, b = load_inventory(path).hosts
    assert (a.ssh.banner_timeout_s, b.ssh.banner_timeout_s) == (1.5, 3.0)
    assert SshOptions().banner_timeout_s == 5.0


async def test_a_tarpit_behind_a_jump_host_holds_its_slot_only_the_banner_timeout(
        tarpit: Tarpit, server: FaultServer, canned: list[bytes]) -> None:
    """Behind a ProxyJump hop there is no socket to peek at: the target's first bytes are
    watched on the hop's channel.  A healthy target through the same hop still streams."""
    import asyncssh

    class Forwarding(asyncssh.SSHServer):
        def connection_requested(self, dest_host: str, dest_port: int, orig_host: str,
                                 orig_port: int) -> bool:
            return True

    jump_key = asyncssh.generate_private_key("ssh-ed25519")
    jump = await asyncssh.listen(
        "127.0.0.1", 0, server_host_keys=[jump_key], server_factory=Forwarding,
        authorized_client_keys=asyncssh.import_authorized_keys(
            server.client_key.export_public_key().decode()))
    try:
        server.handler = replay(canned, then="silent", samples=5)
        await server.start()
        hop = jump.get_port()
        with server.known_hosts.open("a") as f:
            f.write(f"[127.0.0.1]:{hop} {jump_key.export_public_key().decode().strip()}\n")
        via = server.spec(jump=(f"ops@127.0.0.1:{hop}",), banner_timeout_s=1.0,
                          connect_timeout_s=10.0)
        pit = replace(via, name="pit", ssh=replace(via.ssh, port=tarpit.port))
        got: dict[str, list[tuple[float, SessionItem]]] = {"pit": [], "faulty": []}
        t0 = time.monotonic()
        task = asyncio.create_task(AgentFleetBackend([pit, via], max_connecting=1).run(
            lambda h, i: got[h].append((time.monotonic() - t0, i))))
        deadline = t0 + 8.0
        while time.monotonic() < deadline and not (
                any(isinstance(i, Disconnected) for _t, i in got["pit"])
                and any(isinstance(i, HostSample) for _t, i in got["faulty"])):
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        jump.close()
    t_drop, drop = next((t, i) for t, i in got["pit"] if isinstance(i, Disconnected))
    assert isinstance(drop, Disconnected) and drop.kind == "unreachable"
    assert drop.reason == (f"127.0.0.1:{tarpit.port}: no SSH banner within 1 s "
                           "(it accepts TCP but does not speak SSH)")
    assert t_drop < 4.0
    assert any(isinstance(i, HostSample) for _t, i in got["faulty"])


async def _serving(chunks: list[tuple[float, bytes]]) -> tuple[asyncio.Server, int]:
    """A listener that sends each chunk after its delay, then holds the connection."""
    async def talk(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        for delay, chunk in chunks:
            await asyncio.sleep(delay)
            w.write(chunk)
            await w.drain()
        await asyncio.sleep(30)

    srv = await asyncio.start_server(talk, "127.0.0.1", 0)
    return srv, srv.sockets[0].getsockname()[1]


async def test_an_endless_pre_banner_drip_is_a_tarpit_too() -> None:
    """endlessh sends other lines forever, slowly: bytes arrive, but never "SSH-"."""
    srv, port = await _serving([(0.1, f"line {i} of a tarpit\r\n".encode()) for i in range(50)])
    try:
        with pytest.raises(NoBanner, match=r"no SSH banner within 1 s"):
            await dial("127.0.0.1", port, 1.0)
    finally:
        srv.close()


async def test_lines_before_the_version_line_are_dropped_and_the_version_kept() -> None:
    srv, port = await _serving([(0.0, b"Welcome\r\nnotice: be"), (0.1, b" nice\r\nSS"),
                                (0.1, b"H-2.0-Test\r\n")])
    try:
        sock = await dial("127.0.0.1", port, 2.0)
        sock.setblocking(True)
        assert sock.recv(100) == b"SSH-2.0-Test\r\n"
        sock.close()
    finally:
        srv.close()


async def test_a_tarpit_named_through_ssh_config_is_given_up_on_too(
        tarpit: Tarpit, server: FaultServer, canned: list[bytes], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``ssh_config: true`` the address and port come from ``~/.ssh/config``: asyncssh's
    reading of it names the target, which is dialled and bounded the same way."""
    from probes.config.fleet import SshOptions

    server.handler = replay(canned, then="silent", samples=5)
    await server.start()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host pit\n  HostName 127.0.0.1\n  Port {tarpit.port}\n"
        f"Host faulty\n  HostName 127.0.0.1\n  Port {server.port}\n  User ops\n")
    monkeypatch.setenv("HOME", str(home))
    ssh = SshOptions(ssh_config=True, identity=str(server.identity), user="ops",
                     known_hosts=str(server.known_hosts), banner_timeout_s=1.0,
                     connect_timeout_s=10.0, login_timeout_s=10.0)
    specs = [HostSpec(name="pit", transport="ssh", ssh=ssh),
             HostSpec(name="faulty", transport="ssh", ssh=ssh, interval_s=0.2)]
    got: dict[str, list[tuple[float, SessionItem]]] = {"pit": [], "faulty": []}
    t0 = time.monotonic()
    task = asyncio.create_task(AgentFleetBackend(specs, max_connecting=1).run(
        lambda h, i: got[h].append((time.monotonic() - t0, i))))
    try:
        while time.monotonic() - t0 < 8.0 and not (
                any(isinstance(i, Disconnected) for _t, i in got["pit"])
                and any(isinstance(i, HostSample) for _t, i in got["faulty"])):
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    t_drop, drop = next((t, i) for t, i in got["pit"] if isinstance(i, Disconnected))
    assert isinstance(drop, Disconnected)
    assert drop.reason.startswith(f"127.0.0.1:{tarpit.port}: no SSH banner within 1 s")
    assert t_drop < 4.0
    assert any(isinstance(i, HostSample) for _t, i in got["faulty"])
