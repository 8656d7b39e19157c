"""``rigwatch ladder``: runs of one job at different scales, side by side.

The configuration guide's scale-up ladder — one GPU, one machine, many machines — says a
run that is "eight cards at the speed of three" has a broken step.  Each input is one run:
a job log (its progress lines give the throughput, its ``world size`` line or nccl-tests
rank lines the GPU count, its memory lines the peak) or a recording (every host's job log
and samples: the GPUs the job's processes hold, their peak memory, and the console's own
findings over the run).  Per run the table shows the throughput, the throughput per GPU,
the scaling efficiency against the smallest run (per-GPU throughput over the smallest run's),
the peak GPU memory, and a verdict naming the likely bottleneck from the run's findings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from probes.analysis.judge import scales_well
from probes.analysis.limits import DEFAULT_LADDER, LadderLimits
from probes.errors import RigwatchError
from probes.explain.stream import open_input
from probes.fleet_state import FleetState
from probes.rules.logrules.families import scan_lines
from probes.rules.logrules.lines import LogLine, log_lines
from probes.rules.logrules.rank_places import RankPlaces
from probes.rules.parsers import nccl_tests
from probes.rules.result import ExplainFinding
from probes.rules.text import decode, split_lines
from probes.rules.throughput import ThroughputSeries, series_of
from probes.sources.replay import ReplayBackend, ReplayError
from probes.store.recording_format import SQLITE_MAGIC, RecordingError
from probes.triage import Code
from probes.wire.events import SessionItem
from probes.wire.samples import HostSample, LogEvent, job_path

MAX_LOG_BYTES = 256 * 1024 * 1024
"""A log read for the ladder is read up to here (progress lines are spread evenly)."""

BOTTLENECKS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({Code.NCCL_BANDWIDTH_LOW, Code.NCCL_TIMEOUT, Code.NCCL_NET_ERROR,
                Code.NCCL_ERROR, Code.NCCL_TESTS_WRONG, Code.NVLINK_DOWN,
                Code.PCIE_LINK_DOWNGRADED, Code.LINK_DOWNGRADE_APPEARED}), "communication"),
    (frozenset({Code.DATA_STARVATION, Code.DISK_SATURATED}), "data loading"),
    (frozenset({Code.THROTTLED_WHILE_BUSY, Code.CLOCKS_THROTTLED, Code.TEMP_NEAR_SLOWDOWN,
                Code.POWER_PINNED}), "thermal/power"),
    (frozenset({Code.HOST_SWAPPING, Code.SWAP_ACTIVITY, Code.CUDA_OOM}), "memory"),
    (frozenset({Code.GPU_LOST, Code.GPU_DROPOUT, Code.XID, Code.GPU_FALLEN_OFF_BUS}),
     "a failing GPU"),
)


class LadderError(RigwatchError):
    """An input of the ladder cannot be read; names the path."""

    title = "Ladder input unreadable"


@dataclass(frozen=True)
class Run:
    """What one input says about one run of the job."""

    name: str
    gpus: int | None
    nodes: int | None
    speed: ThroughputSeries | None
    peak_mem_gib: float | None
    findings: tuple[tuple[str, str], ...]
    """(code, summary) of the run's findings that can name a bottleneck."""

    @property
    def total(self) -> float | None:
        """The run's throughput (all GPUs), the median of its series."""
        s = self.speed
        if s is None or s.median is None:
            return s.run_average if s is not None else None
        return s.median * self.gpus if s.per_gpu and self.gpus else s.median

    @property
    def per_gpu(self) -> float | None:
        total = self.total
        return total / self.gpus if total is not None and self.gpus else None


@dataclass(frozen=True)
class Step:
    """One row of the ladder."""

    run: Run
    efficiency: float | None
    verdict: str


def _lines_of(path: str) -> list[str]:
    fh = open_input(path)
    try:
        raw = fh.read(MAX_LOG_BYTES)
    except OSError as exc:
        raise LadderError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        if path != "-":
            fh.close()
    return split_lines(decode(raw))


