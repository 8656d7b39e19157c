"""Preflight: check each server against the training-server rules of thumb before a long run.

Pure functions over what is known of each host now (its hello, its newest sample and the
findings standing against it), so the same checks serve ``rigwatch preflight``, the
console's preflight screen and tests on simulated or real host facts.  Every check reports
its value, the threshold it was held to and a verdict; a check that cannot be judged (no
GPU, no topology) is ``skip``, never a pass invented from a missing value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from probes.analysis.judge import CoreCount, core_count, cores_per_gpu
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits, PreflightLimits
from probes.analysis.preflight_base import (
    CheckResult,
    CheckVerdict,
    F,
    HostChecks,
    HostInput,
    P,
    S,
    W,
)
from probes.analysis.preflight_now import fabric_manager, gpu_count, gpu_heat
from probes.rules.fabric import ACTIVE, PortView, parse_rate, phys_state, port_state, port_verdicts
from probes.rules.parsers import topo
from probes.triage import Code
from probes.wire.samples import GpuSample, Hello, Nic, PcieLink

GIB = 1024**3

__all__ = ["CheckResult", "CheckVerdict", "HostInput", "by_host", "check_fleet", "check_host",
           "exit_status", "json_report", "text_report", "versions", "worst"]


def check_host(inp: HostInput, limits: PreflightLimits | None = None,
               detectors: DetectorLimits | None = None) -> list[CheckResult]:
    """Every per-host check, in checklist order (GPUs, memory and CPU, PCIe, network,
    storage, power, software).

    GPU count, temperature and throttling are judged on the newest sample and the findings
    (``preflight_now``) under the operator's ``detectors`` limits, so the verdict is the
    host's now, not its agent's start.
    """
    lim = limits or PreflightLimits()
    det = detectors or DEFAULT_LIMITS
    h = HostChecks(inp.name)
    if inp.hello is None:
        if inp.failure is None:
            h.add("reachable", S, None, "an answer from the agent", "no answer yet")
        else:
            h.add("reachable", F, None, "an answer from the agent",
                  f"no answer from the agent: {inp.failure}")
        return h.out
    if inp.failure is not None:  # down now: what follows is its last answer, said so first
        h.add("reachable", F, inp.failure, "streaming now",
              f"not answering now ({inp.failure}); the checks below read its last answer")
    gpu_count(h, inp, det)
    for check in _CHECKS:
        check(h, inp, lim)
        if check is _gpus:
            gpu_heat(h, inp, det)
    fabric_manager(h, inp)
    return h.out


# --- GPUs ------------------------------------------------------------------------------------

def _gpus(h: HostChecks, inp: HostInput, lim: PreflightLimits) -> None:
    assert inp.hello is not None
    gpus = inp.hello.facts.gpus
    n = len(gpus)
    if not n:
        return
    names = Counter(g.name or "?" for g in gpus)
    model = names.most_common(1)[0][0]
    if len(names) > 1:
        odd = [f"GPU{g.index}" for g in gpus if (g.name or "?") != model]
        h.add("gpu-model", F, sorted(names), "one model",
              f"mixed models: {', '.join(odd)} differ from {model}")
    elif lim.expect_gpu_model and lim.expect_gpu_model not in model:
        h.add("gpu-model", F, model, f"contains {lim.expect_gpu_model!r}",
              f"{model} is not the expected {lim.expect_gpu_model}")
    else:
        h.add("gpu-model", P, model, f"contains {lim.expect_gpu_model!r}"
              if lim.expect_gpu_model else "one model", f"{n} × {model}")
    mems = Counter(round(g.mem_total_mib or 0) for g in gpus)
    if len(mems) > 1:
        usual = mems.most_common(1)[0][0]
        odd = [f"GPU{g.index} {g.mem_total_mib or 0:g} MiB" for g in gpus
               if round(g.mem_total_mib or 0) != usual]
        h.add("gpu-memory", W, sorted(mems), "equal on every GPU",
              f"{', '.join(odd)} differ from {usual} MiB (retired memory or a different SKU)")
    else:
        h.add("gpu-memory", P if gpus[0].mem_total_mib else S, gpus[0].mem_total_mib,
              "equal on every GPU", f"{gpus[0].mem_total_mib or 0:g} MiB each")
    _gpu_flag(h, "persistence-mode", inp, lambda i: i.persistence_mode,
              lambda s: s.persistence, want=True, severity=W,
              why="off: every job start pays the driver's initialisation and the GPU may "
                  "fall back to a low power state between jobs; `nvidia-smi -pm 1` or "
                  "nvidia-persistenced")
    _gpu_flag(h, "ecc-mode", inp, lambda i: i.ecc_mode, None, want=True, severity=W,
              why="off: memory errors go unseen and uncorrected")
    pending = [f"GPU{g.index}" for g in gpus
               if g.ecc_mode_pending is not None and g.ecc_mode is not None
               and g.ecc_mode_pending != g.ecc_mode]
    if pending:
        h.add("ecc-pending", W, pending, "pending = current",
              f"ECC mode changes at the next reset on {', '.join(pending)}")
    _gpu_flag(h, "mig-mode", inp, lambda i: i.mig_mode, None, want=lim.mig_expected,
              severity=W, why="MIG partitions a GPU; a training job sees only one slice")


def _gpu_flag(h: HostChecks, check: str, inp: HostInput, from_info: Callable[..., bool | None],
              from_sample: Callable[[GpuSample], bool | None] | None, *, want: bool,
              severity: CheckVerdict, why: str) -> None:
    """A per-GPU on/off setting that should be ``want`` on every GPU, and equal on all."""
    assert inp.hello is not None
    values: dict[int, bool] = {}
    for g in inp.hello.facts.gpus:
        v = from_info(g)
        if v is not None:
            values[g.index] = v
    if from_sample is not None and inp.sample is not None:
        for s in inp.sample.gpus:
            v = from_sample(s)
            if v is not None and s.index >= 0:
                values.setdefault(s.index, v)
    word = "on" if want else "off"
    if not values:
        h.add(check, S, None, f"{word} on every GPU", "not reported by this GPU or driver")
        return
    wrong = sorted(i for i, v in values.items() if v is not want)
    if wrong:
        h.add(check, severity, {f"GPU{i}": values[i] for i in sorted(values)},
              f"{word} on every GPU", f"{'on' if not want else 'off'} on "
              f"{', '.join(f'GPU{i}' for i in wrong)}: {why}")
    else:
        h.add(check, P, word, f"{word} on every GPU", f"all {len(values)} GPUs {word}")


# --- memory, CPU, swap -----------------------------------------------------------------------

def _memory(h: HostChecks, inp: HostInput, lim: PreflightLimits) -> None:
    assert inp.hello is not None
    f = inp.hello.facts
    gpu_mib = sum(g.mem_total_mib or 0.0 for g in f.gpus)
    if not f.mem_total_bytes or not gpu_mib:
        h.add("system-memory", S, f.mem_total_bytes, f"≥ {lim.mem_ratio_warn:g}× GPU memory",
              "system or GPU memory unknown")
    else:
        ratio = f.mem_total_bytes / (gpu_mib * 1024**2)
        verdict = F if ratio < lim.mem_ratio_fail else W if ratio < lim.mem_ratio_warn else P
        h.add("system-memory", verdict, round(ratio, 2),
              f"≥ {lim.mem_ratio_warn:g}× GPU memory (fail under {lim.mem_ratio_fail:g}×)",
              f"{f.mem_total_bytes / GIB:.0f} GiB RAM for {gpu_mib / 1024:.0f} GiB of GPU "
              f"memory ({ratio:.2f}×)")
    cores, n = f.cpu_cores_physical, len(f.gpus)
    per = cores_per_gpu(cores, n)
    if per is None:
        h.add("cpu-cores-per-gpu", S, cores, f"{lim.cores_per_gpu_min:g}–"
              f"{lim.cores_per_gpu_max:g} physical cores per GPU", "cores or GPUs unknown")
    else:
        count = core_count(per, lim)
        ok = count is CoreCount.OK
        h.add("cpu-cores-per-gpu", P if ok else W, round(per, 1),
              f"{lim.cores_per_gpu_min:g}–{lim.cores_per_gpu_max:g} physical cores per GPU",
              f"{cores} physical cores for {n} GPUs ({per:.1f} each)"
              + (": data loaders will starve the GPUs" if count is CoreCount.FEW else ""))
    used = f.swap_used_bytes
    if used is None and inp.sample is not None:
        used = inp.sample.host.swap_used_bytes
    total = f.swap_total_bytes
    if total is None:
        h.add("swap", S, None, "configured, not in use", "swap not reported")
    elif used is not None and used > lim.swap_used_warn_bytes:
        h.add("swap", W, used, f"in use ≤ {lim.swap_used_warn_bytes // 1024**2} MiB",
              f"{used / GIB:.1f} GiB of swap in use: the host is short of memory and will "
              "stall the job")
    elif total == 0 and lim.require_swap:
        h.add("swap", W, 0, "configured", "no swap configured: memory pressure goes "
              "straight to the OOM killer")
    else:
        h.add("swap", P, total, "configured, not in use",
              f"{total / GIB:.0f} GiB configured, {((used or 0) / 1024**2):.0f} MiB in use")


# --- PCIe and topology -----------------------------------------------------------------------

def _link_text(link: PcieLink) -> str:
    return (f"Gen{_gen(link.speed_gts)} x{link.width} (capable Gen{_gen(link.max_speed_gts)} "
            f"x{link.max_width})")


def _gen(gts: float | None) -> str:
    table = {2.5: "1", 5.0: "2", 8.0: "3", 16.0: "4", 32.0: "5", 64.0: "6"}
    return table.get(gts or 0.0, "?") if gts else "?"


def _pcie(h: HostChecks, inp: HostInput, lim: PreflightLimits) -> None:
    assert inp.hello is not None
    chains = inp.hello.pcie
    samples = {s.index: s for s in inp.sample.gpus} if inp.sample else {}
    bad: list[str] = []
    slow: list[str] = []
    checked = 0
    for gpu in inp.hello.facts.gpus:
        chain = chains.get(gpu.bus_id or "", ())
        s = samples.get(gpu.index)
        if not chain and s is None:
            continue
        checked += 1
        narrow = [link for link in chain if link.width and link.max_width
                  and link.width < link.max_width]
        if s is not None and s.pcie_width and s.pcie_width_max and s.pcie_width < s.pcie_width_max:
            bad.append(f"GPU{gpu.index} ({gpu.bus_id}) x{s.pcie_width} (capable "
                       f"x{s.pcie_width_max})")
        elif narrow:
            where = narrow[0]
            what = "GPU" if where.address == gpu.bus_id else f"bridge {where.address} above it"
            bad.append(f"GPU{gpu.index} ({gpu.bus_id}): {what} at {_link_text(where)}")
        elif chain and chain[0].max_width and chain[0].max_width < 16:
            bad.append(f"GPU{gpu.index} ({gpu.bus_id}) slot capable of x{chain[0].max_width} "
                       "only")
        loaded = s is not None and (s.util_pct or 0) > 10
        low_gen = (s is not None and s.pcie_gen and s.pcie_gen_max
                   and s.pcie_gen < s.pcie_gen_max)
        if loaded and low_gen and s is not None:
            slow.append(f"GPU{gpu.index} Gen{s.pcie_gen} under load (capable "
                        f"Gen{s.pcie_gen_max})")
    if not checked:
        h.add("pcie-link", S, None, "max generation and x16", "no PCIe link information")
    elif bad:
        h.add("pcie-link", F, bad, "max generation and x16",
              "trained below capability: " + "; ".join(bad) + " — reseat the card or check "
              "the riser/slot")
    elif slow:
        h.add("pcie-link", W, slow, "max generation and x16", "; ".join(slow))
    else:
        h.add("pcie-link", P, checked, "max generation and x16",
              f"all {checked} GPU links at full width")
    _topology(h, inp)


def _topology(h: HostChecks, inp: HostInput) -> None:
    assert inp.hello is not None
    hello = inp.hello
    nics = [n for n in hello.nics if n.kind == "infiniband"] or list(hello.nics)
    gpu_numa = {g.bus_id: _chain_numa(hello.pcie.get(g.bus_id or "", ()))
                for g in hello.facts.gpus}
    nic_numa = {n.numa_node for n in nics if n.numa_node is not None}
    if nics and nic_numa and any(v is not None for v in gpu_numa.values()):
        far = [f"GPU{g.index} (NUMA {gpu_numa[g.bus_id]})" for g in hello.facts.gpus
               if gpu_numa[g.bus_id] is not None and gpu_numa[g.bus_id] not in nic_numa]
        h.add("gpu-nic-numa", W if far else P, far or sorted(nic_numa),
              "a NIC on every GPU's NUMA node",
              ("no NIC on the NUMA node of " + ", ".join(far) + ": its traffic crosses the "
               "inter-socket link") if far else
              f"NICs on NUMA node(s) {', '.join(map(str, sorted(nic_numa)))}, matching the GPUs")
    else:
        h.add("gpu-nic-numa", S, None, "a NIC on every GPU's NUMA node",
              "NUMA placement of GPUs or NICs not reported")
    if not hello.topo_text:
        h.add("gpu-pairs-sys", S, None, "no GPU pair through SYS", "no nvidia-smi topo -m")
        return
    matrix = topo.parse_topo(hello.topo_text.splitlines())
    pairs = sorted({tuple(sorted((a, b))) for a in matrix.gpus
                    for b, cell in matrix.links.get(a, {}).items()
                    if b in matrix.gpus and b != a and cell == "SYS"})
    nvlink = any(cell.startswith("NV") for row in matrix.links.values() for cell in row.values())
    shown = [f"{a}–{b}" for a, b in pairs]
    if not pairs:
        h.add("gpu-pairs-sys", P, 0, "no GPU pair through SYS",
              "every GPU pair is on one socket or NVLink")
    elif nvlink:
        h.add("gpu-pairs-sys", P, shown, "no GPU pair through SYS",
              f"{len(pairs)} pair(s) cross sockets over PCIe but NVLink carries their traffic")
    else:
        h.add("gpu-pairs-sys", W, shown, "no GPU pair through SYS",
              f"{len(pairs)} GPU pair(s) talk across the inter-socket link (SYS) and there is "
              "no NVLink")


def _chain_numa(chain: Sequence[PcieLink]) -> int | None:
    for link in chain:
        if link.numa_node is not None and link.numa_node >= 0:
            return link.numa_node
    return None


# --- network ---------------------------------------------------------------------------------

def _network(h: HostChecks, inp: HostInput, lim: PreflightLimits) -> None:
    assert inp.hello is not None
    ib = [n for n in inp.hello.nics if n.kind == "infiniband"]
    if ib:
        _ib_ports(h, inp, ib, lim)
    else:
        h.add("ib-ports", W if lim.require_ib else P, 0, "InfiniBand/RoCE present"
              if lim.require_ib else "not required",
              "no InfiniBand/RoCE device: multi-node collectives would run over TCP"
              if lim.require_ib else "no InfiniBand/RoCE device (not required)")
    eth = [n for n in inp.hello.nics if n.kind == "net"]
    up = [n for n in eth if (n.state or "").lower() == "up" and n.speed_mbps]
    fastest = max((n.speed_mbps or 0 for n in up), default=0)
    if not eth:
        h.add("ethernet", S, None, f"≥ {lim.ethernet_min_mbps} Mb/s", "no Ethernet reported")
    elif ib or fastest >= lim.ethernet_min_mbps:
        h.add("ethernet", P, _speeds(up), f"≥ {lim.ethernet_min_mbps} Mb/s without IB",
              "up: " + (", ".join(f"{n.name} {n.speed_mbps} Mb/s" for n in up) or "none"))
    else:
        h.add("ethernet", W, _speeds(up), f"≥ {lim.ethernet_min_mbps} Mb/s without IB",
              f"fastest Ethernet is {fastest} Mb/s and there is no InfiniBand")


def _ib_ports(h: HostChecks, inp: HostInput, ib: list[Nic], lim: PreflightLimits) -> None:
    """Every compute port Active at the expected rate (``ib_rate_gbs``, else the rate of its
    siblings), judged as the console judges it (``probes.rules.fabric``); the compute ports
    are the host's largest set of one link layer and adapter model."""
    models = {n.name: n.hca_type for n in ib}
    if inp.ports is not None:
        ports = [PortView(p.hca, p.port, port_state(p.state), p.phys_state, p.rate_gbs,
                          p.link_layer, models.get(p.hca)) for p in inp.ports]
    else:
        ports = [PortView(n.name, p.port, port_state(p.state), phys_state(p.phys_state),
                          parse_rate(p.rate), p.link_layer, n.hca_type)
                 for n in ib for p in n.ports]
    verdicts = {v.code: v for v in port_verdicts(ports)}
    groups = Counter(p.sibling_key for p in ports)
    compute = [p for p in ports if groups and p.sibling_key == groups.most_common(1)[0][0]]
    want = lim.ib_rate_gbs or max((p.rate_gbs or 0.0 for p in compute if p.state == ACTIVE),
                                  default=0.0)
    slow = [p for p in compute if p.state == ACTIVE and p.rate_gbs is not None
            and p.rate_gbs < want]
    rates = sorted({f"{p.rate_gbs:g} Gb/s" for p in ports if p.rate_gbs is not None})
    value = {"hcas": len(ib), "rates": rates}
    threshold = f"every compute port Active at {want:g} Gb/s" if want else \
        "every compute port Active"
    down = verdicts.get(Code.IB_PORT_DOWN)
    if down is not None:
        h.add("ib-ports", F, value, threshold, f"not active: {down.summary}")
    elif slow:
        h.add("ib-ports", F if lim.ib_rate_gbs else W, value, threshold,
              "below the expected rate: " + ", ".join(f"{p.name} at {p.rate_gbs:g} Gb/s"
                                                      for p in slow))
    else:
        h.add("ib-ports", P, value, threshold,
              f"{len(ib)} HCA(s), {len(ports)} port(s) Active at {', '.join(rates)}")


