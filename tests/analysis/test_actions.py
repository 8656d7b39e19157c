"""Every finding says what to do (issue #36, item 6).

The review found findings with no action at all (``pcie-link-downgraded``,
``disk-saturated``, ``gpu-lost``, ``clocks-throttled`` from a sample): triage showed the
problem and nothing to do about it.  Here every code a finding can carry is walked, the
named ones are raised through the paths that really raise them, and the demo's ``gpu-b01``
shows the data starvation the README promises.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import time

import pytest

from probes.analysis.actions import WITHOUT_ACTION, default_actions
from probes.analysis.detectors.clocks import detect_temp_near_slowdown
from probes.analysis.findings import Finding, link_chain_findings, sample_findings
from probes.config.fleet import demo_fleet
from probes.fleet_state import FleetState
from probes.history import HostHistory
from probes.sources.agents import AgentFleetBackend
from probes.triage import Code, Severity, Step
from probes.wire.samples import DiskStats, GpuState, Hello, HostSample, PcieLink
from tests.analysis.test_detectors import agent_history
from tests.conftest import REPO
from tests.support.builders import gpu, hello, sample

CARRIED = [c for c in Code if c not in WITHOUT_ACTION]


@pytest.mark.parametrize("code", CARRIED, ids=lambda c: c.value)
def test_every_code_a_finding_can_carry_has_an_action(code: Code) -> None:
    action = default_actions().get(code)
    assert action and len(action) > 40 and action[0].isupper(), (code, action)


def _finding_calls() -> list[tuple[str, int, ast.Call]]:
    out = []
    for path in sorted((REPO / "probes").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out += [(str(path.relative_to(REPO)), node.lineno, node) for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "Finding"]
    return out


def test_every_finding_probes_builds_is_given_an_action() -> None:
    """Before: 17 places built findings with none (gpu-lost, clocks-throttled,
    pcie-link-downgraded, disk-saturated, nvlink-down, ecc-uncorrectable …)."""
    calls = _finding_calls()
    assert len(calls) >= 40, "the scan no longer sees the finding builders"
    missing = [f"{p}:{n}" for p, n, call in calls
               if not any(k.arg == "action" for k in call.keywords)
               and not (len(call.args) > 1 and ast.unparse(call.args[1]) == "Code.RECOVERED")]
    assert missing == []


def test_a_finding_made_from_a_rule_without_an_action_gets_its_codes() -> None:
    from probes.analysis.findings import log_findings
    from probes.rules.logrules.live import LiveHit
    from probes.rules.result import ExplainFinding

    bare = ExplainFinding(Step.SYSLOG, Code.PCIE_AER, Severity.WARNING, 1, "AER: x", "AER",
                          action="")
    [f] = log_findings("h", None, [LiveHit(bare, "kernel", 1.0)])
    assert f.action == default_actions()[Code.PCIE_AER]
    assert frozenset({Code.RECOVERED}) == WITHOUT_ACTION


def _one(found: list[Finding], code: str) -> Finding:
    [f] = [f for f in found if f.code == code]
    return f


def test_the_sample_findings_say_what_to_do() -> None:
    """The four the issue names, raised from samples as the console raises them (before,
    each had ``action=None``)."""
    h = hello()
    gpus = (gpu(0, pcie_width=8), gpu(1, clock_reasons=("hw_thermal_slowdown",)),
            gpu(2, state=GpuState.LOST), gpu(3, clock_reasons=("sw_power_cap",)),
            *(gpu(i) for i in range(4, 7)))  # GPU 7 is not in the sample at all
    found = sample_findings("h", h, sample(gpus, disks=(DiskStats("nvme0n1", util=99.0,
                                                                   aqu_sz=31.0),)))
    link = _one(found, "pcie-link-downgraded")
    assert link.action is not None and "Reseat" in link.action and "LnkSta" in link.action
    disk = _one(found, "disk-saturated")
    assert disk.action is not None and "iotop" in disk.action
    lost = [f for f in found if f.code == "gpu-lost"]
    assert {f.gpu for f in lost} == {2, 7}
    assert all(f.action and "Xid 79" in f.action for f in lost)
    hot = next(f for f in found if f.code == "clocks-throttled" and f.gpu == 1)
    capped = next(f for f in found if f.code == "clocks-throttled" and f.gpu == 3)
    assert hot.action is not None and "fans" in hot.action
    assert capped.action is not None and "Power Limit" in capped.action
    assert all(f.action for f in found), [f.code for f in found if not f.action]
    chain = link_chain_findings("h", h, {"0000:00:00.0": (
        PcieLink("0000:00:00.0", 32.0, 8, 32.0, 16),)})
    assert chain and all(f.action and "Reseat" in f.action for f in chain)


def test_temp_at_or_past_slowdown_says_so() -> None:
    """``throttle:5`` heats GPU 5 to its 90 °C slowdown: "within 5 °C of" was wrong there."""
    first, h = agent_history("throttle:5", 240, 10)
    [f] = detect_temp_near_slowdown("h", h, first)
    assert f.extra["reached"] is True
    assert "at/past its 90 °C slowdown" in f.summary and "within" not in f.summary
    assert f.action is not None and f.action.startswith("GPU5 reached its slowdown")


def _warm_history(temp_c: float) -> tuple[Hello, HostHistory]:
    """GPU 0 at ``temp_c`` for ten minutes, its slowdown at 90 °C."""
    h = hello()
    gpus = tuple(dataclasses.replace(g, temp_slowdown_c=90.0) for g in h.facts.gpus)
    h = dataclasses.replace(h, facts=dataclasses.replace(h.facts, gpus=gpus))
    history = HostHistory()
    for k in range(61):
        history.add(HostSample(ts=1000.0 + 10 * k, seq=k,
                               gpus=(gpu(0, temp_c=temp_c), *(gpu(i) for i in range(1, 8)))))
    return h, history


def test_temp_under_slowdown_stays_within() -> None:
    h, history = _warm_history(87.0)
    [near] = detect_temp_near_slowdown("h", history, h)
    assert "within 5 °C of its 90 °C slowdown" in near.summary
    assert near.extra["reached"] is False and "before it starts slowing" in (near.action or "")
    h, history = _warm_history(91.0)
    [past] = detect_temp_near_slowdown("h", history, h)
    assert "at/past its 90 °C slowdown" in past.summary


async def test_the_demos_gpu_b01_shows_the_data_starvation_the_readme_promises() -> None:
    """Its loader stalled for 48 s of every 120 s, sampled every 60 simulated seconds: every
    sample fell in the busy part, and only ``disk-saturated`` ever showed."""
    specs = [s for s in demo_fleet() if s.name == "gpu-b01"]
    fleet = FleetState(specs)
    task = asyncio.create_task(AgentFleetBackend(specs).run(
        lambda h, i: fleet.apply(h, i, time.time())))
    host = fleet.hosts["gpu-b01"]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
                f.code == "data-starvation" for f in host.findings()):
            await asyncio.sleep(0.25)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    starved = _one(host.findings(), "data-starvation")
    assert "nvme0n1" in starved.summary and starved.action
    assert {f.code for f in host.findings()} >= {"data-starvation", "disk-saturated"}