def run_of(path: str) -> Run:
    """One run from a log or a recording (a recording's largest job), told apart by the
    file's first bytes.

    Raises:
        LadderError: the input cannot be read, or a recording holds no job.
    """
    runs = runs_of(path)
    if not runs:
        raise LadderError(f"{path}: no job's processes or log in the recording")
    return max(runs, key=lambda r: (r.gpus or 0, r.name))


def runs_of(path: str) -> list[Run]:
    """The runs an input holds: a log is one run; a recording one per job it watched (jobs
    of different hosts are never added into one run).

    Raises:
        LadderError: the input cannot be read.
    """
    try:
        return runs_of_recording(path) if is_recording(path) else [run_of_log(path)]
    except RigwatchError as exc:
        if isinstance(exc, LadderError):
            raise
        raise LadderError(str(exc)) from None


def run_of_log(path: str, lines: list[str] | None = None) -> Run:
    """A run from its job log."""
    peeled = log_lines(_lines_of(path) if lines is None else lines)
    return _run(Path(path).name, peeled, extra=[], gpus=None, nodes=None, mem=None)


def _run(name: str, peeled: Sequence[LogLine], extra: list[tuple[str, str]],
         gpus: int | None, nodes: int | None, mem: float | None) -> Run:
    speed = series_of(peeled)
    tests = nccl_tests.parse([line.raw for line in peeled])
    ranked = max(tests, key=lambda t: len(t.ranks), default=None)
    if gpus is None:
        gpus = speed.world_size if speed is not None and speed.world_size else None
    if gpus is None:
        gpus = _nranks(peeled)
    if gpus is None and ranked is not None and ranked.ranks:
        gpus = len(ranked.ranks)
    if nodes is None and ranked is not None and ranked.ranks and len(ranked.ranks) == gpus:
        nodes = len(ranked.hosts)
    if nodes is None and gpus == 1:
        nodes = 1
    found: list[ExplainFinding] = scan_lines(peeled)
    codes = [(str(f.code), f.summary) for f in found] + extra
    peak = max((v for v in (mem, speed.peak_mem_gib if speed else None) if v is not None),
               default=None)
    return Run(name, gpus, nodes, speed, peak, tuple(codes))


def _nranks(peeled: Sequence[LogLine]) -> int | None:
    """The ranks of the widest communicator NCCL's init lines name (``nranks 16``)."""
    places = RankPlaces()
    for line in peeled:
        places.add(line.text)
    counts = [r.nranks for r in places.places().values() if r.nranks]
    return max(counts) if counts else None


def runs_of_recording(path: str) -> list[Run]:
    """One run per job a recording watched: its job log, the GPUs its processes held, the
    console's findings over the run on its hosts (throttling, starvation, drops …).

    A job is the Slurm job its GPU processes name; processes that name none are their
    host's own job.  Independent single-host jobs stay separate runs.
    """
    try:
        source = ReplayBackend(path)  # the recording source, read to its end like any source
    except (RecordingError, ReplayError) as exc:
        raise LadderError(str(exc)) from None
    fleet = FleetState(source.specs) if source.specs else None
    logs: dict[tuple[str, str], list[str]] = {}
    gpus_of: dict[str, set[tuple[str, int]]] = {}
    job_of_host: dict[str, str] = {}
    peak: dict[str, float] = {}

    def take(host: str, item: SessionItem) -> None:
        if fleet is not None and host in fleet.hosts:
            fleet.apply(host, item, now=getattr(item, "ts", source.clock.t))
        if isinstance(item, LogEvent) and job_path(item.source) is not None:
            logs.setdefault((host, item.source), []).append(item.line)
        elif isinstance(item, HostSample):
            for g in item.gpus:
                for p in g.processes or ():
                    job = p.slurm_job or f"{host} (no Slurm job)"
                    job_of_host.setdefault(host, job)
                    gpus_of.setdefault(job, set()).add((host, g.index))
                    used = (p.used_mib or 0.0) / 1024.0
                    peak[job] = max(peak.get(job, 0.0), used)

    try:
        asyncio.run(source.run_once(take))
    finally:
        source.reader.close()
    if fleet is not None:
        fleet.scan_logs()  # the owner's write: the queued log lines judged before any read
    name = Path(path).name
    runs = []
    for job, held in sorted(gpus_of.items()):
        hosts = sorted({h for h, _ in held})
        mine = [(key, lines) for key, lines in logs.items() if job_of_host.get(key[0]) == job]
        best = max(mine, key=lambda kv: _points(kv[1]), default=None)
        extra: list[tuple[str, str]] = []
        if fleet is not None:
            for h in hosts:
                extra += [(str(f.code), f.summary) for f in fleet.hosts[h].findings()]
        label = f"{name} job {job}" if len(gpus_of) > 1 else name
        runs.append(_run(label, log_lines(best[1] if best else []), extra, len(held),
                         len(hosts), peak.get(job)))
    return runs


