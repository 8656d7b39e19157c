"""A Slurm job's own log, read where the bastion can (a shared filesystem), in triage order,
each finding naming the rank, the host and the GPU it came from.

The log is read through ``explain``'s log rules, so it is judged exactly as a pasted log
is: rank marks (``[rank3]:``, srun's ``3:`` labels, torchrun's prefixes) become ``rank``.
A rank's host and GPU come from the agents (the GPU process whose environment names that
rank of this job) or from the log itself (NCCL's init lines, torchrun's failure table);
on a one-node job it is that node.  Never guessed otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from probes.analysis.job_ranks import HostRanks, RankIndex
from probes.config.slurm import SlurmJob
from probes.explain.run import ExplainInputError, ordered
from probes.explain.stream import explain_stream, open_input
from probes.rules.logrules.lines import peel
from probes.rules.logrules.rank_places import LoggedRank, RankPlaces

MAX_PLACE_LINES = 2_000_000
"""Lines of a job's log read for rank placements (NCCL init is near the start)."""


def _log_paths(job: SlurmJob) -> list[str]:
    return [p for p in dict.fromkeys((job.stdout, job.stderr)) if p]


def logged_places(job: SlurmJob) -> dict[int, LoggedRank]:
    """rank → host (and bus id) as the job's logs readable here tell them."""
    places = RankPlaces()
    for path in _log_paths(job):
        try:
            with open_input(path) as fh:
                for raw in islice(fh, MAX_PLACE_LINES):
                    places.add(peel(raw[:8192].decode("utf-8", "replace"))[0])
        except (ExplainInputError, OSError):
            continue  # job_log_findings says why
    return places.places()


def job_log_findings(job: SlurmJob, hosts: Sequence[HostRanks] = ()
                     ) -> tuple[list[dict[str, object]], list[str]]:
    """(findings, notes): every finding of the job's StdOut and StdErr with ``job``,
    ``rank`` where known, ``host`` (and ``rank_gpu`` (its index), ``gpu_serial``,
    ``bus_id``) where the rank is placed; a note for each log the bastion could not read.

    Args:
        job: the job as Slurm told it.
        hosts: what the job's nodes' agents told (their GPU processes' ranks).
    """
    explained, notes = [], []
    for path in _log_paths(job):
        try:
            with open_input(path) as fh:
                explained.append(explain_stream(path, fh))
        except ExplainInputError as exc:
            notes.append(f"{exc} (the job's log is read on this machine: follow it on "
                         f"{job.batch_host or 'the batch host'} with the agent instead)")
    reader = job.batch_host or (job.nodes[0] if job.nodes else "")
    seen = [h for h in hosts if h.host != reader]
    batch = next((h for h in hosts if h.host == reader), HostRanks(reader, None, None, {}))
    batch = HostRanks(batch.host, batch.sample, batch.hello,
                      {**batch.logged, **logged_places(job)})
    index = RankIndex([*seen, batch], job.job_id)
    only = job.nodes[0] if len(job.nodes) == 1 else None
    out = []
    for source, finding in ordered(explained):
        row = finding.to_json(source)
        row["job"] = job.job_id
        ranks = row.get("ranks")
        if "rank" not in row and isinstance(ranks, list) and len(ranks) == 1:
            row["rank"] = ranks[0]  # one rank named: it is the finding's rank
        rank = row.get("rank")
        place = index.locate(job.job_id, rank) if isinstance(rank, int) else None
        if place is not None:
            row["host"] = place.host
            for key, value in (("rank_gpu", place.gpu), ("gpu_serial", place.serial),
                               ("bus_id", place.bus_id)):
                if value is not None:
                    row[key] = value
            row["placed_by"] = place.witness
        row.setdefault("host", only)
        out.append(row)
    return out, notes
