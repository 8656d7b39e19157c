"""Per-tick findings judge a v2 stream's static facts once per static epoch (issue 38).

``sample_findings`` keeps what a sample's static half says (a GPU lost or hung, ECC, row
remapping, NVLinks, the PCIe link, the hello's GPUs it lacks) on the sample's
``StaticEpoch`` and judges only the moving numbers on each tick.  The findings must be
exactly those of judging everything on every tick: here random v2 streams (static messages
that change, GPUs dropping out of them and out of the hello, new hellos, other limits,
samples without an epoch as v1 and the checked path build them) go through both, and every
finding is compared field by field, ``extra`` included, in order.  The reference is main's
``sample_findings`` before the cache, copied below, and ``judge_whole_sample``.  The same
for ``stray_process_findings``, whose candidates (processes outside any job on a Slurm node)
are static too.  Negative controls: a cache that is not renewed with a ``static`` message,
or kept across another hello or other limits, makes the comparison fail.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from probes.agent import output
from probes.analysis import actions as acts
from probes.analysis import findings as findings_mod
from probes.analysis.allocation import ACTION_STRAY, job_of, stray_process_findings
from probes.analysis.findings import (
    Finding,
    _link_finding,
    _memory_health,
    judge_whole_sample,
    sample_findings,
)
from probes.analysis.judge import (
    NO_PEERS,
    POWER_CAP,
    disk_saturated,
    gpu_link_shortfall,
    peer_link,
    slowing_reasons,
)
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.analysis.static_verdicts import StaticVerdicts
from probes.triage import Code, Severity, Step
from probes.wire import compact
from probes.wire.clock_reasons import CLOCK_REASONS
from probes.wire.compact import StaticEpoch
from probes.wire.protocol import MessageReader
from probes.wire.samples import GpuSample, GpuState, Hello, HostSample

# ---- main's sample_findings before the static cache (2e295cf), the reference --------------


def main_sample_findings(host: str, hello: Hello | None, sample: HostSample,
                         limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    out: list[Finding] = []
    seen = {g.index for g in sample.gpus}
    if hello is not None:
        for info in hello.facts.gpus:
            if info.index not in seen:
                named = {k: v for k, v in (("bus_id", info.bus_id), ("serial", info.serial),
                                           ("uuid", info.uuid)) if v}
                out.append(Finding(Step.GPU, Code.GPU_LOST, Severity.CRITICAL,
                                   f"GPU {info.index} ({info.bus_id or '?'}) is missing from "
                                   "the samples", host, gpu=info.index, ts=sample.ts,
                                   action=acts.ACTION_GPU_LOST, extra=named))
    peers = peer_link(g for g in sample.gpus if g.index >= 0)
    for gpu in sample.gpus:
        out.extend(_main_gpu_findings(host, gpu, sample.ts, limits, peers))
    for disk in sample.disks:
        if disk_saturated(disk.util, limits):
            out.append(Finding(Step.GPU, Code.DISK_SATURATED, Severity.WARNING,
                               f"{disk.name} {disk.util:.0f}% busy, queue {disk.aqu_sz or 0:.1f}",
                               host, ts=sample.ts, action=acts.ACTION_DISK))
    out.sort(key=lambda f: -f.severity.rank)
    return out


def _main_gpu_findings(host: str, gpu: GpuSample, ts: float, limits: DetectorLimits,
                       peers: tuple[int | None, int | None] = NO_PEERS) -> list[Finding]:
    out: list[Finding] = []
    if gpu.state is GpuState.LOST:
        name = str(gpu.index) if gpu.index >= 0 else (gpu.bus_id or "?")
        out.append(Finding(Step.GPU, Code.GPU_LOST, Severity.CRITICAL,
                           f"GPU {name} is lost", host, gpu=gpu.index, ts=ts,
                           action=acts.ACTION_GPU_LOST))
        return out
    if gpu.state is GpuState.UNRESPONSIVE:
        out.append(Finding(Step.GPU, Code.GPU_UNRESPONSIVE, Severity.WARNING,
                           f"GPU {gpu.index}: probe call hung", host, gpu=gpu.index, ts=ts,
                           action=acts.ACTION_UNRESPONSIVE))
        return out
    active = slowing_reasons(gpu.clock_reasons, gpu.util_pct, limits) \
        if gpu.clock_reasons else ()
    if active:
        clocks = ""
        if gpu.sm_clock_mhz is not None and gpu.sm_clock_max_mhz:
            clocks = f" at {gpu.sm_clock_mhz:.0f}/{gpu.sm_clock_max_mhz:.0f} MHz"
        out.append(Finding(Step.GPU, Code.CLOCKS_THROTTLED, Severity.WARNING,
                           f"GPU {gpu.index} throttled: {', '.join(sorted(active))}{clocks}",
                           host, gpu=gpu.index, ts=ts,
                           action=acts.ACTION_POWER_CAPPED if set(active) == {POWER_CAP}
                           else acts.ACTION_THROTTLED))
    link = gpu_link_shortfall(gpu, limits, peers)
    if link is not None:
        out.append(_link_finding(host, gpu, ts, link, peers))
    if (gpu.ecc_uncorrected_volatile or gpu.ecc_uncorrected_aggregate or gpu.remap_failure
            or gpu.remap_pending or gpu.retired_pages_pending):
        out.extend(_memory_health(host, gpu, ts))
    if gpu.nvlink_links and gpu.nvlink_up is not None and gpu.nvlink_up < gpu.nvlink_links:
        out.append(Finding(Step.GPU, Code.NVLINK_DOWN,
                           Severity.CRITICAL if gpu.nvlink_up else Severity.WARNING,
                           f"GPU {gpu.index}: {gpu.nvlink_links - gpu.nvlink_up} of "
                           f"{gpu.nvlink_links} NVLinks down", host, gpu=gpu.index, ts=ts,
                           action=acts.ACTION_NVLINK))
    return out


def main_stray_process_findings(host: str, sample: HostSample,
                                limits: DetectorLimits) -> list[Finding]:
    procs = [(g.index, p) for g in sample.gpus for p in g.processes or ()]
    if not any(job_of(p) is not None for _, p in procs):
        return []
    out = []
    for idx, p in procs:
        if (p.environ is not True or job_of(p) is not None or p.container or p.pod
                or (p.used_mib or 0.0) < limits.stray_min_mib):
            continue
        who = " ".join(x for x in (p.name, f"(pid {p.pid}" + (f", {p.user})" if p.user else ")"))
                       if x)
        out.append(Finding(
            Step.GPU, Code.GPU_STRAY_PROCESS, Severity.WARNING,
            f"GPU{idx}: {who} holds {p.used_mib:,.0f} MiB outside any Slurm job",
            host, gpu=idx, ts=sample.ts, action=ACTION_STRAY,
            extra={"pid": p.pid, "user": p.user, "used_mib": p.used_mib}))
    return out


# ---- random v2 streams ------------------------------------------------------------------

REASONS = [r.name for r in CLOCK_REASONS] + [POWER_CAP] * 3
STATES = ["ok"] * 8 + ["lost", "unresponsive", "unknown", None]
OTHER_LIMITS = DetectorLimits(power_cap_busy_util_pct=20.0, disk_saturated_util_pct=50.0)


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _hello(rng: random.Random, n: int) -> dict[str, object]:
    gpus = [{"index": i, "uuid": rng.choice([f"GPU-{i}", None]),
             "bus_id": rng.choice([f"0000:{i:02x}:00.0", None]), "serial": rng.choice(["S1", None]),
             "name": "H100", "mem_total_mib": 81559} for i in range(n)]
    return {"type": "hello", "v": 2, "ts": 1.0, "host": {"hostname": "h"}, "gpus": gpus,
            "columns": output.compact_columns()}


def _process(rng: random.Random, pid: int) -> list[object]:
    job = rng.choice(["4242", "4242", None])
    row = {"pid": pid, "name": rng.choice(["python", "", "jupyter"]),
           "user": rng.choice(["u", None]),
           "slurm_job": job, "slurm_step": None, "slurm_task": None, "rank": None,
           "local_rank": None, "world_size": None, "master_addr": None,
           "cuda_visible_devices": None, "container": rng.choice([None, None, "c1"]),
           "runtime": None, "pod": rng.choice([None, None, None, "p"]),
           "environ": rng.choice([True, True, False, None])}
    return [row[c] for c in compact.PROCESS_COLUMNS]


def _static(rng: random.Random, n: int) -> dict[str, object]:
    """``n`` GPUs' static rows (some with no believable index, dropped as v1 drops them)."""
    def small() -> object:
        return rng.choice([0, 0, 0, 0, None, 1, 3])

    rows = []
    indices = sorted(rng.sample(range(8), n))
    for i in indices:
        width_max = rng.choice([16, 16, 16, None])
        row = {"index": rng.choice([i] * 12 + [-1, None]), "uuid": f"GPU-{i}",
               "state": rng.choice(STATES), "bus_id": rng.choice([f"0000:{i:02x}:00.0", None]),
               "mem_total_mib": 81559, "power_limit_w": 700,
               "sm_clock_max_mhz": rng.choice([1980, 1980, 0, None]),
               "pcie_gen": rng.choice([5, 5, 5, 4, 3, None]),
               "pcie_gen_max": rng.choice([5, 5, None]),
               "pcie_width": rng.choice([16] * 5 + [8, 4, None]), "pcie_width_max": width_max,
               "mem_clock_max_mhz": 2619, "pstate": "P0",
               "ecc_corrected_volatile": small(), "ecc_uncorrected_volatile": small(),
               "ecc_corrected_aggregate": small(), "ecc_uncorrected_aggregate": small(),
               "retired_pages_pending": rng.choice([False] * 6 + [True, None]),
               "remap_correctable": small(), "remap_uncorrectable": small(),
               "remap_pending": rng.choice([False] * 6 + [True, None]),
               "remap_failure": rng.choice([False] * 8 + [True, None]),
               "nvlink_up": rng.choice([18] * 5 + [17, 0, None]),
               "nvlink_links": rng.choice([18, 18, 0, None]), "persistence": True,
               "pcie_replay": small(),
               "processes": [_process(rng, 100 * i + k) for k in range(rng.choice([0, 1, 1, 2]))]}
        rows.append([row[c] for c in compact.GPU_STATIC])
    return {"type": "static", "v": 2, "ts": 1.0, "gpus": rows, "host": [2**40, 0]}


