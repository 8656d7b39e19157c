"""Down is a finding: unreachable, refused, failed and stale hosts, and GPUs never reported."""

from __future__ import annotations

from pathlib import Path

from probes.analysis.incident import first_failure
from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState, HostStatus
from probes.triage import Code, Severity, Step
from probes.wire.events import Connected, Disconnected
from tests.support.builders import gpu, hello, sample

REFUSED = "connection refused by 127.0.0.1:22209 (sshd down or port closed)"
CHANGED = ("host key changed for [127.0.0.1]:22202 (REMOTE HOST IDENTIFICATION HAS CHANGED): "
           "the key it offers is not the one in /h/.ssh/known_hosts (line 3); someone may be "
           "intercepting, or the host was reinstalled. Refused. If the change is expected: "
           "ssh-keygen -R '[127.0.0.1]:22202' -f /h/.ssh/known_hosts")


def down(ts: float, kind: DisconnectKind = DisconnectKind.UNREACHABLE, reason: str = REFUSED,
         retry: float | None = 4.0) -> Disconnected:
    return Disconnected(ts, reason, retry, None, kind)


def streaming_fleet(*names: str, expect: int | None = 8) -> FleetState:
    fleet = FleetState([HostSpec(n, interval_s=1.0, expect_gpus=expect) for n in names])
    for n in names:
        fleet.apply(n, Connected(1.0), now=1.0)
        fleet.apply(n, hello(), now=1.0)
        fleet.apply(n, sample(tuple(gpu(i) for i in range(8)), ts=2.0), now=2.0)
    return fleet


def test_an_unreachable_host_is_one_critical_gpu_step_finding_led_by_its_verdict() -> None:
    fleet = streaming_fleet("a", "b")
    fleet.apply("a", down(10.0), now=10.0)
    fleet.apply("b", sample(tuple(gpu(i) for i in range(8)), ts=10.5), now=10.5)
    [f] = [f for f in fleet.hosts["a"].findings() if f.code == Code.HOST_UNREACHABLE]
    assert f.severity is Severity.CRITICAL and f.step is Step.GPU and f.ts == 10.0
    assert f.summary == f"DOWN · {REFUSED}" and f.evidence == REFUSED
    assert f.action is not None and "ping" in f.action and "ssh -v" in f.action
    row_a, row_b = fleet.rows(11.0)
    assert row_a.worst is Severity.CRITICAL and row_a.by_severity[0] >= 1
    assert row_a.headline == f"DOWN · {REFUSED}" and row_a.reason == REFUSED
    assert row_b.worst is None and row_b.headline is None and row_b.reason is None


def test_the_onset_holds_across_retries_and_resets_when_the_host_streams_again() -> None:
    fleet = streaming_fleet("a")
    host = fleet.hosts["a"]
    fleet.apply("a", down(10.0, DisconnectKind.DOWN, "agent exited with status 0"), now=10.0)
    for t in (12.0, 16.0, 21.0):  # each retry: connect, fail again (the kind may change)
        fleet.apply("a", Connected(t), now=t)
        assert host.status is HostStatus.CONNECTING
        [f] = [f for f in host.findings() if f.severity is Severity.CRITICAL]
        assert f.ts == 10.0  # still down while it tries: no gap for an alert to re-fire
        fleet.apply("a", down(t + 0.5), now=t + 0.5)
    [f] = [f for f in host.findings() if f.severity is Severity.CRITICAL]
    assert f.code == Code.HOST_UNREACHABLE and f.ts == 10.0
    fleet.apply("a", Connected(30.0), now=30.0)
    fleet.apply("a", hello(), now=30.0)
    assert host.reach.outage is None and host.findings() == []
    fleet.apply("a", down(40.0), now=40.0)
    assert [f.ts for f in host.findings()] == [40.0]


def test_row_counts_down_the_next_retry_and_ages_the_last_data() -> None:
    fleet = streaming_fleet("a")
    fleet.apply("a", down(10.0, retry=4.0), now=10.0)
    row = fleet.rows(11.5)[0]
    assert row.status is HostStatus.UNREACHABLE
    assert row.next_retry_s == 2.5 and row.last_seen_s == 9.5  # data last came at 2.0
    assert fleet.rows(20.0)[0].next_retry_s == 0.0
    fleet.apply("a", Connected(14.0), now=14.0)
    assert fleet.rows(14.0)[0].next_retry_s is None  # trying now
    fleet.apply("a", hello(), now=14.2)
    fleet.apply("a", sample(tuple(gpu(i) for i in range(8)), ts=14.5), now=14.5)
    row = fleet.rows(15.0)[0]
    assert (row.next_retry_s, row.last_seen_s, row.reason) == (None, None, None)


