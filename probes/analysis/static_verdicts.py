"""The static half of a host's per-tick findings, judged once per wire v2 static epoch.

A v2 stream sends its static facts (a GPU's state, ECC, row remapping, NVLinks, PCIe link)
only when they change, and marks every sample built from them with the same
``StaticEpoch``.  ``probes.analysis.findings.sample_findings`` judges those facts once, keeps
the verdicts here on the epoch (``StaticEpoch.findings``) and, on each tick, re-dates them and
judges only the moving numbers (issue 38: judgements recomputed only for what changed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from probes.triage import Severity

if TYPE_CHECKING:
    from probes.analysis.findings import Finding
    from probes.analysis.limits import DetectorLimits
    from probes.wire.samples import Hello


class GpuStatic(NamedTuple):
    """What one GPU's static fields say, for every tick of their epoch."""

    alone: tuple[Finding, ...]  # lost or hung: this and no other finding
    short: Severity | None  # the link's shortfall before the load check (``link_short``)
    link: Finding | None  # the link's finding, on a tick where ``short`` holds
    after: tuple[Finding, ...]  # memory health and NVLinks, after clocks and link


class StaticVerdicts(NamedTuple):
    """The static half of a host's per-tick findings, kept on its ``StaticEpoch``."""

    host: str
    hello: Hello | None
    limits: DetectorLimits
    missing: tuple[Finding, ...]
    gpus: tuple[GpuStatic | None, ...]  # per GPU, in order; None: nothing static to say
    loaded: tuple[int, ...]
    """The GPU positions whose load a tick's judges read even without clock-event reasons:
    a link below its generation (``pcie-link-downgraded`` info counts only while busy).
    Read off ``gpus`` once (``loaded_of``) for ``sample_judge.tick_inputs``, which asks
    every tick of every host (issue 38: reading ``gpus`` there was a tenth of its cost)."""

    def fits(self, host: str, hello: Hello | None, gpus: int,
             limits: DetectorLimits) -> bool:
        """Judged for this host, hello and limits (the epoch fixes the rest) and a sample
        of ``gpus`` GPUs."""
        return self.hello is hello and self.host == host and \
            len(self.gpus) == gpus and (self.limits is limits or self.limits == limits)


def loaded_of(gpus: tuple[GpuStatic | None, ...]) -> tuple[int, ...]:
    """``StaticVerdicts.loaded`` of these verdicts."""
    return tuple(i for i, k in enumerate(gpus) if k is not None and not k.alone
                 and k.link is not None and k.short is Severity.INFO)


def dated(found: tuple[Finding, ...], ts: float) -> list[Finding]:
    """Findings judged on an earlier tick of the same static facts, as of this one: each
    as ``replace(f, ts=ts)`` makes it (no ``__post_init__``, every field an ``__init__``
    one), without the keyword call per field."""
    out = []
    for f in found:
        if f.ts != ts:
            g = _new(type(f))
            _set(g, "__dict__", {**f.__dict__, "ts": ts})
            f = g
        out.append(f)
    return out


_new = object.__new__
_set = object.__setattr__