def _tick(rng: random.Random, ts: float, static: dict[str, object]) -> list[object]:
    gpus = []
    for row in static["gpus"]:  # type: ignore[attr-defined]
        mib = [rng.choice([10.0, 600.0, 5000.0, None]) for _ in row[-1]]
        reasons = rng.sample(REASONS, rng.choice([0, 0, 0, 1, 1, 2]))
        gpus.append([rng.uniform(0, 80000), rng.choice([0.0, 5.0, 30.0, 60.0, 99.0, None]),
                     10.0, rng.uniform(30, 90), rng.uniform(60, 700),
                     rng.choice([1980.0, 1400.0, None]), 50.0, 2619.0, 1.0, 1.0,
                     sorted(set(reasons)), mib])
    disks = [[name, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, rng.choice([0.1, None]),
              rng.choice([5.0, 60.0, 99.5, None])]
             for name in rng.sample(["nvme0n1", "nvme1n1", "sda"], rng.randint(0, 2))]
    return [int(ts), ts, gpus, [5.0, 1, 1, 1, 2**30, 0, 0, 0], disks]


Judged = tuple[HostSample, str, Hello | None, DetectorLimits]


def _stream(seed: int, ticks: int = 400) -> Iterator[Judged]:
    """Samples as a fold judges them: each with the host, hello and limits of the moment."""
    rng = random.Random(seed)
    reader = MessageReader()
    host, limits = "h", DEFAULT_LIMITS
    hello: Hello | None = None
    n = 8
    static = _static(rng, n)
    for msg in reader.feed(_line(_hello(rng, 8)) + _line(static)):
        if isinstance(msg, Hello):
            hello = msg
    for k in range(ticks):
        roll = rng.random()
        if roll < 0.08:  # new static facts: a state, a link, ECC … or a GPU gone from them
            n = rng.choice([n, n, n - 1, 8]) or 1
            static = _static(rng, n)
            reader.feed(_line(static))
        elif roll < 0.10:  # another hello (a reconnect): its own GPU list
            for msg in reader.feed(_line(_hello(rng, rng.choice([8, 8, 6])))):
                if isinstance(msg, Hello):
                    hello = msg
            static = _static(rng, n)
            reader.feed(_line(static))
        elif roll < 0.12:
            limits = OTHER_LIMITS if limits is DEFAULT_LIMITS else DEFAULT_LIMITS
        elif roll < 0.13:
            host = "h2" if host == "h" else "h"
        for msg in reader.feed(_line(_tick(rng, 10.0 + k, static))):
            if not isinstance(msg, HostSample):
                continue
            if rng.random() < 0.1:  # as v1 and the checked path build it: no epoch
                msg = dataclasses.replace(msg)
            yield msg, host, rng.choice([hello, hello, hello, None]) if k % 50 == 7 \
                else hello, limits