def _points(lines: list[str]) -> int:
    s = series_of(log_lines(lines))
    return len(s.points) if s is not None else -1


def is_recording(path: str) -> bool:
    """Whether ``path`` is a rigwatch recording (SQLite), not a log."""
    if path == "-":
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def ladder(runs: Sequence[Run], limits: LadderLimits = DEFAULT_LADDER) -> list[Step]:
    """The rows, smallest run first; efficiency is per-GPU throughput over the smallest's,
    judged against the operator's ``good_efficiency`` (``ladder:`` in the settings)."""
    ordered = sorted(runs, key=lambda r: (r.gpus is None, r.gpus or 0, r.name))
    base = next((r for r in ordered if r.per_gpu is not None), None)
    out = []
    for r in ordered:
        eff = None
        if base is not None and r.per_gpu is not None and base.per_gpu and r.speed \
                and base.speed and r.speed.unit == base.speed.unit:
            eff = r.per_gpu / base.per_gpu
        out.append(Step(r, eff, _verdict(r, eff, r is base, limits)))
    return out


def _verdict(run: Run, eff: float | None, is_base: bool, limits: LadderLimits) -> str:
    named = []
    for codes, what in BOTTLENECKS:
        hit = next((c for c, _ in run.findings if c in codes), None)
        if hit is not None:
            named.append(f"{what} ({hit})")
    if run.speed is None:
        return "no throughput in the input: " + (", ".join(named) if named else "nothing to judge")
    if run.gpus is None:
        return "GPU count unknown (no world size or nccl-tests ranks in the input)"
    if is_base:
        return "baseline" + (f"; but {', '.join(named)}" if named else "")
    if eff is None:
        return "not comparable (another unit than the baseline)"
    if scales_well(eff, limits) and not named:
        return "scales well"
    if named:
        return "likely bottleneck: " + ", ".join(named)
    return ("scaling loss with no finding to name: check communication (nccl-tests at this "
            "scale) and data loading")


def render(steps: Sequence[Step]) -> str:
    """The ladder as plain text, one row per run."""
    unit = next((s.run.speed.unit for s in steps if s.run.speed is not None), "")
    head = (f"{'run':<28} {'GPUs':>5} {'nodes':>5} {'throughput':>14} {'per GPU':>11} "
            f"{'eff.':>6} {'peak mem':>9}  verdict")
    out = [f"throughput in {unit}" if unit else "no throughput found", head, "-" * len(head)]
    for s in steps:
        r = s.run
        out.append(f"{_cut(r.name, 28):<28} {_n(r.gpus):>5} {_n(r.nodes):>5} "
                   f"{_v(r.total):>14} {_v(r.per_gpu):>11} "
                   f"{'-' if s.efficiency is None else f'{s.efficiency:.0%}':>6} "
                   f"{'-' if r.peak_mem_gib is None else f'{r.peak_mem_gib:.1f} GiB':>9}  "
                   f"{s.verdict}")
    return "\n".join(out) + "\n"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _n(v: int | None) -> str:
    return "?" if v is None else str(v)


def _v(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"