def _speeds(nics: Iterable[Nic]) -> dict[str, int | None]:
    return {n.name: n.speed_mbps for n in nics}


# --- storage ---------------------------------------------------------------------------------

def _storage(h: HostChecks, inp: HostInput, lim: PreflightLimits) -> None:
    assert inp.hello is not None
    devices = inp.hello.facts.block_devices
    nvme = [d.name for d in devices if d.transport == "nvme" or d.name.startswith("nvme")]
    if not devices:
        h.add("nvme", S, None, "an NVMe device", "block devices not reported")
    else:
        h.add("nvme", P if nvme else W, nvme, "an NVMe device",
              f"NVMe: {', '.join(nvme)}" if nvme else
              "no NVMe device: hot data on SATA/SAS or network storage may starve the GPUs")
    for ds in inp.hello.datasets:
        name = f"dataset {ds.path}"
        if ds.device is None:
            h.add("dataset-device", W, None, "on a local device",
                  f"{name}: device unknown (a network or missing path)")
        else:
            on_nvme = ds.device.startswith("nvme")
            h.add("dataset-device", P if on_nvme else W, ds.device, "on NVMe",
                  f"{name} on {ds.device}" + ("" if on_nvme else ", not NVMe"))
        if ds.free_bytes is None or not ds.total_bytes:
            h.add("dataset-free", S, None, f"≥ {lim.dataset_free_warn_pct:g} % free",
                  f"{name}: free space not reported")
            continue
        pct = 100.0 * ds.free_bytes / ds.total_bytes
        verdict = (F if pct < lim.dataset_free_fail_pct else
                   W if pct < lim.dataset_free_warn_pct else P)
        h.add("dataset-free", verdict, round(pct, 1),
              f"≥ {lim.dataset_free_warn_pct:g} % free (fail under "
              f"{lim.dataset_free_fail_pct:g} %)",
              f"{name}: {ds.free_bytes / GIB:.0f} GiB free of {ds.total_bytes / GIB:.0f} GiB")


