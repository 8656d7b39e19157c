"""How the CLI judges and prints a read of the fleet (a Slurm job's snapshot, preflight's
results), and ``--collectors``' value; which hosts are watched is
``probes.sources.hosts``'."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.analysis.onsets import STEP_ORDER
from probes.config.slurm import SlurmJob

if TYPE_CHECKING:
    from probes.analysis.limits import DetectorLimits
    from probes.analysis.preflight import CheckResult
    from probes.fleet_state import FleetState
    from probes.rules.parsers.ibnetdiscover import IbTopology
    from probes.transport.session import OnceResult

MAX_COLLECTORS = 64


class SnapshotFold:
    """How a snapshot's reads are judged (``fold_once``), keeping the state it made; for a
    Slurm job, its log's findings are the job's, its nodes run it, and the log this machine
    can read is folded where the batch host's agent did not send it."""

    def __init__(self, job: SlurmJob | None = None, topology: IbTopology | None = None,
                 limits: DetectorLimits | None = None) -> None:
        self.job = job
        self.limits = limits
        self.topology = topology
        """Each HCA's leaf switch (``--ibnetdiscover``), for switch-suspect."""
        self.watch = NO_JOB if job is None else JobWatch.of(job.job_id, job.nodes,
                                                             job.task_gpus())
        """The job the read is about, for its reads (its log's findings are the job's)."""
        self.fleet: FleetState | None = None
        self.notes: list[str] = []
        """What could not be read of the job's log here, one line each."""

    def __call__(self, results: list[OnceResult]) -> FleetState:
        from probes.outputs.fold_once import fold_once
        from probes.outputs.job_log import job_log_events

        job = self.job
        if job is None:
            self.fleet = fold_once(results, limits=self.limits)
        else:
            lines, self.notes = job_log_events(job)
            reader = job.batch_host or (job.nodes[0] if job.nodes else "")
            self.fleet = fold_once(results, limits=self.limits, more_lines={reader: lines})
        self.fleet.topology = self.topology
        return self.fleet


def with_job(snap: dict[str, Any], job: SlurmJob, fleet: FleetState,
             notes: list[str]) -> None:
    """A snapshot of a job's nodes told about the job: its facts, ``job`` on its hosts, its
    ranks' hosts and GPUs, its findings with rank and host, and its first failure."""
    from probes.analysis.domains import Domain, domains_of
    from probes.outputs.snapshot import job_finding_json

    snap["job"] = job.to_json()
    for host in snap["hosts"]:
        if host["name"] in job.nodes:
            host["job"] = job.job_id
    watch = JobWatch.of(job.job_id, job.nodes, job.task_gpus())
    index = fleet.rank_index(watch)
    snap["job"]["ranks"] = [
        {"rank": p.rank, "host": p.host, "gpu": p.gpu, "bus_id": p.bus_id,
         "gpu_serial": p.serial, "placed_by": p.witness} for p in index.ranks_of(job.job_id)]
    mine = Domain("job", job.job_id)
    found = [f for f in fleet.all_findings(watch=watch) if mine in domains_of(f, index)]
    found.sort(key=lambda f: (STEP_ORDER.index(f.step), f.ts if f.ts is not None else 0.0,
                              f.line or 0))
    snap["job_findings"] = [job_finding_json(f, job.job_id, job.nodes) for f in found]
    snap["job_notes"] = notes
    first = fleet.diagnosis(watch=watch).of_job(job.job_id)
    snap["first_failure"] = first.to_json() if first is not None else None
    snap["do_now"] = first.do_now if first is not None else None


def collector_count(text: str) -> int:
    """``--collectors``: a whole number from 0 to ``MAX_COLLECTORS``."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= n <= MAX_COLLECTORS:
        raise argparse.ArgumentTypeError(f"between 0 and {MAX_COLLECTORS}, not {n}")
    return n


def print_preflight(results: list[CheckResult], as_json: bool) -> int:
    """Preflight's results on stdout (JSON, or a line per host with the summary on stderr);
    its exit status: the same for every fleet source."""
    from probes.analysis.preflight import exit_status, json_report, text_report

    if as_json:
        json.dump(json_report(results), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        lines, summary = text_report(results)
        sys.stdout.writelines(line + "\n" for line in lines)
        print(summary, file=sys.stderr)
    return exit_status(results)
