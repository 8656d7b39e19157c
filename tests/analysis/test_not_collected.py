"""Readings the exporter does not collect: the core's verdict and the GPU table's cells.

The hello is shaped as the Prometheus source builds it when dcgm-exporter runs its
``default-counters.csv`` (no PCIe link, no clock-event reasons): each absent metric is an
unavailable probe named after it.
"""

from __future__ import annotations

from probes.analysis.collected import collection_findings
from probes.analysis.judge import judge_gpus
from probes.wire.samples import GpuInfo, GpuSample, Hello, HostFacts, HostSample, ProbeStatus
from widgets.gpu_table import MISSING, GpuRow, pcie_cell, reasons_cell

ABSENT = ("DCGM_FI_DEV_PCIE_LINK_GEN", "DCGM_FI_DEV_PCIE_LINK_WIDTH",
          "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_POWER_VIOLATION")


def _hello(absent: tuple[str, ...]) -> Hello:
    probes = (ProbeStatus("prometheus", True),
              *(ProbeStatus(m, False, f"not collected — add {m}") for m in absent))
    facts = HostFacts("gpu-a01", None, None, None, "550.90.07", None, None, None, None, None,
                      None, gpus=(GpuInfo(0, "GPU-0", "00000000:18:00.0", "H100", 81559.0),),
                      probes=probes)
    return Hello(0.0, 0, "prometheus", facts)


SAMPLE = HostSample(1.0, 0, (GpuSample(0, "GPU-0", mem_used_mib=1000.0, util_pct=97.0),))


def test_the_gpu_table_says_not_collected_instead_of_a_blank() -> None:
    (judged,) = judge_gpus(SAMPLE, _hello(ABSENT), [])
    assert judged.note("pcie_width") == ("not collected — add DCGM_FI_DEV_PCIE_LINK_WIDTH to "
                                         "the exporter's counters")
    row = GpuRow(SAMPLE.gpus[0], judged)
    assert pcie_cell(row) == ("uncollected", "cell--muted")
    assert reasons_cell(row) == ("uncollected", "cell--muted")
    # collected but not reported this tick: the ordinary blank, not a false "not collected"
    (plain,) = judge_gpus(SAMPLE, _hello(()), [])
    assert plain.note("pcie_width") is None
    assert pcie_cell(GpuRow(SAMPLE.gpus[0], plain)) == MISSING
    assert reasons_cell(GpuRow(SAMPLE.gpus[0], plain)) == ("", None)


def test_one_finding_per_host_names_the_blind_checks_and_the_counters() -> None:
    (f,) = collection_findings("gpu-a01", _hello(ABSENT))
    assert f.code == "metric-not-collected" and f.severity.value == "info"
    for text in ("PCIe link generation", "clock-event (throttle) reasons",
                 "time throttled by power", "add DCGM_FI_DEV_CLOCKS_EVENT_REASONS"):
        assert text in f.summary
    assert collection_findings("gpu-a01", _hello(())) == []