# --- power -----------------------------------------------------------------------------------

def _power(h: HostChecks, inp: HostInput, lim: PreflightLimits) -> None:
    assert inp.hello is not None
    if inp.sample is None or not inp.sample.gpus:
        h.add("power-headroom", S, None, f"< {lim.power_pinned_pct:g} % of the limit",
              "no sample")
        return
    pinned, lowered = [], []
    defaults = {g.index: g.power_limit_default_w for g in inp.hello.facts.gpus}
    for s in inp.sample.gpus:
        if s.power_w and s.power_limit_w and 100.0 * s.power_w / s.power_limit_w >= \
                lim.power_pinned_pct:
            pinned.append(f"GPU{s.index} {s.power_w:.0f}/{s.power_limit_w:.0f} W")
        default = defaults.get(s.index)
        if default and s.power_limit_w and s.power_limit_w < default - 1:
            lowered.append(f"GPU{s.index} {s.power_limit_w:.0f} W (default {default:.0f} W)")
    if lowered:
        h.add("power-headroom", W, lowered, "limit = default", "power limit lowered: "
              + ", ".join(lowered))
    elif pinned:
        h.add("power-headroom", W, pinned, f"< {lim.power_pinned_pct:g} % of the limit",
              "at the power limit: " + ", ".join(pinned) + " (clocks drop when it persists)")
    else:
        h.add("power-headroom", P, len(inp.sample.gpus), f"< {lim.power_pinned_pct:g} % of "
              "the limit", "headroom on every GPU in this sample")