def test_each_kind_has_its_own_code_and_action() -> None:
    cases = [(DisconnectKind.AUTH_FAILED, "root@h:22: permission denied (publickey)",
              Code.HOST_AUTH_FAILED, "ssh -i"),
             (DisconnectKind.HOST_KEY_REFUSED, CHANGED, Code.HOST_KEY_CHANGED, "out of band"),
             (DisconnectKind.HOST_KEY_REFUSED, "no host key for h in /k. Verify it",
              Code.HOST_KEY_REFUSED, "known_hosts"),
             (DisconnectKind.AGENT_FAILED, "agent exited with status 127: python3: not found",
              Code.AGENT_FAILED, "python3 >= 3.8"),
             (DisconnectKind.STALLED, "no data for 15 s", Code.HOST_DOWN, "uptime")]
    for kind, reason, code, hint in cases:
        fleet = FleetState([HostSpec("a")])
        fleet.apply("a", down(5.0, kind, reason), now=5.0)
        [f] = fleet.hosts["a"].findings()
        assert (f.code, f.severity, f.evidence) == (code, Severity.CRITICAL, reason), kind
        assert f.action is not None and hint in f.action, (kind, f.action)
    fleet = FleetState([HostSpec("a")])
    fleet.apply("a", down(5.0, DisconnectKind.HOST_KEY_REFUSED, CHANGED), now=5.0)
    assert fleet.rows(5.0)[0].headline == \
        "HOST KEY CHANGED · possible interception (or a reinstall): refused"


def test_a_silent_host_is_a_stale_warning_from_its_last_data_and_down_keeps_that_onset() -> None:
    fleet = streaming_fleet("a")
    host = fleet.hosts["a"]
    assert fleet.rows(4.0)[0].status is HostStatus.STREAMING and host.findings() == []
    fleet.tick(9.0)  # 7 s silent, the limit is 5 s: judged stale (the app's tick)
    row = fleet.rows(9.0)[0]
    assert row.status is HostStatus.STALE and row.last_seen_s == 7.0
    assert row.reason is not None and row.reason.startswith("no data for 7 s")
    [f] = host.findings()
    assert (f.code, f.severity, f.ts) == (Code.HOST_STALE, Severity.WARNING, 2.0)
    assert row.headline is not None and row.headline.startswith("STALE · ")
    fleet.apply("a", down(17.0, DisconnectKind.STALLED, "no data for 15 s"), now=17.0)
    [f] = host.findings()
    assert (f.code, f.ts) == (Code.HOST_DOWN, 2.0)  # it stopped streaming at 2.0, not 17.0


def test_zero_of_eight_gpus_is_critical_with_the_driver_hint_from_the_first_sample() -> None:
    fleet = FleetState([HostSpec("x-real", expect_gpus=8)])
    fleet.apply("x-real", hello(0), now=1.0)
    fleet.apply("x-real", sample((), ts=50.0), now=1.0)
    fleet.apply("x-real", sample((), ts=51.0), now=2.0)
    [f] = fleet.hosts["x-real"].findings()
    assert (f.code, f.severity, f.step, f.ts) == (Code.GPU_COUNT_SHORT, Severity.CRITICAL,
                                                  Step.GPU, 50.0)
    assert f.summary.startswith("0/8 GPUs · driver not loaded?")
    assert f.action is not None and all(s in f.action for s in (
        "nvidia-smi", "lsmod | grep nvidia", "dkms status", "dmesg | grep -i nvrm"))
    row = fleet.rows(2.0)[0]
    assert row.worst is Severity.CRITICAL and row.headline is not None
    assert row.headline.startswith("0/8 GPUs · driver not loaded?")


def test_seven_of_eight_from_the_start_is_critical_without_expect_gpus_it_is_nothing() -> None:
    for expect, want in ((8, ["7/8 GPUs · 1 never reported"]), (None, [])):
        fleet = FleetState([HostSpec("h", expect_gpus=expect)])
        fleet.apply("h", hello(7), now=1.0)
        fleet.apply("h", sample(tuple(gpu(i) for i in range(7))), now=2.0)
        got = [f.summary.split(" (")[0] for f in fleet.hosts["h"].findings()]
        assert got == want


def test_a_gpu_lost_after_the_start_is_gpu_lost_not_also_a_count_shortfall() -> None:
    fleet = FleetState([HostSpec("h", expect_gpus=8)])
    fleet.apply("h", hello(8), now=1.0)
    fleet.apply("h", sample(tuple(gpu(i) for i in range(8) if i != 6)), now=2.0)
    codes = {(f.code, f.gpu) for f in fleet.hosts["h"].findings()}
    assert ("gpu-lost", 6) in codes and all(c != Code.GPU_COUNT_SHORT for c, _ in codes)


def test_first_failure_names_the_one_unreachable_host() -> None:
    fleet = streaming_fleet("gpu-a01", "gpu-a02", "x-down")
    fleet.apply("x-down", down(30.0), now=30.0)
    found = [f for h in fleet.hosts.values() for f in h.findings()]
    ff = first_failure(found)
    assert ff is not None and ff.is_failure
    assert (ff.finding.host, ff.finding.code) == ("x-down", Code.HOST_UNREACHABLE)


