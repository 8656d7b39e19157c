"""What one folded item shows about its host: the findings judged from a hello (how the host
is built) and from each sample (what it shows now, its GPU count against the inventory or its
peers, its PCIe chains).

The fold (``probes.fleet_state.HostState``) stores what these return and merges it; the
judging is here, with the rest of the judgements (issue #38's clean-up of the fold).
"""

from __future__ import annotations

from dataclasses import replace

from probes.analysis.allocation import (
    HoldTracker,
    idle_allocation_findings,
    stray_process_findings,
)
from probes.analysis.collected import collection_findings
from probes.analysis.findings import (
    Finding,
    host_findings,
    link_chain_findings,
    sample_findings,
    topology_findings,
)
from probes.analysis.gpu_peers import PeerCounts
from probes.analysis.limits import DetectorLimits
from probes.analysis.reachability import gpu_count_finding
from probes.history import HostHistory
from probes.wire.compact import listed_gpus
from probes.wire.samples import Hello, HostSample


def hello_layout_findings(host: str, hello: Hello) -> list[Finding]:
    """How the host is built, from its hello: topology, PCIe chains, blind checks."""
    return (topology_findings(host, hello) + link_chain_findings(host, hello, hello.pcie)
            + collection_findings(host, hello))


def gpu_short_finding(host: str, expect_gpus: int | None, hello: Hello | None,
                      sample: HostSample, peers: PeerCounts | None) -> Finding | None:
    """GPUs the host never listed, counted against the inventory's ``expect_gpus`` or, where
    it names none, against what most hosts of the same model list (``peers``).

    The host's own GPU list (its hello) against the inventory: a GPU it lists and then loses
    is gpu-lost's, per GPU; one it does not list at all is counted here.
    """
    listed = max(len(hello.facts.gpus) if hello else 0, listed_gpus(sample))
    short = gpu_count_finding(host, expect_gpus, listed, sample.ts)
    peer = peers.expected(host) if peers is not None and short is None \
        and expect_gpus is None else None
    if peer is not None:
        short = gpu_count_finding(host, peer[0], listed, sample.ts)
        if short is not None:
            short = replace(short, evidence=f"{listed} GPUs listed; {peer[1]} hosts of "
                            f"the same model list {peer[0]}")
    return short


def sample_judged(host: str, hello: Hello | None, sample: HostSample, history: HostHistory,
                  holds: HoldTracker, limits: DetectorLimits, expect_gpus: int | None,
                  peers: PeerCounts | None) -> list[Finding]:
    """What the newest sample shows (``HostFindings.take_sample``'s input): its instant
    findings, the host's own, idle allocations and stray processes (``history`` and
    ``holds`` already hold the sample), GPUs never listed."""
    before, idle, after = sample_judged_parts(host, hello, sample, history, holds, limits,
                                              expect_gpus, peers)
    return before + idle + after


def sample_judged_parts(host: str, hello: Hello | None, sample: HostSample,
                        history: HostHistory, holds: HoldTracker, limits: DetectorLimits,
                        expect_gpus: int | None, peers: PeerCounts | None
                        ) -> tuple[list[Finding], list[Finding], list[Finding]]:
    """``sample_judged`` in the three parts ``SampleJudge`` keeps apart: the instant and
    host findings, the idle allocations (time-dependent), the strays and the GPU count."""
    before = sample_findings(host, hello, sample, limits) + host_findings(host, sample)
    idle = idle_allocation_findings(host, history, sample, holds, limits)
    after = stray_process_findings(host, sample, limits)
    short = gpu_short_finding(host, expect_gpus, hello, sample, peers)
    if short is not None:
        after.append(short)
    return before, idle, after


def sample_chains(host: str, hello: Hello | None, sample: HostSample) -> list[Finding] | None:
    """The PCIe chains as the sample reads them (None: the sample reads none, or the host's
    GPUs are not known yet; the kept chains stand)."""
    if sample.pcie is None or hello is None:
        return None
    return link_chain_findings(host, hello, sample.pcie)
