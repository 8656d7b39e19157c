"""Preflight checks on the host as it is now, not as its agent found it at start.

A GPU that fell off the bus after the hello, a GPU in thermal slowdown, a Fabric Manager
that does not match the driver: each would let a long run start and then fail.  The GPU
verdicts come from ``judge.judge_gpus`` (the same words every screen shows), the
temperatures and throttling from ``judge.temp_level`` / ``judge.slowing_reasons`` under the
operator's limits: preflight never judges a GPU differently from the rest of the console.
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.analysis.judge import (
    THROTTLE_REASONS,
    GpuJudgement,
    GpuVerdict,
    TempLevel,
    judge_gpus,
)
from probes.analysis.limits import DetectorLimits
from probes.analysis.preflight_base import F, HostChecks, HostInput, P, S, W
from probes.rules.parsers import topo
from probes.wire.samples import GpuState, Hello

NVSWITCH_MIN_GPUS = 8
"""All-to-all NVLink among this many GPUs or more goes through NVSwitches (an HGX 8-GPU
board); a 4-GPU board links its GPUs directly and needs no Fabric Manager."""


def gpu_count(h: HostChecks, inp: HostInput, det: DetectorLimits) -> None:
    """GPUs answering now against ``expect_gpus`` and every GPU the hello listed.

    Without a sample yet, the hello's list is all there is to count, and the detail says so.
    """
    assert inp.hello is not None
    listed = inp.hello.facts.gpus
    expect = inp.expect_gpus
    threshold = (f"= {expect} (expect_gpus), all answering" if expect is not None
                 else "every GPU of the hello answering")
    if inp.sample is None:
        n = len(listed)
        if expect is None:
            h.add("gpu-count", P if n else S, n, "expect_gpus not set",
                  f"{n} GPU(s) in the agent's hello (no sample yet)" if n
                  else "no GPU seen; set expect_gpus to make this a check")
        else:
            h.add("gpu-count", P if n == expect else F, n, threshold,
                  f"{n} GPU(s) in the agent's hello, {expect} expected (no sample yet)")
        return
    judged = judge_gpus(inp.sample, inp.hello, inp.findings, det)
    bus = {g.index: g.bus_id for g in listed}
    gone = [_gone(j, bus.get(j.index)) for j in judged
            if j.verdict in (GpuVerdict.LOST, GpuVerdict.UNRESPONSIVE)]
    gone += [f"a GPU LOST ({g.bus_id or '?'})" for g in inp.sample.gpus
             if g.index < 0 and g.state is GpuState.LOST]
    answering = sum(1 for j in judged
                    if j.verdict not in (GpuVerdict.LOST, GpuVerdict.UNRESPONSIVE))
    wanted = expect if expect is not None else len(listed)
    if not wanted and not answering:
        h.add("gpu-count", S, 0, "expect_gpus not set",
              "no GPU seen; set expect_gpus to make this a check")
    elif gone or answering != wanted:
        # the verdict leads: a table cut at 25 characters still says which GPU and what
        h.add("gpu-count", F, answering, threshold,
              f"{'; '.join(gone)}: {answering} of {wanted} GPUs answer now" if gone
              else f"{answering} GPUs answer now, {wanted} expected")
    else:
        h.add("gpu-count", P, answering, threshold,
              f"{answering} GPUs as expected, all answering now")


def _gone(j: GpuJudgement, bus_id: str | None) -> str:
    where = f" ({bus_id})" if bus_id else ""
    return f"GPU{j.index} {j.verdict.value.upper()}{where}"


def gpu_heat(h: HostChecks, inp: HostInput, det: DetectorLimits) -> None:
    """Temperature against each board's slowdown threshold, and throttling, in the newest
    sample: a GPU already in thermal slowdown will run the job at a fraction of its speed."""
    assert inp.hello is not None
    if inp.sample is None or not inp.sample.gpus:
        h.add("gpu-temperature", S, None, "below the hot margin", "no sample")
        h.add("gpu-throttle", S, None, "no slowdown", "no sample")
        return
    judged = {j.index: j for j in judge_gpus(inp.sample, inp.hello, inp.findings, det)}
    slowdown = {g.index: g.temp_slowdown_c for g in inp.hello.facts.gpus}
    hot: list[str] = []
    warm: list[str] = []
    readings = 0
    for g in inp.sample.gpus:
        j = judged.get(g.index)
        if j is None:
            continue
        for level, temp, what, limit in ((j.temp, g.temp_c, "", slowdown.get(g.index)),
                                         (j.mem_temp, g.temp_mem_c, " memory", None)):
            if temp is None:
                continue
            readings += 1
            text = f"GPU{g.index}{what} {temp:.0f} °C" + (
                f" (slowdown {limit:.0f} °C)" if limit is not None else "")
            if level is TempLevel.HOT:
                hot.append(text)
            elif level is TempLevel.WARM:
                warm.append(text)
    threshold = (f"{det.temp_margin_c:g} °C or more below each GPU's slowdown "
                 f"(warn within {det.temp_warm_margin_c:g} °C)")
    if not readings:
        h.add("gpu-temperature", S, None, threshold, "no temperature reported")
    elif hot:
        h.add("gpu-temperature", F, hot, threshold,
              "hot: " + ", ".join(hot) + " — check airflow and fans before a long run")
    elif warm:
        h.add("gpu-temperature", W, warm, threshold, "warm: " + ", ".join(warm))
    else:
        h.add("gpu-temperature", P, readings, threshold, "every GPU below its hot margin now")
    slow = [(j.index, j.slowing) for j in judged.values() if j.slowing]
    held = [f"GPU{i} {', '.join(r)}" for i, r in slow if set(r) & THROTTLE_REASONS]
    capped = [f"GPU{i} {', '.join(r)}" for i, r in slow if not set(r) & THROTTLE_REASONS]
    earlier = [f"GPU{j.index}" for j in judged.values() if j.throttled and not j.slowing]
    if held:
        h.add("gpu-throttle", F, held, "no slowdown",
              "; ".join(held) + ": clocks held down now")
    elif capped or earlier:
        h.add("gpu-throttle", W, capped + earlier, "no slowdown",
              "; ".join(([f"at the power cap while busy: {', '.join(capped)}"] if capped
                         else []) + ([f"throttled earlier: {', '.join(earlier)}"] if earlier
                                     else [])))
    else:
        h.add("gpu-throttle", P, 0, "no slowdown", "no GPU throttled now")


def fabric_manager(h: HostChecks, inp: HostInput) -> None:
    """On an NVSwitch system Fabric Manager must be the driver's exact version, or it will
    not start and CUDA fails to initialise on every GPU."""
    assert inp.hello is not None
    facts = inp.hello.facts
    fm, driver = facts.software.fabric_manager, facts.driver_version
    threshold = "= the driver's version (NVSwitch systems)"
    if fm is None:
        if nvswitched(inp.hello):
            h.add("fabric-manager", W, None, threshold,
                  "every GPU pair is on NVLink (NVSwitch) but no Fabric Manager was found: "
                  "without nv-fabricmanager running, CUDA cannot start")
        else:
            h.add("fabric-manager", S, None, threshold,
                  "no NVSwitch seen and no Fabric Manager installed")
    elif driver is None:
        h.add("fabric-manager", S, fm, threshold,
              f"Fabric Manager {fm}, driver version not reported")
    elif fm != driver:
        h.add("fabric-manager", F, fm, f"= {driver} (the driver)",
              f"{fm} ≠ driver {driver}: Fabric Manager refuses to start and CUDA init "
              f"fails; install the Fabric Manager of driver {driver}")
    else:
        h.add("fabric-manager", P, fm, f"= {driver} (the driver)",
              f"Fabric Manager {fm} matches the driver")


def nvswitched(hello: Hello) -> bool:
    """Every GPU pair on NVLink among ``NVSWITCH_MIN_GPUS`` or more GPUs (``topo -m``)."""
    if not hello.topo_text or len(hello.facts.gpus) < NVSWITCH_MIN_GPUS:
        return False
    matrix = topo.parse_topo(hello.topo_text.splitlines())
    gpus: Sequence[str] = matrix.gpus
    return len(gpus) >= NVSWITCH_MIN_GPUS and all(
        matrix.links.get(a, {}).get(b, "").startswith("NV")
        for a in gpus for b in gpus if a != b)
