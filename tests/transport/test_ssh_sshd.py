"""The SSH path against a real OpenSSH sshd on 127.0.0.1 (and a second one as a jump target)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec, SshOptions
from probes.fleet_state import FleetState, HostStatus
from probes.sources.agents import AgentFleetBackend
from probes.transport.session import SessionPolicy, run_session
from probes.transport.ssh import SshTransport
from probes.triage import Severity
from probes.wire.events import Connected, Disconnected, SessionItem
from tests.support.sshd import SSHD, Sshd, agent_pids, keygen, make_sshd

pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason="openssh-server is not installed (.ci/run installs it)")
HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"


@dataclass
class SshWorld:
    target: Sshd
    jump: Sshd
    client_key: Path
    known_hosts: Path

    def spec(self, name: str, *scenarios: str, **kw: object) -> HostSpec:
        ssh = SshOptions(address="127.0.0.1", port=self.target.port, user="root",
                         identity=str(self.client_key), known_hosts=str(self.known_hosts),
                         connect_timeout_s=5.0, login_timeout_s=10.0,
                         keepalive_interval_s=1.0, keepalive_count_max=3)
        spec = HostSpec(name=name, transport="ssh", python=HOST_PYTHON, interval_s=0.2,
                        simulate=scenarios or ("healthy",), speed=60.0, ssh=ssh)
        return replace(spec, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshWorld]:
    root = tmp_path_factory.mktemp("ssh")
    key = root / "client_ed25519"
    keygen(key)
    known = root / "known_hosts"
    target = make_sshd(root / "target", key, known)
    jump = make_sshd(root / "jump", key, known)
    yield SshWorld(target, jump, key, known)
    target.stop()
    jump.stop()


async def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def no_agents_within(seconds: float) -> None:
    await wait_for(lambda: agent_pids() == [], seconds, f"agents gone: {agent_pids()}")


async def test_fleet_streams_and_each_host_shows_its_scenario(world: SshWorld) -> None:
    specs = [world.spec("n1", "healthy"), world.spec("n2", "link-downgrade:2"),
             world.spec("n3", "disk-saturated"), world.spec("n4", "xid79:6@30")]
    fleet = FleetState(specs)
    backend = AgentFleetBackend(specs)
    t0 = time.monotonic()
    def fold(host: str, item: SessionItem) -> None:
        fleet.apply(host, item, time.time())
        fleet.scan_logs()  # the owner's write, as the app's tick (every item here)

    task = asyncio.create_task(backend.run(fold))
    try:
        await wait_for(lambda: all(h.last is not None for h in fleet.hosts.values()), 20,
                       "every host streaming")
        print(f"\n4 hosts streaming over sshd after {time.monotonic() - t0:.2f} s")
        await wait_for(lambda: any(f.code == "xid" for f in fleet.hosts["n4"].findings()), 10,
                       "the xid79 host's kernel line")
        codes = {n: {f.code for f in h.findings() if f.severity is not Severity.INFO}
                 for n, h in fleet.hosts.items()}
        assert codes["n1"] == set()
        assert fleet.hosts["n1"].findings() == []  # the normal HGX layout is no finding
        assert codes["n2"] == {"pcie-link-downgraded"}
        assert codes["n3"] == {"disk-saturated"}
        assert {"xid", "gpu-lost", "gpu-fallen-off-bus"} <= codes["n4"]
        assert all(h.status is HostStatus.STREAMING for h in fleet.hosts.values())
        assert fleet.hosts["n2"].hello is not None
        assert fleet.hosts["n2"].hello.facts.hostname == "n2"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await no_agents_within(5.0)


async def test_proxyjump_through_a_bastion(world: SshWorld) -> None:
    """Target reached only through the jump sshd (its port given as the hop)."""
    spec = world.spec("behind-bastion", "healthy")
    spec = replace(spec, ssh=replace(spec.ssh, port=world.target.port,
                                     jump=(f"root@127.0.0.1:{world.jump.port}",)))
    items: list[SessionItem] = []
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i)))
    try:
        await wait_for(lambda: sum(type(i).__name__ == "HostSample" for i in items) >= 2, 20,
                       "samples through the jump host")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert not any(isinstance(i, Disconnected) for i in items)
    t = SshTransport(spec, spec.agent_args())
    await t.start()
    try:
        hop, final = t._conns
        assert hop.get_extra_info("peername")[1] == world.jump.port
        # Tunnelled: the target's connection rides the hop's TCP socket, not one of its own.
        assert final.get_extra_info("sockname") == hop.get_extra_info("sockname")
        assert final.get_extra_info("peername")[1] != world.target.port
    finally:
        await t.stop()
    await no_agents_within(5.0)


async def test_dropped_connection_leaves_no_agent(world: SshWorld) -> None:
    spec = world.spec("dropper", "healthy")
    t = SshTransport(spec, spec.agent_args())
    await t.start()
    first = await anext(aiter(t.chunks()))
    assert first.startswith(b'{"type":"hello"')
    assert agent_pids()
    # OpenSSH takes the client's first choice it also has: AES-GCM, cheaper than ChaCha20
    assert t._conns[-1].get_extra_info("recv_cipher") == "aes256-gcm@openssh.com"
    t._conns[-1].abort()  # the network goes away: no clean close, no EOF sent by us
    await no_agents_within(5.0)
    await t.stop()


def _kill_tree(pid: int) -> None:
    """sshd crashing: each process dies before its children (an agent killed first would
    make its session report a killed agent, not a lost server)."""
    children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    os.kill(pid, signal.SIGKILL)
    for child in children:
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            _kill_tree(child)


async def test_sshd_killed_and_restarted_resumes_within_the_cap(world: SshWorld) -> None:
    spec = world.spec("restart", "healthy")
    items: list[SessionItem] = []
    policy = SessionPolicy(backoff_base_s=0.2, backoff_cap_s=1.0, jitter=0.0, stall_s=3.0)
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i), policy))
    try:
        await wait_for(lambda: any(type(i).__name__ == "HostSample" for i in items), 20,
                       "first samples")
        assert world.target.proc is not None
        _kill_tree(world.target.proc.pid)
        world.target.proc.wait()
        await wait_for(lambda: any(isinstance(i, Disconnected) for i in items), 10, "the drop")
        await asyncio.sleep(2.0)  # a few failed attempts while it is down
        world.target.start()
        restarted = time.monotonic()
        n = len(items)
        await wait_for(lambda: any(type(i).__name__ == "HostSample" for i in items[n:]), 15,
                       "samples after the restart")
        resumed = time.monotonic() - restarted
        print(f"\nresumed {resumed:.2f} s after sshd came back (cap 1 s)")
        assert resumed < 1.0 * 1.2 + 3.0  # cap plus connect and first sample
        drops = [i for i in items if isinstance(i, Disconnected)]
        assert drops[0].kind in ("down", "unreachable", "stalled"), drops
        assert any(d.kind == "unreachable" for d in drops[1:])
        assert all(d.retry_in_s is not None and d.retry_in_s <= 1.0 for d in drops)
        assert sum(isinstance(i, Connected) for i in items) >= 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await no_agents_within(5.0)


def _inventory(world: SshWorld, path: Path) -> Path:
    path.write_text(f"""
