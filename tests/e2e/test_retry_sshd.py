"""A host that comes back streams again within seconds, against a real OpenSSH sshd.

The review measured 75–90 s for hosts to return after an sshd restart (the backoff had
doubled to a minute).  Here sshd is stopped and its sessions' agents killed: the console
sees three hosts down (each a finding with a human reason, one grouped page for all three),
sshd starts again on the same port, and every host must stream again within 10 s; and
``retry_now`` must cut a 30 s wait.
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

from probes.analysis.alerts import AlertTracker
from probes.analysis.findings import Finding
from probes.config.fleet import HostSpec, SshOptions
from probes.fleet_state import FleetState, HostState
from probes.sources.agents import AgentFleetBackend
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


def spec_for(server: Sshd, key: Path, known: Path, name: str = "n1") -> HostSpec:
    ssh = SshOptions(address="127.0.0.1", port=server.port, user="root", identity=str(key),
                     known_hosts=str(known), connect_timeout_s=5.0, login_timeout_s=10.0,
                     keepalive_interval_s=1.0, keepalive_count_max=3)
    return HostSpec(name=name, transport="ssh", python=HOST_PYTHON,  # type: ignore[arg-type]
                    interval_s=0.2, simulate=("healthy",), speed=60.0, ssh=ssh)


async def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds it took for ``cond`` to hold."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - t0


def all_findings(fleet: FleetState) -> list[Finding]:
    return [f for h in fleet.hosts.values() for f in h.findings()]


def kill_agents() -> None:
    """End the live sessions: stopping sshd leaves its sessions' children running."""
    for pid in agent_pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Watch:
    """A fleet fed by a real backend, with every item kept (``host`` is the first host)."""

    def __init__(self, *specs: HostSpec, policy: SessionPolicy | None = None) -> None:
        self.fleet = FleetState(list(specs))
        self.backend = AgentFleetBackend(list(specs), policy=policy)
        self.items: list[SessionItem] = []
        self.by_host: dict[str, list[SessionItem]] = {s.name: [] for s in specs}
        self.task: asyncio.Task[None] | None = None

    def _emit(self, host: str, item: SessionItem) -> None:
        self.items.append(item)
        self.by_host[host].append(item)
        self.fleet.apply(host, item, time.time())
        self.fleet.scan_logs()  # the owner's write, as the app's tick (every item here)

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
        """Every host has had a reconnect refused."""
        return all(any(isinstance(i, Disconnected) and i.kind == "unreachable" for i in items)
                   for items in self.by_host.values())

    def streaming_since(self, n: dict[str, int]) -> bool:
        """Every host back: no outage, and a sample after its item ``n[host]``."""
        return all(self.fleet.hosts[h].reach.outage is None and any(
            isinstance(i, HostSample) for i in items[n[h]:]) for h, items in self.by_host.items())

    def marks(self) -> dict[str, int]:
        return {h: len(items) for h, items in self.by_host.items()}


async def test_a_fleet_down_pages_once_and_streams_again_within_10_s_of_its_sshd_returning(
        sshd: tuple[Sshd, Path, Path]) -> None:
    server, key, known = sshd
    w = Watch(*(spec_for(server, key, known, f"n{i}") for i in (1, 2, 3)))
    alerts = AlertTracker()
    w.start()
    try:
        await wait_for(lambda: all(h.last is not None for h in w.fleet.hosts.values()), 15,
                       "every host's first sample")
        assert alerts.update(all_findings(w.fleet), time.time(), hosts=3) == []
        server.stop()
        kill_agents()
        await wait_for(w.refused, 8, "a refused reconnect on every host")
        [f] = [f for f in w.host.findings() if f.severity is Severity.CRITICAL]
        assert f.code == Code.HOST_UNREACHABLE
        assert f.summary == f"DOWN · connection refused by 127.0.0.1:{server.port} " \
            "(sshd down or port closed)"
        row = w.fleet.rows(time.time())[0]
        assert row.next_retry_s is not None and row.last_seen_s is not None
        [page] = alerts.update(all_findings(w.fleet), time.time(), hosts=3)
        assert (page.finding.host, page.finding.summary) == ("fleet", "3 of 3 hosts down")
        server.start()
        n = w.marks()
        taken = await wait_for(lambda: w.streaming_since(n), BACK_WITHIN_S, "streaming again")
        assert taken < BACK_WITHIN_S
        waits = [i.retry_in_s for i in w.items if isinstance(i, Disconnected)]
        assert waits and all(d is not None and d <= 5.0 * 1.2 for d in waits), waits
        print(f"3 hosts back {taken:.1f} s after sshd returned; waits {waits}")
        assert not [f for f in all_findings(w.fleet) if f.severity is Severity.CRITICAL]
        [back] = alerts.update(all_findings(w.fleet), time.time(), hosts=3)
        assert (back.event, back.finding.host, back.finding.extra["recovers"]) == (
            "recovery", "fleet", Code.FLEET_DOWN)
        assert alerts.update(all_findings(w.fleet), time.time(), hosts=3) == []
    finally:
        await w.stop()
        if server.proc is None:
            server.start()


async def test_retry_now_cuts_a_30_s_wait(sshd: tuple[Sshd, Path, Path]) -> None:
    server, key, known = sshd
    policy = SessionPolicy(backoff_base_s=30.0, backoff_cap_s=30.0, healthy_cap_s=30.0,
                           jitter=0.0)
    w = Watch(spec_for(server, key, known), policy=policy)
    w.start()
    try:
        await wait_for(lambda: w.host.last is not None, 15, "the first sample")
        assert not w.backend.retry_now("n1")  # streaming: nothing to cut
        kill_agents()
        await wait_for(lambda: w.host.reach.outage is not None, 5, "the drop")
        assert w.host.reach.outage is not None and w.host.reach.outage.retry_at is not None
        assert w.host.reach.outage.retry_at - time.time() > 25.0
        n = w.marks()
        assert w.backend.retry_now("n1")
        taken = await wait_for(lambda: w.streaming_since(n), 5, "streaming again")
        assert taken < 5.0
    finally:
        await w.stop()