def test_down_leads_the_host_even_beside_an_older_critical_finding() -> None:
    fleet = streaming_fleet("a")
    fleet.apply("a", sample(tuple(gpu(i) for i in range(8) if i != 6), ts=3.0), now=3.0)
    fleet.apply("a", down(10.0), now=10.0)
    found = fleet.hosts["a"].findings()
    assert found[0].code == Code.HOST_UNREACHABLE and any(f.code == "gpu-lost" for f in found)
    row = fleet.rows(10.0)[0]
    assert row.headline is not None and row.headline.startswith("DOWN · ")


async def test_in_the_console_the_hook_fires_once_for_the_down_host_and_it_is_the_first_failure(
        tmp_path: Path) -> None:
    from probes.analysis.alerts import AlertPolicy
    from tests.support import tui_fakes as fakes
    from tui.app import make_app
    from tui.console_options import ConsoleOptions

    out = tmp_path / "paged"
    hook = ("sh", "-c", f'echo "$RIGWATCH_HOST $RIGWATCH_CODE $RIGWATCH_SEVERITY" >> {out}')
    specs = [HostSpec("gpu-t01", expect_gpus=8), HostSpec("x-down", expect_gpus=8)]
    items = [(h, i) for h, i in fakes.fleet_items() if h == "gpu-t01"]
    items.append(("x-down", down(fakes.T0 + 5.0)))
    backend = fakes.FakeBackend(specs, items)
    clock = fakes.FrozenClock()
    app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(hook=hook, bell=False)),
                   clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await backend.started.wait()
        await fakes.wait_until(pilot, lambda: out.exists() and "x-down" in out.read_text())
        for k in range(6):  # six retries a minute apart, the healthy host still streaming
            clock.now += 60.0
            backend.push("gpu-t01", fakes.sample("gpu-t01", 100 + k))
            backend.push("x-down", Connected(clock.now))
            backend.push("x-down", down(clock.now + 0.5))
            await pilot.pause()
            app.check_alerts()
        await pilot.pause(0.3)
        found = [f for h in app.fleet.hosts.values() for f in h.findings()]
        ff = first_failure(found)
        outage = app.fleet.hosts["x-down"].reach.outage
        assert outage is not None and outage.retry_at == clock.now + 4.0  # the last retry
    assert out.read_text().splitlines() == ["x-down host-unreachable critical"]
    assert ff is not None and (ff.finding.host, ff.finding.ts) == ("x-down", fakes.T0 + 5.0)


def test_the_transport_s_own_refusals_are_told_apart(tmp_path: Path) -> None:
    """The reasons ``known_hosts.refusal`` writes: changed (possible interception), revoked,
    unknown; only a changed key reads as interception."""
    import asyncssh

    from probes.analysis.reachability import Outage, down_finding
    from probes.transport.known_hosts import lookup, refusal

    key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[10.0.0.7]:2222 {key}\n")
    changed = refusal(lookup(known, "10.0.0.7", 2222), 2222, "10.0.0.7")
    revoked_file = tmp_path / "revoked"
    revoked_file.write_text(f"@revoked [10.0.0.7]:2222 {key}\n")
    revoked = refusal(lookup(revoked_file, "10.0.0.7", 2222), 2222, "10.0.0.7",
                      "Host key is revoked")
    unknown = refusal(lookup(tmp_path / "none", "10.0.0.7", 2222), 2222, "10.0.0.7")
    got = [down_finding("h", Outage(1.0, DisconnectKind.HOST_KEY_REFUSED, r))
           for r in (changed, revoked, unknown)]
    assert [f.code for f in got] == [Code.HOST_KEY_CHANGED, Code.HOST_KEY_REFUSED,
                                     Code.HOST_KEY_REFUSED]
    assert got[0].summary.startswith("HOST KEY CHANGED · possible interception")
    assert got[0].evidence == changed and "ssh-keygen -R" in changed  # the fix is kept whole
    assert got[1].summary.startswith("HOST KEY REVOKED · ")
    assert got[2].summary.startswith("HOST KEY REFUSED · no host key for [10.0.0.7]:2222")


def test_a_gpu_gone_across_an_agent_restart_is_counted_from_the_new_hello() -> None:
    fleet = streaming_fleet("a")
    fleet.apply("a", down(10.0, DisconnectKind.DOWN, "agent exited with status 0"), now=10.0)
    fleet.apply("a", Connected(12.0), now=12.0)
    fleet.apply("a", hello(7), now=12.0)  # the host came back listing seven GPUs
    fleet.apply("a", sample(tuple(gpu(i) for i in range(7)), ts=13.0), now=13.0)
    [f] = [f for f in fleet.hosts["a"].findings() if f.severity is Severity.CRITICAL]
    assert (f.code, f.ts) == (Code.GPU_COUNT_SHORT, 13.0) and f.summary.startswith("7/8 GPUs")
