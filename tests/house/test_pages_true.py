"""Pages that are true (faults review S2, S4), in the console, against a real sshd.

S2: h04 came back, went silent 47 s later and was down 48 s: the second outage paged
nothing (one alert key per host, cleared only ``clear_after_s`` after the last sighting).
S4: a host flapping 5 s up / 5 s down paged once for 12 outages and nothing said
"flapping".  Now every outage pages, its end is sent to the hook and recorded as a
recovery, and a host whose outages keep coming gets one ``flapping`` page with the count.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.analysis.alerts import AlertPolicy, AlertTracker
from probes.analysis.findings import Finding
from probes.analysis.reachability import DOWN_CODES
from probes.analysis.watcher import FLAP_MIN, flapping_finding
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState
from probes.sources.agents import AgentFleetBackend
from probes.sources.recording import RecordingBackend
from probes.store.recording import Recorder, RecordingReader
from probes.triage import Code, Severity
from probes.wire.events import Disconnected
from tests.e2e.test_retry_sshd import kill_agents, spec_for
from tests.support.sshd import SSHD, Sshd, keygen, make_sshd
from tests.support.tui_fakes import wait_until
from tui.app import make_app
from tui.console_options import ConsoleOptions

DOWN = tuple(DOWN_CODES)  # killed agents (agent-failed), a broken stream, a refusal
HOOK = """
import json, os, sys
doc = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"event": os.environ["RIGWATCH_EVENT"], "code": doc["code"],
                        "host": doc["host"], "recovers": doc["recovers"],
                        "count": doc["count"], "summary": doc["summary"]}) + "\\n")
