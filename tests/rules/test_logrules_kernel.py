"""Kernel-log rules: every shared kernel sample, the formats around them, and junk input."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from probes.rules.logrules.kernel import scan
from probes.rules.logrules.lines import log_lines
from probes.rules.result import ExplainFinding
from probes.rules.text import decode
from probes.triage import Severity, Step
from tests.conftest import FIXTURES
from tests.support.explain_expect import expectation, finding_set, fixture_input

KERNEL = FIXTURES / "kernel"
SAMPLES = sorted(KERNEL.glob("*.txt")) if KERNEL.is_dir() else []


def _scan(text: str) -> list[ExplainFinding]:
    return scan(log_lines(text.splitlines()))


def _keys(text: str) -> set[tuple[str, str, int | None]]:
    return {f.key for f in _scan(text)}


def _one(text: str, code: str, xid: int | None = None) -> ExplainFinding:
    found = [f for f in _scan(text) if f.code == code and f.xid == xid]
    assert len(found) == 1, found
    return found[0]


# --- the shared samples --------------------------------------------------------------------


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_kernel_sample_gives_its_expected_findings(sample: Path) -> None:
    text = decode(fixture_input(sample))
    got = [f.to_json(sample.name) for f in _scan(text)]
    assert finding_set(got) == finding_set(expectation(sample)["findings"])


def test_there_are_kernel_samples() -> None:
    assert len(SAMPLES) >= 14


def test_sample_details_xid79_and_fallen_off_bus() -> None:
    sample = KERNEL / "02-dmesg-T-xid79-new-format-broken-bracket.txt"
    found = _scan(decode(fixture_input(sample)))
    xid = next(f for f in found if f.code == "xid")
    off = next(f for f in found if f.code == "gpu-fallen-off-bus")
    assert (xid.xid, xid.severity, xid.gpu, xid.line) == (79, Severity.CRITICAL, "0000:3b:00.0", 3)
    assert xid.time == "Sat Nov  8 03:17:44 2025"
    assert "fallen off the bus" in xid.summary
    assert (off.severity, off.gpu, off.line) == (Severity.CRITICAL, "0000:3b:00.0", 4)


# --- Xid formats ---------------------------------------------------------------------------


def test_journalctl_short_iso() -> None:
    f = _one("2025-11-08T03:17:44+0000 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, "
             "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "xid", 79)
    assert f.gpu == "0000:3b:00.0"
    assert f.time == "2025-11-08T03:17:44+0000"
    assert f.severity is Severity.CRITICAL
    assert "[RESTART_BM]" in f.action


def test_kern_log_grep_prefix_and_dbe() -> None:
    f = _one("kern.log:Nov  8 03:17:44 gpu7 kernel: [ 1234.567890] NVRM: Xid (PCI:0000:65:00): "
             "48, pid=8812, name=python3, An uncorrectable double bit error (DBE) has been "
             "detected on GPU in the framebuffer at partition 6, subpartition 0.", "xid", 48)
    assert f.severity is Severity.CRITICAL
    assert f.gpu == "0000:65:00.0"
    assert f.time == "Nov  8 03:17:44"
    assert "python3 (8812)" in f.summary


@pytest.mark.parametrize(("dev", "gpu"), [
    ("PCI:0000:3b:00", "0000:3b:00.0"),
    ("PCI:00000000:3B:00", "0000:3b:00.0"),
    ("PCI:00008ED0:00:00", "8ed0:00:00.0"),  # Linux prints the domain %04x
    ("0000:03:00", "0000:03:00.0"),
    ("PCI:0004:01:00", "0004:01:00.0"),
    ("PCI:3b:00", "0000:3b:00.0"),
])
def test_pci_domains_of_any_width(dev: str, gpu: str) -> None:
    assert _one(f"[ 5.1] NVRM: Xid ({dev}): 94, pid=77, name=python, Contained: CE User "
                "Channel (0x9). RST: No, D-RST: No", "xid", 94).gpu == gpu


def test_nvidia_doc_examples_without_pci_word() -> None:
    keys = _keys("[...] NVRM: GPU at 0000:03:00: GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7\n"
                 "[...] NVRM: Xid (0000:03:00): 14, Channel 00000001\n"
                 "[...] NVRM: Xid (PCI:0000:5a:00): 79, GPU has fallen off the bus.")
    assert keys == {("syslog", "xid", 14), ("syslog", "xid", 79)}


def test_truncated_xid_lines() -> None:
    assert _keys("[  9.1] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unkn") == {("syslog", "xid", 79)}
    assert _keys("[  9.1] NVRM: Xid (PCI:0000:3b:00): 119") == {
        ("syslog", "xid", 119), ("syslog", "gsp-timeout", None)}
    assert _keys("[  9.1] NVRM: Xid (PCI:0000:3b:0") == set()
    assert _keys("[  9.1] NVRM: Xid (") == set()


def test_non_utf8_bytes_and_crlf() -> None:
    raw = (b"[  3.2] NVRM: Xid (PCI:0000:3b:00): 13, \xff\xfe Graphics Exception\r\n"
           b"\x80\x81[  3.3] NVRM: Xid (PCI:0000:3b:00): 43, pid=9, Ch 00000010\r\n")
    lines = decode(raw).split("\n")
    keys = {f.key for f in scan(log_lines(lines))}
    assert keys == {("syslog", "xid", 13), ("syslog", "xid", 43)}


def test_dmesg_level_prefix_gives_monotonic_time() -> None:
    f = _one("kern  :warn  : [  12.345678] NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=a, Ch "
             "00000008, intr 00000000. MMU Fault", "xid", 31)
    assert f.time == "12.345678"
    f = _one("<4>[  77.000001] NVRM: Xid (PCI:0000:3b:00): 31, Ch 00000008", "xid", 31)
    assert f.time == "77.000001"


@pytest.mark.parametrize(("line", "time"), [
    ("Nov 08 03:17:44.123456 gpu7 kernel: NVRM: Xid (PCI:0000:3b:00): 13, x",
     "Nov 08 03:17:44.123456"),
    ("Sat 2025-11-08 03:17:44 UTC gpu7 kernel: NVRM: Xid (PCI:0000:3b:00): 13, x",
     "Sat 2025-11-08 03:17:44 UTC"),
    ("6,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 13, x", "5.678901"),
    ("[   12.345678] gpu7 kernel: NVRM: Xid (PCI:0000:3b:00): 13, x", "12.345678"),
])
def test_journalctl_precise_full_monotonic_and_kmsg_times(line: str, time: str) -> None:
    assert _one(line, "xid", 13).time == time


def test_scanner_quoted_and_json_reprints() -> None:
    text = ('{"ts": 1, "msg": "NVRM: Xid (PCI:0000:3b:00): 79, pid=\'<unknown>\', '
            'name=<unknown>, GPU has fallen off the bus."}\n'
            '> "NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=x, NVLink: fatal error detected '
            'on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"')
    assert _keys(text) == {("syslog", "xid", 79), ("syslog", "xid", 74)}


def test_sxid_is_not_an_xid() -> None:
    assert _keys("[ 9.9] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 12028, Non-fatal, Link 44 "
                 "egress non-posted PRIV error") == set()


def test_same_xid_on_many_gpus_is_one_finding_distinct_codes_are_many() -> None:
    text = ("[1.0] NVRM: Xid (PCI:0000:1b:00): 13, pid=1, name=a, Graphics Exception\n"
            "[1.1] NVRM: Xid (PCI:0000:52:00): 13, pid=2, name=a, Graphics Exception\n"
            "[1.2] NVRM: Xid (PCI:0000:52:00): 31, pid=2, name=a, Ch 00000001\n")
    found = _scan(text)
    assert {f.key for f in found} == {("syslog", "xid", 13), ("syslog", "xid", 31)}
    x13 = next(f for f in found if f.xid == 13)
    assert x13.count == 2
    assert x13.extra["gpus"] == ["0000:1b:00.0", "0000:52:00.0"]
    assert "2 GPUs" in x13.summary


def test_xid45_names_its_cause_without_a_finding_for_it() -> None:
    f = _one("kernel: NVRM: Xid (PCI:0000:1b:00): 45, pid=3, name=pt_main_thread, Ch 00000002 "
             "caused by previous Xid 149\n", "xid", 45)
    assert "Xid 149" in f.summary
    assert f.extra["caused_by"] == [149]
    assert "149" in f.action
    assert _keys("NVRM: Xid (PCI:0000:1b:00): 45, Ch 2 caused by previous Xid 149") == {
        ("syslog", "xid", 45)}


def test_several_xids_flattened_on_one_line() -> None:
    found = _scan("13: NVRM: Xid (PCI:0000:1b:00): 79, pid=1, GPU has fallen off the bus. 13: "
                  "NVRM: Xid (PCI:0000:52:00): 45, pid=2, name=a, Ch 00000001")
    assert {f.key for f in found} == {("syslog", "xid", 79), ("syslog", "xid", 45)}
    assert next(f for f in found if f.xid == 45).gpu == "0000:52:00.0"


def test_wrapped_tail_of_an_xid79_line_is_not_a_second_finding() -> None:
    assert _keys("[ 5.5] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU "
                 "has\nfallen off the bus.") == {("syslog", "xid", 79)}


def test_untimestamped_lines_after_an_xid_are_still_read() -> None:
    assert _keys("kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
                 "kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.") == {
        ("syslog", "xid", 79), ("syslog", "gpu-fallen-off-bus", None)}


def test_xid_gpu_falls_back_to_gpu_name_when_redacted() -> None:
    f = _one("NVRM: Xid (PCI:...): 137, RLW_RXPIPE interrupt hit on link 7 on GPU6: PRIV Error",
             "xid", 137)
    assert f.gpu == "GPU6"


@pytest.mark.parametrize(("line", "severity"), [
    ("145, RLW_RXPIPE Nonfatal XC1 i0 Link 7 (0x000000c2 0x1 0x0 0x0 0x0 0x0 0x0)", "warning"),
    ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 3 (0x004f0011 0x0 0x0 0x0 0x0 0x0 0x0)", "critical"),
    ("144, SAW_MVB Non-fatal XC0 i0 Link -1 (0x00000021 0x4 0x0 0x0 0x0 0x0 0x0)", "warning"),
    ("63, pid=1, Row Remapper: New row marked for remapping, reset gpu to activate.", "warning"),
    ("64, pid=1, Row Remapper: Failed to mark row for remapping", "critical"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
     "critical"),
    ("154, GPU recovery action changed from 0x0 (None) to 0x1 (Drain P2P)", "warning"),
    ("94, pid=1, name=x, Contained: SM (0x1). RST: No, D-RST: No", "warning"),
    ("95, pid=1, name=x, Uncontained: FBHUB. RST: Yes, D-RST: No", "critical"),
    ("92, High single bit ECC error rate", "critical"),
    ("43, pid=1, name=x, Ch 00000010", "warning"),
    ("999, something new", "warning"),
])
def test_xid_severity_from_catalog_and_line(line: str, severity: str) -> None:
    f = _scan(f"[1.0] NVRM: Xid (PCI:0000:ab:00): {line}")
    xids = [x for x in f if x.code == "xid"]
    assert len(xids) == 1
    assert xids[0].severity.value == severity


def test_xid154_reports_the_recovery_action() -> None:
    f = _one("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to "
             "0x2 (Node Reboot Required)", "xid", 154)
    assert "Node Reboot Required" in f.summary
    assert f.action.startswith("Node Reboot Required")


def test_unknown_xid_is_reported_generically() -> None:
    f = _one("NVRM: Xid (PCI:0000:01:00): 999, pid=1, name=x, brand new", "xid", 999)
    assert "not in the catalog" in f.summary


def test_xid119_and_timeout_xid120_are_also_gsp_timeouts() -> None:
    assert _keys("NVRM: Xid (PCI:0000:3b:00): 120, pid=1, name=x, GSP task timeout @ "
                 "pc:0x2f1a0c0, task: 1") == {("syslog", "xid", 120),
                                              ("syslog", "gsp-timeout", None)}
    assert _keys("NVRM: Xid (PCI:0000:3b:00): 120, pid=1, name=x, GSP Error: Task 1 raised "
                 "error code 0x5 for reason 0x0 at 0x2e5a7d8") == {("syslog", "xid", 120)}


# --- the other kernel messages -------------------------------------------------------------


def test_gsp_timeout_variants() -> None:
    for line in ("[ 5.0] NVRM: GPU0 _issueRpcAndWait: rpcRecvPoll timedout for fn 76!",
                 "[ 5.0] NVRM: GPU0 _kgspLogXid119: ********** GSP Timeout **********",
                 "[ 5.0] NVRM: GPU1 _kgspIsHeartbeatTimedOut: Heartbeat timed out, diff 6196"):
        f = _one(line, "gsp-timeout")
        assert f.severity is Severity.CRITICAL
    assert _one("[ 5.0] NVRM: GPU1 _kgspIsHeartbeatTimedOut: x", "gsp-timeout").gpu == "GPU1"


def test_fallen_off_bus_split_mid_sentence() -> None:
    f = _one("[ 81.0] NVRM: GPU 0000:b3:00.0: GPU has fallen off\nthe bus.",
             "gpu-fallen-off-bus")
    assert f.gpu == "0000:b3:00.0"
    assert f.line == 1
    assert f.count == 1


def test_fallen_off_bus_continuation_inherits_time_and_gpu() -> None:
    f = _one("[ 2291.774031] NVRM: The NVIDIA GPU 0000:4e:00.0\n"
             "               NVRM: (PCI ID: 10de:2330) installed in this system has\n"
             "               NVRM: fallen off the bus and is not responding to commands.",
             "gpu-fallen-off-bus")
    assert (f.gpu, f.time, f.line, f.severity) == ("0000:4e:00.0", "2291.774031", 3,
                                                   Severity.CRITICAL)


@pytest.mark.parametrize(("line", "severity"), [
    ("pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0", "info"),
    ("pcieport 0000:00:01.0: AER: Multiple Corrected error received: 0000:01:00.0", "info"),
    ("pcieport 0000:00:03.0: AER: Uncorrected (Non-Fatal) error received: 0000:03:00.0",
     "warning"),
    ("pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:03:00.0", "critical"),
    ("pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction "
     "Layer, (Receiver ID)", "critical"),
    ("pcieport 0000:40:01.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
     "(Receiver ID)", "info"),
    ("pcieport 0000:40:01.1: AER:    [ 5] SDES                   (First)", "critical"),
    ("pcieport 0000:40:01.1: Surprise Down Error", "critical"),
    # firmware-first (GHES) reports, as the kernel's cper_print_pcie prints them
    ("{1}[Hardware Error]:   section_type: PCIe error", "warning"),
    ("{1}[Hardware Error]: " + "event severity: recoverable " * 2 + "section_type: PCIe error",
     "warning"),
])
def test_pcie_aer_severities(line: str, severity: str) -> None:
    f = _one(f"[ 33.1] {line}", "pcie-aer")
    assert f.severity.value == severity


def test_pcie_aer_incident_is_one_finding_with_the_worst_line_as_evidence() -> None:
    f = _one("[1.0] pcieport 0000:00:03.0: AER: Corrected error received: 0000:03:00.0\n"
             "[1.1] pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Physical "
             "Layer, (Receiver ID)\n"
             "[1.2] pcieport 0000:00:03.0:   device [10de:2330] error status/mask=00000001\n"
             "[2.0] pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: "
             "0000:03:00.0\n", "pcie-aer")
    assert (f.severity, f.line, f.count) == (Severity.CRITICAL, 4, 3)
    assert f.extra["device"] == "0000:03:00.0"


def test_pcie_aer_older_kernel_wording_names_the_source() -> None:
    f = _one("[ 7.7] pcieport 0000:00:01.0: AER: Corrected error message received from "
             "0000:01:00.0", "pcie-aer")
    assert (f.severity, f.extra["device"]) == (Severity.INFO, "0000:01:00.0")


def test_oom_killer_classic_and_cgroup() -> None:
    f = _one("[ 9.0] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), "
             "order=0, oom_score_adj=0\n"
             "[ 9.1] Memory cgroup out of memory: Killed process 4242 (python) total-vm:1kB, "
             "anon-rss:1kB\n", "oom-killer")
    assert "python (pid 4242)" in f.summary
    assert "cgroup" in f.summary
    assert f.count == 2


def test_oom_killer_word_cut_across_lines() -> None:
    f = _one("[ 9.0] python invoked oom-ki\n"
             "ller: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0\n", "oom-killer")
    assert f.line == 1
    assert _one("[ 9.0] python invoked oom-ki                                     ller: gfp",
                "oom-killer").line == 1


def test_cpu_thermal_needs_more_than_back_to_normal() -> None:
    assert _keys("[1.0] mce: CPU7: Core temperature/speed normal\n"
                 "[1.1] mce: CPU7: Package temperature/speed normal") == set()
    f = _one("[1.0] thermal thermal_zone0: critical temperature reached (105 C), shutting down",
             "cpu-thermal")
    assert f.severity is Severity.CRITICAL


def test_api_mismatch_reads_both_versions() -> None:
    f = _one("[   52.396206] NVRM: API mismatch: the client has the version 440.82, but\n"
             "               NVRM: this kernel module has the version 390.48.  Please\n"
             "               NVRM: make sure that this kernel module and all NVIDIA driver\n"
             "               NVRM: components have the same version.\n", "nvrm-api-mismatch")
    assert "440.82" in f.summary and "390.48" in f.summary
    assert f.severity is Severity.CRITICAL


def test_rm_init_adapter_failed() -> None:
    f = _one("[921.623] NVRM: GPU 0000:04:00.0: RmInitAdapter failed! (0x62:0x40:2192)\n"
             "[921.624] NVRM: GPU 0000:04:00.0: rm_init_adapter failed, device minor number 0",
             "rm-init-adapter-failed")
    assert (f.gpu, f.count) == ("0000:04:00.0", 2)
    assert "0x62:0x40:2192" in f.summary


@pytest.mark.parametrize(("line", "severity"), [
    ("pci 0000:41:00.0: 126.024 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x8 "
     "link at 0000:40:01.1 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)", "warning"),
    ("pci 0000:41:00.0: 8.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s x4 link at "
     "0000:00:1c.4 (capable of 31.504 Gb/s with 8 GT/s x4 link)", "info"),
])
def test_kernel_pcie_bandwidth_line(line: str, severity: str) -> None:
    f = _one(f"[ 1.9] {line}", "pcie-link-downgraded")
    assert f.step is Step.GPU
    assert f.severity.value == severity
    assert f.gpu == "0000:41:00.0"


def test_pcie_bandwidth_without_shortfall_is_nothing() -> None:
    assert _keys("[1.9] mlx5_core 0000:3b:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 "
                 "GT/s PCIe x16 link)") == set()


def healthy_boot_lines() -> list[str]:
    """A normal boot of an 8-GPU server, shaped like real dmesg output."""
    return [
        "[    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (x86_64-linux-"
        "gnu-gcc-13 (Ubuntu 13.2.0-23ubuntu4) 13.2.0, GNU ld 2.42) #45-Ubuntu SMP "
        "PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024",
        "[    0.000000] Command line: BOOT_IMAGE=/vmlinuz-6.8.0-45-generic ro iommu=pt "
        "pci=realloc",
        "[    0.004512] DMI: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 04/12/2024",
        "[    0.412315] ACPI: thermal: [Firmware Bug]: No valid trip found",
        "[    0.523108] thermal_sys: Registered thermal governor 'fair_share'",
        "[    0.523111] thermal_sys: Registered thermal governor 'step_wise'",
        "[    0.523112] thermal_sys: Registered thermal governor 'user_space'",
        "[    1.203377] pcieport 0000:15:01.0: PME: Signaling with IRQ 24",
        "[    1.203401] pcieport 0000:15:01.0: AER: enabled with IRQ 24",
        "[    1.203855] pcieport 0000:15:01.0: DPC: enabled with IRQ 24",
        "[    1.203856] pcieport 0000:15:01.0: DPC: error containment capabilities: Int Msg "
        "#0, RPExt+ PoisonedTLP+ SwTrigger+ RP PIO Log 4, DL_ActiveErr+",
        "[    1.882415] pci 0000:19:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint",
        "[    2.001113] EDAC MC: Ver: 3.0.0",
        "[    3.100001] coretemp coretemp.0: Using relative temperature scale!",
        "[    4.532101] nvidia: loading out-of-tree module taints kernel.",
        "[    4.532110] nvidia: module license 'NVIDIA' taints kernel.",
        "[    4.588720] nvidia-nvlink: Nvlink Core is being initialized, major device number "
        "508",
        "[    4.590115] nvidia 0000:19:00.0: enabling device (0000 -> 0002)",
        "[    4.641005] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 "
        "09:35:42 UTC 2024",
        "[    4.702313] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX "
        "platforms  550.90.07  Fri May 31 09:30:47 UTC 2024",
        "[    4.710442] [drm] [nvidia-drm] [GPU ID 0x00001900] Loading driver",
        "[    4.710450] [drm] Initialized nvidia-drm 0.0.0 20160202 for 0000:19:00.0 on minor 1",
        "[    5.140012] nvidia-uvm: Loaded the UVM driver, major device number 506.",
        "[    6.220001] NVRM: GPU at PCI:0000:19:00: GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901",
        "[    6.220003] NVRM: GPU Board Serial Number: 1650123456789",
        "[    6.300000] NVRM: Persistence mode is deprecated and will be removed in a future "
        "release. Please use nvidia-persistenced instead.",
        "[    7.004400] intel_rapl_common: Found RAPL domain package",
        "[   12.331002] systemd[1]: Started systemd-oomd.service - Userspace Out-Of-Memory "
        "(OOM) Killer.",
        "[   20.100000] Adding 8388604k swap on /swap.img.  Priority:-2 extents:1",
        "[   31.000000] mlx5_core 0000:3b:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 "
        "GT/s PCIe x16 link)",
        "[   40.000000] igb 0000:05:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex",
        "[   41.000000] mce: CPU3: Core temperature/speed normal",
    ]


def test_healthy_boot_gives_nothing_above_info() -> None:
    found = scan(log_lines(healthy_boot_lines()))
    assert [f for f in found if f.severity.rank > Severity.INFO.rank] == []


def test_findings_carry_the_log_time_and_line() -> None:
    found = _scan("Sep  3 02:11:58 ws3 kernel: [413027.1] pcieport 0000:00:01.0: AER: Corrected "
                  "error received: 0000:01:00.0\n"
                  "Sep  3 02:12:00 ws3 kernel: [413029.2] NVRM: Xid (PCI:0000:01:00): 62, "
                  "pid=1, name=x, 0000(0000) 00000000 00000000")
    assert [(f.code, f.line, f.time) for f in found] == [
        ("pcie-aer", 1, "Sep  3 02:11:58"), ("xid", 2, "Sep  3 02:12:00")]


# --- never crash ---------------------------------------------------------------------------


def _corpus() -> list[str]:
    texts = [decode(fixture_input(p)) for p in SAMPLES]
    texts.append("\n".join(healthy_boot_lines()))
    texts.append("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) "
                 "to 0x2 (Node Reboot Required)\npcieport 0000:00:01.0: AER: Uncorrected "
                 "(Fatal) error received: 0000:01:00.0\nNVRM: API mismatch: the client has the "
                 "version 1.2, but")
    return texts


def _mangle(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    out = []
    for line in lines:
        roll = rng.random()
        if roll < 0.3 and line:
            line = line[:rng.randrange(len(line))]
        elif roll < 0.5:
            noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
            at = rng.randrange(len(line) + 1)
            line = line[:at] + decode(noise) + line[at:]
        elif roll < 0.6:
            line = " " * rng.randrange(1, 130) + line
        out.append(line)
    if out and rng.random() < 0.3:
        rng.shuffle(out)
    return "\n".join(out)


def test_fuzz_truncation_and_random_bytes_never_raise() -> None:
    rng = random.Random(20251108)
    corpus = _corpus()
    for _ in range(300):
        text = _mangle(rng, rng.choice(corpus))
        lines = text.splitlines()
        found = scan(log_lines(lines))
        assert isinstance(found, list)
        for f in found:
            assert 1 <= f.line <= len(lines)
            assert f.count >= 1
            assert f.summary and f.action
            f.to_json("fuzz")


def test_random_binary_never_raises() -> None:
    rng = random.Random(7)
    for _ in range(50):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 2000)))
        scan(log_lines(decode(blob).splitlines()))
    assert scan([]) == []