# --- software --------------------------------------------------------------------------------

def versions(hello: Hello) -> dict[str, str | None]:
    """The versions preflight compares across the fleet, by name."""
    f = hello.facts
    sw = f.software
    return {"os": f.os_name, "kernel": f.kernel, "driver": f.driver_version,
            "cuda": f.cuda_version, "nvcc": sw.nvcc, "nccl": sw.nccl, "torch": sw.torch,
            "cuda_runtime": sw.cuda_runtime, "fabric_manager": sw.fabric_manager}


def _software(h: HostChecks, inp: HostInput, lim: PreflightLimits) -> None:
    assert inp.hello is not None
    v = versions(inp.hello)
    found = {k: val for k, val in v.items() if val}
    h.add("software", P if v["driver"] else W, found, "driver reported",
          ", ".join(f"{k} {val}" for k, val in found.items()) or "nothing reported")
    runtimes = inp.hello.facts.software.container_runtimes
    h.add("container-runtime", P if runtimes else W, list(runtimes), "one present",
          ", ".join(runtimes) if runtimes else "no container runtime on PATH")


_CHECKS: tuple[Callable[[HostChecks, HostInput, PreflightLimits], None], ...] = (
    _gpus, _memory, _pcie, _network, _storage, _power, _software)


# --- the fleet -------------------------------------------------------------------------------