def _fields(found: list[Finding]) -> list[dict[str, object]]:
    """Every field of every finding, the ones equality leaves out included."""
    return [{**vars(f), "extra": dict(f.extra)} for f in found]


def _differ(judge: Callable[..., list[Finding]], args: tuple[object, ...],
            want: list[Finding]) -> bool:
    try:
        return _fields(judge(*args)) != _fields(want)
    except (ValueError, IndexError):  # a stale cache of another GPU or process count
        return True


def _mismatches(seeds: range) -> tuple[Counter[str], Counter[str], int]:
    """(ticks where the cached judges and main's differ, by judge; findings by code; ticks
    with an epoch)."""
    wrong, codes, epochs = Counter[str](), Counter[str](), 0
    for seed in seeds:
        for sample, host, hello, limits in _stream(seed):
            want = main_sample_findings(host, hello, sample, limits)
            assert _fields(judge_whole_sample(host, hello, sample, limits)) == _fields(want)
            wrong["findings"] += _differ(sample_findings, (host, hello, sample, limits), want)
            strays = main_stray_process_findings(host, sample, limits)
            wrong["strays"] += _differ(stray_process_findings, (host, sample, limits), strays)
            codes.update(f.code for f in want + strays)
            epochs += isinstance(sample.static_epoch, StaticEpoch)
    return wrong, codes, epochs