defaults:
  port: {world.target.port}
  user: root
  identity: {world.client_key}
  known_hosts: {world.known_hosts}
  python: {HOST_PYTHON}
  interval: 0.5
  speed: 60
hosts:
  - name: inv-healthy
    address: 127.0.0.1
    simulate: healthy
  - name: inv-link
    address: 127.0.0.1
    simulate: link-downgrade:2
  - name: inv-disk
    address: 127.0.0.1
    simulate: disk-saturated
""")
    return path


def test_snapshot_over_ssh_from_an_inventory(world: SshWorld, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from tests.conftest import REPO

    inv = _inventory(world, tmp_path / "inv.yaml")
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--inventory", str(inv),
                           "--json"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    hosts = {h["name"]: h for h in json.loads(proc.stdout)["hosts"]}
    assert set(hosts) == {"inv-healthy", "inv-link", "inv-disk"}
    assert all(h["ok"] and len(h["sample"]["gpus"]) == 8 for h in hosts.values())
    assert {f["code"] for f in hosts["inv-link"]["findings"]} == {"pcie-link-downgraded"}
    assert {f["code"] for f in hosts["inv-disk"]["findings"]} == {"disk-saturated"}
    assert hosts["inv-healthy"]["findings"] == []


def test_console_over_ssh_in_a_real_terminal(world: SshWorld, tmp_path: Path) -> None:
    import shutil

    from tests.support.tmux import RIGWATCH, Tmux

    if shutil.which("tmux") is None or not RIGWATCH.exists():
        pytest.skip("tmux or the installed rigwatch script is missing")
    inv = _inventory(world, tmp_path / "inv.yaml")
    term = Tmux(160, 30)
    try:
        term.start(f"TERM=xterm-256color {RIGWATCH} --inventory {inv}")
        screen, waited = term.wait_for(
            lambda s: s.count("streaming") >= 4 and "PCIe x8" in s and "nvme0n1" in s,
            timeout=20)
        print(f"\n3 ssh hosts streaming on screen after {waited:.2f} s")
        assert "inv.yaml" in screen
        assert "PCIe x8" in screen and "nvme0n1" in screen
        assert agent_pids()
        term.keys("q")
        deadline = time.monotonic() + 8
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not term.alive()
    finally:
        term.kill()
    deadline = time.monotonic() + 5
    while agent_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert agent_pids() == [], "an agent outlived the console"


async def test_ssh_config_host_needs_only_its_name(world: SshWorld, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """User, HostName, Port and IdentityFile come from ~/.ssh/config via asyncssh."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host gpu-from-config\n  HostName 127.0.0.1\n  Port {world.target.port}\n"
        f"  User root\n  IdentityFile {world.client_key}\n")
    monkeypatch.setenv("HOME", str(home))
    spec = HostSpec(name="gpu-from-config", transport="ssh", python=HOST_PYTHON,
                    interval_s=0.2, simulate=("healthy",),
                    ssh=SshOptions(ssh_config=True, known_hosts=str(world.known_hosts)))
    items: list[SessionItem] = []
    task = asyncio.create_task(run_session(spec, lambda _h, i: items.append(i)))
    try:
        await wait_for(lambda: any(type(i).__name__ == "HostSample" for i in items), 20,
                       "samples from a host known only by its ssh-config name")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert not any(isinstance(i, Disconnected) for i in items)
