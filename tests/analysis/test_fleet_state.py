"""The console's fleet model and first-cut findings, fed typed items."""

from __future__ import annotations

from probes.analysis.findings import Severity, Step, sample_findings
from probes.analysis.incident import first_failure
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState, HostState, HostStatus
from probes.history import gpu_key
from probes.wire.events import Connected, Disconnected
from probes.wire.samples import (
    DiskStats,
    GpuSample,
    GpuState,
    LogEvent,
    LogSourceState,
    LogSourceStatus,
)
from tests.support.builders import gpu, hello, sample


def codes(findings: list) -> set[tuple[str, str]]:
    return {(f.step.value, f.code) for f in findings}


def test_healthy_host_has_no_findings() -> None:
    assert sample_findings("h", hello(), sample(tuple(gpu(i) for i in range(8)))) == []


def test_missing_gpu_is_lost_and_stays_lost() -> None:
    fleet = FleetState([HostSpec("h", expect_gpus=8)])
    fleet.apply("h", hello(), now=1.0)
    fleet.apply("h", sample(tuple(gpu(i) for i in range(8) if i != 6)), now=2.0)
    host = fleet.hosts["h"]
    lost = [f for f in host.findings() if f.code == "gpu-lost"]
    assert [(f.gpu, f.severity) for f in lost] == [(6, Severity.CRITICAL)]
    fleet.apply("h", sample(tuple(gpu(i) for i in range(8))), now=3.0)
    assert any(f.code == "gpu-lost" for f in host.findings())
    row = fleet.rows(now=3.0)[0]
    assert row.worst is Severity.CRITICAL and row.gpus_ok == 8 and row.gpus_expected == 8


def test_throttle_link_and_disk_findings() -> None:
    gpus = (gpu(0, clock_reasons=("sw_thermal_slowdown",), sm_clock_mhz=1400.0),
            gpu(1, pcie_width=8),
            gpu(2, util_pct=0.0, clock_reasons=("gpu_idle", "sw_power_cap"), pcie_gen=1),
            gpu(3, clock_reasons=("sw_power_cap",)))
    disks = (DiskStats("nvme0n1", util=99.5, aqu_sz=30.0), DiskStats("sda", util=3.0))
    found = sample_findings("h", None, sample(gpus, disks=disks))
    assert {(f.code, f.gpu) for f in found} == {
        ("clocks-throttled", 0), ("pcie-link-downgraded", 1), ("clocks-throttled", 3),
        ("disk-saturated", None)}
    assert all(f.step is Step.GPU for f in found)


def _events(*lines: tuple[str, str], ts: float = 1.0) -> FleetState:
    fleet = FleetState([HostSpec("h")])
    fleet.apply("h", hello(), now=0.0)
    for source, line in lines:
        fleet.apply("h", LogEvent(ts, source, line), now=ts)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    return fleet


def test_live_log_lines_go_through_the_explain_rules() -> None:
    fleet = _events(("kernel", "NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', "
                               "name=<unknown>, GPU has fallen off the bus."),
                    ("kernel", "NVRM: GPU 0000:05:00.0: GPU has fallen off the bus."))
    found = fleet.hosts["h"].findings()
    xid = next(f for f in found if f.code == "xid")
    assert (xid.step, xid.xid, xid.severity, xid.gpu) == (Step.SYSLOG, 79, Severity.CRITICAL, 5)
    assert xid.source == "kernel" and xid.ts == 1.0 and xid.action
    assert {f.code for f in found} == {"xid", "gpu-fallen-off-bus"}
    assert _events(("kernel", "eth0: link up")).hosts["h"].findings() == []


def test_kernel_rules_do_not_read_job_logs_as_the_kernel() -> None:
    quoted = "see dmesg: NVRM: Xid (PCI:0000:05:00): 79, pid=1, GPU has fallen off the bus."
    assert _events(("job:/var/log/train.log", quoted)).hosts["h"].findings() == []


def test_a_message_split_over_two_scans_is_still_found() -> None:
    fleet = _events(("kernel", "NVRM: GPU 0000:05:00.0: GPU has fallen"))
    assert fleet.hosts["h"].findings() == []
    fleet.apply("h", LogEvent(2.0, "kernel", "               off the bus."), now=2.0)
    fleet.scan_logs()
    assert {f.code for f in fleet.hosts["h"].findings()} == {"gpu-fallen-off-bus"}


def test_repeated_events_are_one_finding() -> None:
    fleet = FleetState([HostSpec("h")])
    line = "[{:>5}.000000] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception"
    for t in range(5):
        fleet.apply("h", LogEvent(float(t), "kernel", line.format(t)), now=float(t))
    fleet.scan_logs()
    (found,) = fleet.hosts["h"].findings()
    assert found.count == 5
    assert len(fleet.hosts["h"].logs.events) == 5


def test_a_reconnect_that_resends_the_kernel_log_counts_nothing_twice() -> None:
    fleet = FleetState([HostSpec("h")])
    ring = [f"[{t:>5}.000000] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception" for t in range(3)]
    for _ in range(2):  # dmesg's whole ring buffer again after the reconnect
        fleet.apply("h", Connected(0.0), now=0.0)
        for t, line in enumerate(ring):
            fleet.apply("h", LogEvent(float(t), "kernel", line, boot="b1"), now=float(t))
    # the same text after a reboot is a new line
    fleet.apply("h", LogEvent(9.0, "kernel", ring[0], boot="b2"), now=9.0)
    # journal entries are told apart by their cursor, not their text
    for c in ("s=1;i=1", "s=1;i=2", "s=1;i=1"):
        fleet.apply("h", LogEvent(10.0, "kernel", "NVRM: Xid (PCI:0000:3b:00): 13, x", "b2", c),
                    now=10.0)
    fleet.scan_logs()
    (found,) = fleet.hosts["h"].findings()
    assert found.count == 3 + 1 + 2
    assert len(fleet.hosts["h"].logs.events) == 6