def check_fleet(inputs: Sequence[HostInput], limits: PreflightLimits | None = None,
                detectors: DetectorLimits | None = None) -> list[CheckResult]:
    """Every host's checks, then the fleet-wide consistency: the odd one out is named."""
    lim = limits or PreflightLimits()
    out: list[CheckResult] = []
    for inp in inputs:
        out.extend(check_host(inp, lim, detectors))
    out.extend(odd_ones_out(inputs, lim))
    return out


def odd_ones_out(inputs: Sequence[HostInput], lim: PreflightLimits) -> list[CheckResult]:
    """For each version that must agree, the hosts that differ from the majority."""
    seen = [(i.name, versions(i.hello)) for i in inputs if i.hello is not None]
    out: list[CheckResult] = []
    if len(seen) < 2:
        return out
    for key in lim.consistent:
        values = Counter(v[key] for _, v in seen if v[key])
        if len(values) < 2:
            continue
        usual, count = values.most_common(1)[0]
        for name, v in seen:
            if v[key] and v[key] != usual:
                verdict = F if key in lim.must_agree else W
                out.append(CheckResult(name, f"consistent-{key}", verdict, v[key],
                                       f"= {usual} (the fleet's)",
                                       f"{key} {v[key]} differs from {usual} on {count} of "
                                       f"{len(seen)} hosts"))
    return out


