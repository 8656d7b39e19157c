"""The worst-finding text leads with the verdict, on findings shaped as the demo makes them."""

from __future__ import annotations

import pytest

from probes.analysis.findings import Finding
from probes.analysis.headline import headline, worst_headline
from probes.fleet_state import FleetState
from probes.triage import Code, Severity, Step
from tests.support.tui_fakes import sim_fleet

SCENARIOS = [("gpu-a01", "healthy"), ("gpu-a02", "leak:3"), ("gpu-a03", "throttle:5"),
             ("gpu-b02", "xid79:6"), ("gpu-b03", "nccl-timeout"),
             ("gpu-c01", "disk-saturated"), ("gpu-c02", "link-downgrade:2")]


@pytest.fixture(scope="module")
def demo() -> dict[str, str | None]:
    backend, clock = sim_fleet(SCENARIOS, minutes=45)
    fleet = FleetState(backend.specs)
    for host, item in backend.items:
        fleet.apply(host, item, clock())
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    return {row.name: row.headline for row in fleet.rows(clock())}


def test_each_demo_trouble_reads_verdict_first(demo: dict[str, str | None]) -> None:
    assert demo == {
        "gpu-a01": None,  # only the far-NIC information: no headline
        "gpu-a02": "GPU3 LEAKING +600 MiB/h, full in ~31 h",
        "gpu-a03": "GPU5 THROTTLED 90 °C",
        "gpu-b02": "GPU6 LOST · Xid 79",
        "gpu-b03": "NCCL TIMEOUT · rank 3",
        # the saturated disk starves the GPUs: the starvation leads (the disk is its cause)
        "gpu-c01": "DATA STARVED · GPUs idle 36% of the last 10 min in gaps between busy "
                   "stretches (8 of 8 GPUs) while nvme0n1 is 99% busy (await 28 ms, queue 31), "
                   "holding /data: the input pipeline is starving them",
        "gpu-c02": "GPU2 LINK DOWN-TRAINED · PCIe x8 (capable x16)",
    }


def test_cut_to_twelve_columns_the_verdict_survives(demo: dict[str, str | None]) -> None:
    cut = {h: (t or "")[:12] for h, t in demo.items()}
    assert cut["gpu-b02"] == "GPU6 LOST · " and cut["gpu-a03"] == "GPU5 THROTTL"
    assert cut["gpu-a02"].startswith("GPU3 LEAKING")


def f(code: str, summary: str, sev: Severity = Severity.CRITICAL, **kw: object) -> Finding:
    return Finding(Step.GPU, code, sev, summary, "h", **kw)  # type: ignore[arg-type]


def test_a_lost_gpu_without_an_xid_says_how_it_went() -> None:
    drop = f(Code.GPU_DROPOUT, "GPU6 (0000:ba:00.0) dropped out of the samples: 7 of 8 GPUs "
             "answer", gpu=6, extra={"answering": 7, "expected": 8})
    assert headline(drop) == "GPU6 LOST · 7/8 answer"
    bus = f(Code.GPU_FALLEN_OFF_BUS, "GPU 0000:ba:00.0 has fallen off the bus", gpu=6)
    assert headline(drop, [bus]) == "GPU6 LOST · fell off the bus"
    other = f(Code.XID, "Xid 79 (GPU has fallen off the bus) on 0000:1b:00.0", gpu=1, xid=79)
    assert headline(drop, [other]) == "GPU6 LOST · 7/8 answer"  # another GPU's Xid is not it


def test_other_codes_lead_with_a_word_and_drop_the_repeated_gpu() -> None:
    unresp = f(Code.GPU_UNRESPONSIVE, "GPU 2: probe call hung", Severity.WARNING, gpu=2)
    assert headline(unresp) == "GPU2 UNRESPONSIVE · probe call hung"
    xid = f(Code.XID, "Xid 48 (DBE) on 0000:1b:00.0", gpu=1, xid=48,
            extra={"xid_name": "Double Bit ECC Error"})
    assert headline(xid) == "GPU1 XID 48 · Double Bit ECC Error"
    ecc = f(Code.ECC_UNCORRECTABLE, "GPU 4: 3 uncorrectable ECC errors since the driver "
            "loaded", gpu=4)
    assert headline(ecc) == "GPU4 ECC ERRORS · 3 uncorrectable ECC errors since the driver loaded"
    hot = f(Code.TEMP_NEAR_SLOWDOWN, "GPU5 at 88 °C", Severity.WARNING, gpu=5,
            extra={"temp_c": 88.4})
    assert headline(hot) == "GPU5 HOT 88 °C"
    swap = f(Code.HOST_SWAPPING, "host swapping in 900 pages/s", Severity.WARNING)
    assert headline(swap) == "SWAPPING · host swapping in 900 pages/s"


def test_down_and_count_findings_are_already_verdict_led() -> None:
    down = f(Code.HOST_UNREACHABLE, "DOWN · connection refused by 10.0.0.7:22 (sshd down or "
             "port closed)")
    assert headline(down) == down.summary
    short = f(Code.GPU_COUNT_SHORT, "0/8 GPUs · driver not loaded? (the host reports no GPU)")
    assert headline(short).startswith("0/8 GPUs · driver not loaded?")


def test_information_gives_no_worst_headline() -> None:
    info = f(Code.TOPOLOGY_CROSS_NUMA, "32 GPU–NIC paths cross", Severity.INFO)
    assert worst_headline([info]) is None and worst_headline([]) is None
    warn = f(Code.DISK_SATURATED, "nvme0n1 100% busy", Severity.WARNING)
    assert worst_headline([info, warn]) == "DISK SATURATED · nvme0n1 100% busy"
