"""What a Prometheus-read host cannot tell because its exporter does not collect it.

dcgm-exporter's default counters leave out PCIe generation and width, ECC, clock-event
reasons, the power limit and the violation times.  Without them a check would show nothing,
or worse a healthy value; instead the core says, once per host, which checks are blind and
which counters to add.  The source lists every absent metric in the hello as an unavailable
probe named after the metric (``ProbeStatus``); this module turns that into one verdict.
"""

from __future__ import annotations

from collections.abc import Mapping

from probes.analysis.findings import Finding
from probes.analysis.not_collected import missing_metrics, not_collected_text
from probes.triage import Code, Severity, Step
from probes.wire.samples import Hello

CHECKS: Mapping[str, str] = {
    "DCGM_FI_DEV_PCIE_LINK_GEN": "PCIe link generation",
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": "PCIe link width",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "uncorrectable ECC errors",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "correctable ECC errors",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clock-event (throttle) reasons",
    "DCGM_FI_DEV_POWER_VIOLATION": "time throttled by power",
    "DCGM_FI_DEV_THERMAL_VIOLATION": "time throttled by heat",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power limit",
    "DCGM_FI_DEV_MAX_SM_CLOCK": "maximum SM clock",
}
"""Each default-off metric and the check that is blind without it."""


def not_collected(hello: Hello | None) -> dict[str, str]:
    """Metric name → the check it feeds, for every metric the host's exporter lacks."""
    return {m: CHECKS.get(m, m) for m in missing_metrics(hello)}


def collection_findings(host: str, hello: Hello | None) -> list[Finding]:
    """One informational finding naming every blind check and the counters to add."""
    missing = not_collected(hello)
    if not missing:
        return []
    checks = ", ".join(dict.fromkeys(missing.values()))
    return [Finding(Step.GPU, Code.METRIC_NOT_COLLECTED, Severity.INFO,
                    f"{checks}: {not_collected_text(sorted(missing))}", host,
                    evidence=", ".join(sorted(missing)),
                    action="Add the metrics to dcgm-exporter's counters CSV "
                           "(-f / DCGM_EXPORTER_COLLECTORS) and restart it; until then these "
                           "checks cannot be made from Prometheus")]