"""


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sshd, Path, Path]]:
    if not os.access(SSHD, os.X_OK):
        pytest.fail("openssh-server is not installed (.ci/run installs it)")
    root = tmp_path_factory.mktemp("pages")
    key = root / "client_ed25519"
    keygen(key)
    known = root / "known_hosts"
    server = make_sshd(root / "sshd", key, known)
    yield server, key, known
    if server.proc is not None:
        server.stop()


def _paged(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


async def test_every_outage_pages_its_end_is_sent_and_a_flapping_host_pages_once(
        sshd: tuple[Sshd, Path, Path], tmp_path: Path) -> None:
    server, key, known = sshd
    log = tmp_path / "hook.log"
    (tmp_path / "hook.py").write_text(HOOK)
    spec = spec_for(server, key, known, "h04")
    recorder = Recorder(tmp_path / "rec.sqlite3", "pages", [spec.name])
    backend = RecordingBackend(AgentFleetBackend([spec]), recorder)
    policy = AlertPolicy(notify=False, bell=False, min_severity=Severity.CRITICAL,
                         clear_after_s=120.0,
                         hook=(sys.executable, str(tmp_path / "hook.py"), str(log)))
    app = make_app(backend, ConsoleOptions(demo=False, alerts=policy))
    host = app.fleet.hosts["h04"]

    async def outage(pilot: object) -> None:
        server.stop()
        kill_agents()
        await wait_until(pilot, lambda: host.reach.outage is not None, 10.0)  # type: ignore[arg-type]

    async def back(pilot: object) -> None:
        server.start()
        await wait_until(pilot, lambda: host.reach.outage is None and host.last is not None,  # type: ignore[arg-type]
                         15.0)

    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_until(pilot, lambda: host.last is not None, 20.0)
            await outage(pilot)  # the first outage pages
            await wait_until(pilot, lambda: len(_paged(log)) == 1, 5.0)
            await back(pilot)  # its end is sent to the hook
            await wait_until(pilot, lambda: len(_paged(log)) == 2, 5.0)
            started = time.monotonic()
            await outage(pilot)  # S2: well inside clear_after_s, and it pages again
            assert time.monotonic() - started < policy.clear_after_s
            await wait_until(pilot, lambda: len(_paged(log)) == 3, 5.0)
            await back(pilot)
            await wait_until(pilot, lambda: len(_paged(log)) == 4, 5.0)
            for _ in range(2):  # S4: the third outage makes it flapping; the fourth is counted
                await outage(pilot)
                await back(pilot)
            await wait_until(pilot, lambda: any(
                f.code == Code.HOST_FLAPPING and f.count == FLAP_MIN + 1
                for f in host.findings()), 5.0)
            await pilot.pause(2.0)  # two alert ticks: nothing more is paged
            await app.action_quit()
    finally:
        if server.proc is None:
            server.start()
    # the stream broke (host-down), or the reconnect was refused first (host-unreachable)
    paged = [(p["event"], "outage" if p["code"] in DOWN else p["code"]) for p in _paged(log)]
    assert paged == [("alert", "outage"), ("recovery", "recovered"),
                     ("alert", "outage"), ("recovery", "recovered"),
                     ("alert", "flapping")], paged
    recovery = _paged(log)[1]
    assert recovery["recovers"] in DOWN
    assert str(recovery["summary"]).startswith("RECOVERED · ")
    assert " over after " in str(recovery["summary"])
    # every page and recovery is in the recording, for a replay's < and >
    with RecordingReader(tmp_path / "rec.sqlite3") as reader:
        marks = [item.code for _, _, item in reader.items() if isinstance(item, Finding)]
    # (a mark is stored at its finding's onset: flapping's is its first outage's)
    assert sorted("outage" if m in DOWN else m for m in marks) == [
        "flapping", "outage", "outage", "recovered", "recovered"], marks


# -- the same rules on folded items, without a network --------------------------------

def _fleet() -> FleetState:
    from tests.support.builders import sample_of_8
    fleet = FleetState([HostSpec("h")])
    fleet.apply("h", sample_of_8(0.0), now=0.0)
    return fleet


def _cycle(fleet: FleetState, t: float, down_s: float, tracker: AlertTracker,
           pages: list[tuple[str, str]]) -> float:
    from tests.support.builders import sample_of_8
    fleet.apply("h", Disconnected(t, "connection refused by 127.0.0.1:22 (sshd down or port "
                                  "closed)", 1.0, None, DisconnectKind.UNREACHABLE), now=t)
    pages += [(a.event, a.finding.code) for a in tracker.update(fleet.all_findings(), t + 1, 1)]
    t += down_s
    fleet.apply("h", sample_of_8(t), now=t)
    pages += [(a.event, a.finding.code) for a in tracker.update(fleet.all_findings(), t + 1, 1)]
    return t + down_s


def test_twelve_flaps_are_two_outages_then_one_flapping_page_with_the_count() -> None:
    fleet, tracker, pages = _fleet(), AlertTracker(), []
    t = 10.0
    for _ in range(12):  # 5 s down, 5 s up
        t = _cycle(fleet, t, 5.0, tracker, pages)
    assert pages == [("alert", "host-unreachable"), ("recovery", "recovered"),
                     ("alert", "host-unreachable"), ("recovery", "recovered"),
                     ("alert", "flapping")]
    [flap] = [f for f in fleet.hosts["h"].findings() if f.code == Code.HOST_FLAPPING]
    assert flap.count == 12 and "12 outages in" in flap.summary and flap.action
    # it holds for the window: the flapping ends, and that is a recovery too
    from tests.support.builders import sample_of_8
    later = t + 700.0
    fleet.apply("h", sample_of_8(later), now=later)
    assert [(a.event, a.finding.extra.get("recovers")) for a in
            tracker.update(fleet.all_findings(), later, 1)] == [("recovery", "flapping")]


def test_two_outages_are_not_flapping_and_old_ones_leave_the_window() -> None:
    assert flapping_finding("h", [0.0, 10.0], 20.0) is None
    assert flapping_finding("h", [0.0, 10.0, 20.0], 30.0) is not None
    assert flapping_finding("h", [0.0, 10.0, 20.0], 700.0) is None  # 0.0 left the window


def test_a_refused_ssh_port_says_sshd_is_down_on_a_host_that_answers() -> None:
    from probes.analysis.reachability import Outage, down_finding
    refused = down_finding("h", Outage(1.0, DisconnectKind.UNREACHABLE,
                                       "connection refused by 127.0.0.1:22 (sshd down or port "
                                       "closed)"))
    assert refused.action is not None and refused.action.startswith(
        "The host answers but refuses SSH on its port: sshd is down")
    silent = down_finding("h", Outage(1.0, DisconnectKind.UNREACHABLE,
                                      "no answer from 10.0.0.9:22 within 5 s"))
    assert silent.action is not None and "power and BMC" in silent.action
