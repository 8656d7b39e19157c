"""Which GPU readings an exporter does not collect, by the ``GpuSample`` field they fill.

The Prometheus source lists every absent metric in the hello as an unavailable probe named
after the metric.  A panel showing that field must then say "not collected" rather than a
blank or a healthy-looking value; this is the one place that decides it (``judge_gpus``
puts it in every GPU's judgement, ``collected.py`` makes the host's finding of it).
"""

from __future__ import annotations

from collections.abc import Mapping

from probes.wire.samples import Hello

METRIC_PREFIX = "DCGM_"
FIELD_OF: Mapping[str, str] = {
    "DCGM_FI_DEV_PCIE_LINK_GEN": "pcie_gen",
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": "pcie_width",
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": "pcie_gen_max",
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": "pcie_width_max",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_uncorrected_volatile",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ecc_corrected_volatile",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clock_reasons",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_MAX_SM_CLOCK": "sm_clock_max_mhz",
    "DCGM_FI_DEV_MEMORY_TEMP": "temp_mem_c",
}
"""Each default-off (or often absent) metric and the field it fills."""


def missing_metrics(hello: Hello | None) -> list[str]:
    """The metrics the host's exporter lacks, as its hello lists them."""
    if hello is None:
        return []
    return sorted(p.name for p in hello.facts.probes
                  if p.name.startswith(METRIC_PREFIX) and not p.available)


def not_collected_text(metrics: list[str]) -> str:
    """``not collected — add A, B to the exporter's counters``."""
    return f"not collected — add {', '.join(metrics)} to the exporter's counters"


def field_notes(hello: Hello | None) -> tuple[tuple[str, str], ...]:
    """(``GpuSample`` field, what to say instead of its value) for each field not collected."""
    by_field: dict[str, list[str]] = {}
    for metric in missing_metrics(hello):
        field = FIELD_OF.get(metric)
        if field is not None:
            by_field.setdefault(field, []).append(metric)
    return tuple((f, not_collected_text(ms)) for f, ms in sorted(by_field.items()))