def worst(results: Iterable[CheckResult]) -> CheckVerdict:
    """The worst verdict among results; ``skip`` only when nothing could be judged."""
    return max((r.verdict for r in results), key=lambda v: v.rank, default=S)


def exit_status(results: Sequence[CheckResult]) -> int:
    """0 all pass, 1 warnings, 2 failures."""
    verdicts = {r.verdict for r in results}
    return 2 if F in verdicts else 1 if W in verdicts else 0


def by_host(results: Iterable[CheckResult]) -> dict[str, list[CheckResult]]:
    """Results grouped by host, in first-seen order."""
    out: dict[str, list[CheckResult]] = {}
    for r in results:
        out.setdefault(r.host, []).append(r)
    return out


REPORT_VERSION = 1
"""Of ``rigwatch preflight --json``'s document."""


def json_report(results: Sequence[CheckResult]) -> dict[str, object]:
    """``rigwatch preflight --json``: the fleet's verdict and exit, every check per host."""
    return {"version": REPORT_VERSION, "verdict": worst(results).value,
            "exit": exit_status(results),
            "hosts": [{"name": name, "verdict": worst(checks).value,
                       "checks": [c.to_json() for c in checks]}
                      for name, checks in by_host(results).items()]}


def text_report(results: Sequence[CheckResult]) -> tuple[list[str], str]:
    """``rigwatch preflight``'s lines (each host's verdict, then its warnings and failures)
    and the one-line count for standard error."""
    grouped = by_host(results)
    width = min(max((len(n) for n in grouped), default=8), 32)
    counts = {v: 0 for v in CheckVerdict}
    lines = []
    for name, checks in grouped.items():
        verdict = worst(checks)
        counts[verdict] += 1
        lines.append(f"{name:<{width}}  "
                     f"{verdict.value.upper() if verdict.rank > 1 else verdict.value}")
        lines += [f"{'':<{width}}    {c.verdict.value:<4} {c.check}: {c.detail}"
                  for c in checks if c.verdict.rank > 1]
    return lines, (f"{len(grouped)} hosts: {counts[P]} pass, {counts[W]} warn, "
                   f"{counts[F]} fail")