def _with_source(state: LogSourceStatus, via: str | None = None, fix: str | None = None,
                 detail: str = "") -> HostState:
    fleet = FleetState([HostSpec("h")])
    fleet.apply("h", hello(), now=0.0)
    fleet.apply("h", LogSourceState(5.0, "kernel", state, via, detail, fix), now=5.0)
    return fleet.hosts["h"]


def test_kernel_log_source_is_what_triage_says_was_checked() -> None:
    assert FleetState([HostSpec("h")]).hosts["h"].kernel_log_summary() == \
        "not reported by the agent"
    assert _with_source(LogSourceStatus.OK, "journalctl").kernel_log_summary() == \
        "read via journalctl"
    assert _with_source(LogSourceStatus.OK, "journalctl").findings() == []
    assert _with_source(LogSourceStatus.OFF).findings() == []
    assert "off" in _with_source(LogSourceStatus.OFF).kernel_log_summary()


def test_an_unreadable_kernel_log_is_a_syslog_warning_with_the_fix() -> None:
    fix = "add ops to the systemd-journal group (usermod -aG systemd-journal ops) and reconnect"
    host = _with_source(LogSourceStatus.DENIED, fix=fix,
                        detail="dmesg: read kernel buffer failed: Operation not permitted")
    assert host.kernel_log_summary() == f"refused: {fix}"
    (f,) = host.findings()
    assert (f.step, f.code, f.severity) == (Step.SYSLOG, "kernel-log-unreadable",
                                             Severity.WARNING)
    assert f.action is not None and fix in f.action and "dmesg" in (f.evidence or "")
    # watching blind is not what broke the run
    assert first_failure(host.findings()) is None
    # a later logsource that works clears it
    host.apply(LogSourceState(6.0, "kernel", LogSourceStatus.OK, "dmesg"), now=6.0)
    assert host.findings() == []


def test_status_streaming_stale_down() -> None:
    fleet = FleetState([HostSpec("h", interval_s=1.0)])
    assert fleet.rows(0.0)[0].status is HostStatus.CONNECTING
    fleet.apply("h", Connected(1.0), now=1.0)
    fleet.apply("h", hello(), now=1.0)
    fleet.apply("h", sample(tuple(gpu(i) for i in range(8))), now=2.0)
    assert fleet.rows(3.0)[0].status is HostStatus.STREAMING
    row = fleet.rows(44.0)[0]
    assert row.status is HostStatus.STALE and row.stale_s == 42.0
    fleet.apply("h", sample(tuple(gpu(i) for i in range(8))), now=45.0)
    assert fleet.rows(45.5)[0].status is HostStatus.STREAMING
    fleet.apply("h", Disconnected(46.0, "connection reset", 2.0), now=46.0)
    assert fleet.rows(46.0)[0].status is HostStatus.DOWN
    assert fleet.hosts["h"].reach.down_reason == "connection reset"


def test_row_aggregates() -> None:
    fleet = FleetState([HostSpec("h")])
    fleet.apply("h", hello(2), now=1.0)
    fleet.apply("h", sample((gpu(0, temp_c=70.0, util_pct=80.0, mem_used_mib=20000.0),
                             gpu(1, temp_c=50.0, util_pct=40.0, mem_used_mib=60000.0))), now=1.0)
    row = fleet.rows(1.0)[0]
    assert row.max_temp_c == 70.0
    assert row.mean_util_pct == 60.0
    assert row.mem_used_pct == 50.0
    assert row.power_w == 1200.0
    assert row.gpus_expected == 2
    series = fleet.hosts["h"].history.series(gpu_key(1, "mem_used_mib"))
    assert series is not None and [p.mean for p in series.points()] == [60000.0]


def test_lost_state_from_the_agent() -> None:
    g = GpuSample(index=-1, state=GpuState.LOST, bus_id="0000:8a:00.0")
    [f] = sample_findings("h", None, sample((g,)))
    assert f.code == "gpu-lost" and "0000:8a:00.0" in f.summary


def test_a_log_finding_carries_the_lines_before_its_evidence() -> None:
    fleet = _events(
        ("kernel", "eth0: link up"),
        ("kernel", "pcieport 0000:b8:01.0: AER: Uncorrected (Fatal) error received: 0000:ba:00.0"),
        ("kernel", "nvidia 0000:ba:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal)"),
        ("kernel", "nvidia 0000:ba:00.0:   device [10de:2330] error status/mask=00000020"),
        ("kernel", "NVRM: Xid (PCI:0000:ba:00): 79, pid=1, GPU has fallen off the bus."))
    xid = next(f for f in fleet.hosts["h"].findings() if f.code == "xid")
    assert xid.context == (
        "pcieport 0000:b8:01.0: AER: Uncorrected (Fatal) error received: 0000:ba:00.0",
        "nvidia 0000:ba:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal)",
        "nvidia 0000:ba:00.0:   device [10de:2330] error status/mask=00000020")
    first = next(f for f in fleet.hosts["h"].findings() if f.code == "pcie-aer")
    assert first.context == ("eth0: link up",)