def test_findings_judged_once_per_epoch_are_those_judged_every_tick() -> None:
    wrong, codes, epochs = _mismatches(range(12))
    assert wrong == {"findings": 0, "strays": 0}
    # the streams reach every per-tick judgement, and most samples take the cached path
    for code in (Code.GPU_LOST, Code.GPU_UNRESPONSIVE, Code.CLOCKS_THROTTLED,
                 Code.PCIE_LINK_DOWNGRADED, Code.ECC_UNCORRECTABLE, Code.ROW_REMAP_FAILURE,
                 Code.ROW_REMAP_PENDING, Code.RETIRED_PAGES_PENDING, Code.NVLINK_DOWN,
                 Code.DISK_SATURATED, Code.GPU_STRAY_PROCESS):
        assert codes[code] > 20, (code, codes)
    assert epochs > 3000


def test_an_epochs_static_findings_are_judged_once() -> None:
    """The cache is used: one judgement of the static half per epoch, host, hello and
    limits, and a re-dated copy of each static finding on the ticks after."""
    calls: list[object] = []
    real = findings_mod._static_verdicts

    def counted(*args: object) -> StaticVerdicts:
        calls.append(args[2])
        return real(*args)  # type: ignore[arg-type]

    samples = list(_stream(3))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(findings_mod, "_static_verdicts", counted)
        for sample, host, hello, limits in samples:
            sample_findings(host, hello, sample, limits)
    with_epoch = [s for s, *_ in samples if s.static_epoch is not None]
    assert len({id(s.static_epoch) for s in with_epoch}) <= len(calls) < len(with_epoch) / 4


def test_the_redated_finding_is_replaces() -> None:
    f = Finding(Step.GPU, Code.NVLINK_DOWN, Severity.WARNING, "s", "h", gpu=1, ts=1.0,
                extra={"a": 1}, context=("x",))
    [g] = findings_mod.dated((f,), 2.0)
    assert vars(g) == vars(dataclasses.replace(f, ts=2.0))
    assert not hasattr(Finding, "__post_init__")
    assert all(x.init for x in dataclasses.fields(Finding))


def test_a_stale_cache_fails_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: one epoch kept across ``static`` messages (the facts change, the
    verdicts do not) is caught."""
    shared = StaticEpoch()
    monkeypatch.setattr(compact, "StaticEpoch", lambda: shared)
    wrong, _, _ = _mismatches(range(4))
    assert wrong["findings"] > 20 and wrong["strays"] > 20


def test_verdicts_kept_for_another_hello_or_limits_fail_the_comparison(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: verdicts reused whatever the hello, host and limits are caught."""
    monkeypatch.setattr(StaticVerdicts, "fits", lambda *_: True)
    wrong, _, _ = _mismatches(range(4))
    assert wrong["findings"] > 5
