"""Alerts: once per appearance with hysteresis, and a hook run without a shell."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from probes.analysis.alerts import Alert, AlertPolicy, AlertTracker
from probes.analysis.findings import Finding
from probes.analysis.hook import run_hook
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState
from probes.triage import Code, Severity, Step
from probes.wire.events import Connected, Disconnected
from tests.support.builders import sample_of_8


def hot(host: str = "gpu017", gpu: int = 3, sev: Severity = Severity.WARNING) -> Finding:
    return Finding(Step.GPU, "temp-near-slowdown", sev, "GPU3 at 88 °C (slowdown 90 °C)", host,
                   gpu=gpu, ts=100.0, action="check airflow")


def test_a_finding_alerts_once_while_it_stays() -> None:
    t = AlertTracker()
    assert [a.finding.host for a in t.update([hot()], 0.0)] == ["gpu017"]
    for s in range(1, 50):
        assert t.update([hot()], float(s)) == []
    assert t.active == 1


def test_a_flapping_finding_does_not_spam() -> None:
    t = AlertTracker(AlertPolicy(clear_after_s=120.0))
    raised = 0
    for s in range(0, 600, 10):
        present = (s // 10) % 2 == 0  # there, gone, there, gone … every 10 s
        raised += len(t.update([hot()] if present else [], float(s)))
    assert raised == 1
    # gone for longer than clear_after_s: it clears, and a return alerts again
    assert t.update([], 800.0) == []
    assert t.active == 0
    assert len(t.update([hot()], 801.0)) == 1


def test_severity_floor_and_distinct_incidents() -> None:
    t = AlertTracker(AlertPolicy(min_severity=Severity.WARNING))
    info = hot(sev=Severity.INFO)
    assert t.update([info], 0.0) == []
    got = t.update([hot(gpu=1), hot(gpu=2), hot(host="gpu018", gpu=1)], 1.0)
    assert len(got) == 3


def test_the_hook_gets_json_on_stdin_and_environment(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, os, sys\n"
        "doc = json.load(sys.stdin)\n"
        "doc['env'] = {k: v for k, v in os.environ.items() if k.startswith('RIGWATCH_')}\n"
        f"open({str(out)!r}, 'w').write(json.dumps(doc))\n"
        "print('paged')\n")
    # a summary with shell metacharacters reaches the hook as data, never as a command
    f = Finding(Step.SYSLOG, "xid", Severity.CRITICAL, "Xid 79; rm -rf / $(reboot) `id`",
                "gpu017", gpu=3, xid=79, ts=5.0)
    result = asyncio.run(run_hook([sys.executable, str(script)], Alert(f, 9.0), 10.0))
    assert result.ok and result.output == "paged"
    doc = json.loads(out.read_text())
    assert doc["code"] == "xid" and doc["xid"] == 79 and doc["summary"] == f.summary
    assert doc["env"]["RIGWATCH_SUMMARY"] == f.summary
    assert doc["env"]["RIGWATCH_GPU"] == "3" and doc["env"]["RIGWATCH_SEVERITY"] == "critical"


def test_a_hung_missing_or_failing_hook_is_reported_not_raised(tmp_path: Path) -> None:
    alert = Alert(hot(), 0.0)
    hung = asyncio.run(run_hook([sys.executable, "-c", "import time; time.sleep(30)"],
                                alert, 0.5))
    assert hung.returncode is None and "did not finish within 0.5 s" in (hung.error or "")
    missing = asyncio.run(run_hook([str(tmp_path / "nope")], alert, 5.0))
    assert missing.returncode is None and "cannot run" in (missing.error or "")
    failing = asyncio.run(run_hook([sys.executable, "-c", "import sys; sys.exit(3)"],
                                   alert, 5.0))
    assert failing.returncode == 3 and not failing.ok


def _down_fleet(n: int, down: int, kind: DisconnectKind = DisconnectKind.UNREACHABLE,
                reason: str = "connection refused by 127.0.0.1:22209 (sshd down or port closed)"
                ) -> FleetState:
    from tests.analysis.test_reachability import down as drop
    from tests.analysis.test_reachability import streaming_fleet
    fleet = streaming_fleet(*(f"h{i}" for i in range(n)))
    for i in range(down):
        fleet.apply(f"h{i}", drop(10.0 + i * 0.1, kind, reason), now=10.0 + i * 0.1)
    return fleet


def _all(fleet: FleetState, now: float) -> list[Finding]:
    fleet.tick(now)  # judges staleness, as the app does before alerts are checked
    return [f for h in fleet.hosts.values() for f in h.findings()]


def _keep_fresh(fleet: FleetState, now: float) -> None:
    """Hosts still streaming send a sample: only the down ones are down."""
    for name, h in fleet.hosts.items():
        if h.reach.outage is None:
            fleet.apply(name, sample_of_8(now), now=now)


def test_a_down_host_alerts_once_per_outage_through_every_retry_and_kind() -> None:
    fleet = _down_fleet(3, 1)
    t = AlertTracker()
    _keep_fresh(fleet, 10.5)
    [a] = t.update(_all(fleet, 10.5), 10.5, hosts=3)
    assert (a.finding.host, a.finding.code, a.finding.ts) == ("h0", Code.HOST_UNREACHABLE, 10.0)
    assert str(a.to_json()["summary"]).startswith("DOWN · connection refused")
    raised = []
    for k, now in enumerate(range(20, 620, 30)):  # ten minutes of retries, 60 s apart
        _keep_fresh(fleet, float(now))
        if k % 2 == 0:
            fleet.apply("h0", Connected(float(now)), now=float(now))
        else:
            kind = DisconnectKind.DOWN if k % 4 == 1 else DisconnectKind.UNREACHABLE
            fleet.apply("h0", Disconnected(float(now), "it broke", 60.0, None, kind),
                        now=float(now))
        raised += t.update(_all(fleet, float(now)), float(now), hosts=3)
    assert raised == []
    # back, then down again later: the end is a recovery, and a new outage a new alert
    fleet.apply("h0", sample_of_8(700.0), now=700.0)
    _keep_fresh(fleet, 900.0)
    [back] = t.update(_all(fleet, 900.0), 900.0, hosts=3)
    assert (back.event, back.finding.host, back.finding.code) == ("recovery", "h0",
                                                                  Code.RECOVERED)
    assert back.to_json()["recovers"] == Code.HOST_UNREACHABLE
    fleet.apply("h0", Disconnected(901.0, "gone", 1.0, None, DisconnectKind.DOWN), now=901.0)
    _keep_fresh(fleet, 901.0)
    assert [a.finding.code for a in t.update(_all(fleet, 901.0), 901.0, hosts=3)] == \
        [Code.HOST_DOWN]


def test_a_changed_host_key_alerts_once_as_possible_interception() -> None:
    from tests.analysis.test_reachability import CHANGED
    fleet = _down_fleet(2, 1, DisconnectKind.HOST_KEY_REFUSED, CHANGED)
    t = AlertTracker()
    _keep_fresh(fleet, 11.0)
    [a] = t.update(_all(fleet, 11.0), 11.0, hosts=2)
    assert a.finding.code == Code.HOST_KEY_CHANGED and "possible interception" in a.finding.summary
    assert a.environment()["RIGWATCH_SEVERITY"] == "critical"
    for now in (70.0, 71.0, 131.0, 132.0, 400.0):  # refused keys retry at the backoff cap
        fleet.apply("h0", Connected(now), now=now)
        fleet.apply("h0", Disconnected(now + 0.2, CHANGED, 60.0, None,
                                       DisconnectKind.HOST_KEY_REFUSED), now=now + 0.2)
        _keep_fresh(fleet, now + 0.2)
        assert t.update(_all(fleet, now + 0.2), now + 0.2, hosts=2) == []


def test_a_whole_fleet_down_in_one_update_is_one_grouped_alert() -> None:
    fleet = _down_fleet(9, 9)
    t = AlertTracker()
    got = t.update(_all(fleet, 11.0), 11.0, hosts=9)
    assert [(a.finding.host, a.finding.summary, a.finding.severity) for a in got] == [
        ("fleet", "9 of 9 hosts down", Severity.CRITICAL)]
    f = got[0].finding
    assert f.ts == 10.0 and f.evidence is not None and "h0" in f.evidence and "h8" in f.evidence
    assert got[0].to_json()["host"] == "fleet"
    # nothing more while it lasts, and no host pages on its own on the next retries
    for now in (20.0, 60.0, 100.0):
        assert t.update(_all(fleet, now), now, hosts=9) == []


def test_a_few_hosts_down_alert_one_by_one_and_the_share_is_configurable() -> None:
    fleet = _down_fleet(9, 3)
    _keep_fresh(fleet, 11.0)
    got = AlertTracker().update(_all(fleet, 11.0), 11.0, hosts=9)
    assert sorted(a.finding.host for a in got) == ["h0", "h1", "h2"]
    half = AlertTracker(AlertPolicy(group_share=0.3))
    assert [a.finding.summary for a in half.update(_all(fleet, 11.0), 11.0, hosts=9)] == [
        "3 of 9 hosts down"]
    whole = _down_fleet(4, 4)  # the app must say how big the fleet is, or nothing groups
    assert len(AlertTracker().update(_all(whole, 11.0), 11.0)) == 4
    one = _down_fleet(1, 1)  # a fleet of one is never "grouped"
    assert [a.finding.host for a in AlertTracker().update(_all(one, 11.0), 11.0, hosts=1)] == \
        ["h0"]


def test_a_changed_key_still_alerts_on_its_own_inside_a_fleet_outage() -> None:
    from tests.analysis.test_reachability import CHANGED
    fleet = _down_fleet(3, 3)
    fleet.apply("h2", Disconnected(10.5, CHANGED, 60.0, None, DisconnectKind.HOST_KEY_REFUSED),
                now=10.5)
    got = AlertTracker().update(_all(fleet, 11.0), 11.0, hosts=3)
    assert sorted((a.finding.host, a.finding.code) for a in got) == [
        ("fleet", Code.FLEET_DOWN), ("h2", Code.HOST_KEY_CHANGED)]
    assert {a.finding.summary for a in got if a.finding.host == "fleet"} == {"3 of 3 hosts down"}


def test_a_stale_host_warns_once() -> None:
    fleet = _down_fleet(2, 0)
    t = AlertTracker()
    fleet.apply("h1", sample_of_8(20.0), now=20.0)
    got = t.update(_all(fleet, 20.0), 20.0, hosts=2)
    assert [(a.finding.host, a.finding.code, a.finding.ts) for a in got] == [
        ("h0", Code.HOST_STALE, 2.0)]
    assert t.update(_all(fleet, 21.0), 21.0, hosts=2) == []
