"""A GPU's PCIe link against its siblings': where the link's maximum is not known (a
dcgm-exporter without ``DCGM_FI_DEV_PCIE_MAX_LINK_*``, the default), seven x16 siblings of
the same model say what an x8 one should be.  A link at its own maximum narrower than its
siblings (a riser or slot that caps it) is found the same way."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from probes.analysis import actions as acts
from probes.analysis.findings import Finding
from probes.analysis.judge import is_busy
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.triage import Code, Severity, Step
from probes.wire.samples import GpuSample, Hello

MIN_SIBLINGS = 3
"""GPUs of one model that must agree (a strict majority of them) before one that differs
is judged by them: two GPUs that differ say nothing about which is right."""


def _norm(values: Iterable[int | None]) -> int | None:
    """The value a strict majority (and at least ``MIN_SIBLINGS``) of GPUs share."""
    counts = Counter(values)
    total = sum(counts.values())
    if not counts:
        return None
    value, n = counts.most_common(1)[0]
    return value if n >= MIN_SIBLINGS and 2 * n > total else None


def _alike(gpus: tuple[GpuSample, ...]) -> bool:
    """Every GPU at the same width and generation (or none known)."""
    width, gen = gpus[0].pcie_width, gpus[0].pcie_gen
    return all(g.pcie_width == width and g.pcie_gen == gen for g in gpus)


def sibling_link_findings(host: str, hello: Hello | None, gpus: Iterable[GpuSample],
                          ts: float, skip: set[int] | frozenset[int] = frozenset(),
                          limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """``pcie-link-downgraded`` for each GPU narrower than its siblings of the same model
    (warning, whatever the load: lanes lost stay lost) or at a lower generation while it and
    they are busy (info: idle links train down to save power).  GPUs in ``skip`` already
    have a finding about their link (judged against their own maximum)."""
    gpus = tuple(gpus)
    if not gpus or _alike(gpus):
        return []  # the healthy case: one pass, no allocation
    model = {i.index: i.name for i in hello.facts.gpus} if hello is not None else {}
    groups: dict[str | None, list[GpuSample]] = {}
    for g in gpus:
        if g.index >= 0 and g.pcie_width:
            groups.setdefault(model.get(g.index), []).append(g)
    out: list[Finding] = []
    for siblings in groups.values():
        if len(siblings) < MIN_SIBLINGS or _alike(tuple(siblings)):
            continue
        width = _norm(g.pcie_width for g in siblings if g.pcie_width)
        busy = {g.index: g.pcie_gen for g in siblings
                if g.pcie_gen and is_busy(g.util_pct, limits)}
        gen = _norm(busy.values())
        for g in siblings:
            if g.index in skip:
                continue
            others = len(siblings) - 1
            if width is not None and g.pcie_width and g.pcie_width < width:
                out.append(Finding(
                    Step.GPU, Code.PCIE_LINK_DOWNGRADED, Severity.WARNING,
                    f"GPU {g.index} PCIe x{g.pcie_width} (its siblings run x{width})", host,
                    gpu=g.index, ts=ts, action=acts.ACTION_LINK_WIDTH,
                    extra={"siblings": others, "sibling_width": width}))
            elif gen is not None and g.index in busy and g.pcie_gen and g.pcie_gen < gen:
                out.append(Finding(
                    Step.GPU, Code.PCIE_LINK_DOWNGRADED, Severity.INFO,
                    f"GPU {g.index} PCIe Gen{g.pcie_gen} under load (its siblings run "
                    f"Gen{gen})", host, gpu=g.index, ts=ts, action=acts.ACTION_LINK_GEN,
                    extra={"siblings": others, "sibling_gen": gen}))
    return out
