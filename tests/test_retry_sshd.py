"""A host that comes back streams again within seconds, against a real OpenSSH sshd.

The review measured 75–90 s for hosts to return after an sshd restart (the backoff had
doubled to a minute).  Here sshd is stopped and its sessions' agents killed, the console
sees the host down (a finding, with a human reason), sshd starts again on the same port,
and the host must stream again within 10 s; and ``retry_now`` must cut a 30 s wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from probes.config.fleet import HostSpec, SshOptions
from probes.fleet_state import FleetState, HostState
from probes.transport.backend import AgentFleetBackend
from probes.transport.session import SessionPolicy
from probes.triage import Code, Severity
from probes.wire.events import Disconnected, SessionItem
from probes.wire.samples import HostSample
from tests.support.sshd import SSHD, Sshd, agent_pids, keygen, make_sshd

pytestmark = pytest.mark.skipif(not os.access(SSHD, os.X_OK),
                                reason="openssh-server is not installed (.ci/run installs it)")
HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"
BACK_WITHIN_S = 10.0


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sshd, Path, Path]]:
    root = tmp_path_factory.mktemp("retry")
    key = root / "client_ed25519"
    keygen(key)
    known = root / "known_hosts"
    server = make_sshd(root / "sshd", key, known)
    yield server, key, known
    server.stop()


def spec_for(server: Sshd, key: Path, known: Path) -> HostSpec:
    ssh = SshOptions(address="127.0.0.1", port=server.port, user="root", identity=str(key),
                     known_hosts=str(known), connect_timeout_s=5.0, login_timeout_s=10.0,
                     keepalive_interval_s=1.0, keepalive_count_max=3)
    return HostSpec(name="n1", transport="ssh", python=HOST_PYTHON,  # type: ignore[arg-type]
                    interval_s=0.2, simulate=("healthy",), speed=60.0, ssh=ssh)


async def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds it took for ``cond`` to hold."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - t0


def kill_agents() -> None:
    """End the live sessions: stopping sshd leaves its sessions' children running."""
    for pid in agent_pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Watch:
    """A fleet of one fed by a real backend, with every item kept."""

    def __init__(self, spec: HostSpec, policy: SessionPolicy | None = None) -> None:
        self.fleet = FleetState([spec])
        self.backend = AgentFleetBackend([spec], policy=policy)
        self.items: list[SessionItem] = []
        self.task: asyncio.Task[None] | None = None

    def _emit(self, host: str, item: SessionItem) -> None:
        self.items.append(item)
        self.fleet.apply(host, item, time.time())

    def start(self) -> None:
        self.task = asyncio.create_task(self.backend.run(self._emit))

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    @property
    def host(self) -> HostState:
        return self.fleet.hosts["n1"]

    def refused(self) -> bool:
        return any(isinstance(i, Disconnected) and i.kind == "unreachable"
                   for i in self.items)

    def streaming_since(self, n: int) -> bool:
        """Back: no outage, and a sample after item ``n``."""
        return self.host.outage is None and any(isinstance(i, HostSample)
                                                for i in self.items[n:])


async def test_a_host_streams_again_within_10_s_of_its_sshd_returning(
        sshd: tuple[Sshd, Path, Path]) -> None:
    server, key, known = sshd
    w = Watch(spec_for(server, key, known))
    w.start()
    try:
        await wait_for(lambda: w.host.last is not None, 15, "the first sample")
        server.stop()
        kill_agents()
        await wait_for(w.refused, 8, "a refused reconnect")
        [f] = [f for f in w.host.findings() if f.severity is Severity.CRITICAL]
        assert f.code == Code.HOST_UNREACHABLE
        assert f.summary == f"DOWN · connection refused by 127.0.0.1:{server.port} " \
            "(sshd down or port closed)"
        row = w.fleet.rows(time.time())[0]
        assert row.next_retry_s is not None and row.last_seen_s is not None
        server.start()
        n = len(w.items)
        taken = await wait_for(lambda: w.streaming_since(n), BACK_WITHIN_S, "streaming again")
        assert taken < BACK_WITHIN_S
        waits = [i.retry_in_s for i in w.items if isinstance(i, Disconnected)]
        assert waits and all(d is not None and d <= 5.0 * 1.2 for d in waits), waits
        print(f"back {taken:.1f} s after sshd returned; waits {waits}")
        assert not [f for f in w.host.findings() if f.code == Code.HOST_UNREACHABLE]
    finally:
        await w.stop()
        if server.proc is None:
            server.start()


async def test_retry_now_cuts_a_30_s_wait(sshd: tuple[Sshd, Path, Path]) -> None:
    server, key, known = sshd
    policy = SessionPolicy(backoff_base_s=30.0, backoff_cap_s=30.0, healthy_cap_s=30.0,
                           jitter=0.0)
    w = Watch(spec_for(server, key, known), policy)
    w.start()
    try:
        await wait_for(lambda: w.host.last is not None, 15, "the first sample")
        assert not w.backend.retry_now("n1")  # streaming: nothing to cut
        kill_agents()
        await wait_for(lambda: w.host.outage is not None, 5, "the drop")
        assert w.host.outage is not None and w.host.outage.retry_at is not None
        assert w.host.outage.retry_at - time.time() > 25.0
        n = len(w.items)
        assert w.backend.retry_now("n1")
        taken = await wait_for(lambda: w.streaming_since(n), 5, "streaming again")
        assert taken < 5.0
    finally:
        await w.stop()
