"""A Slurm job's own log, read where the bastion can (a shared filesystem), in triage order,
each finding naming the rank, the host and the GPU it came from.

The log is read through ``explain``'s log rules, so it is judged exactly as a pasted log
is: rank marks (``[rank3]:``, srun's ``3:`` labels, torchrun's prefixes) become ``rank``.
A rank's host and GPU come from the agents (the GPU process whose environment names that
rank of this job) or from the log itself (NCCL's init lines, torchrun's failure table);
on a one-node job it is that node.  Never guessed otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import BinaryIO

from probes.analysis.job_ranks import HostRanks, RankIndex
from probes.config.slurm import SlurmJob
from probes.explain.run import ExplainInputError, ordered
from probes.explain.stream import explain_stream
from probes.outputs.job_file import JobFileRefused, open_job_file, skipped_bytes
from probes.rules.logrules.lines import peel
from probes.rules.logrules.rank_places import LoggedRank, RankPlaces

MAX_PLACE_LINES = 2_000_000
"""Lines of a job's log read for rank placements (NCCL init is near the start)."""
MAX_PLACE_LINE = 8192
"""A longer line keeps its head: an NCCL init line is a few hundred bytes."""
_BLOCK = 1024 * 1024


def _log_paths(job: SlurmJob) -> list[str]:
    return [p for p in dict.fromkeys((job.stdout, job.stderr)) if p]


def _lines(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of ``fh``, each cut to :data:`MAX_PLACE_LINE` bytes, in bounded memory."""
    carry = b""
    cut = False  # the carry is a cut line's head: drop up to its end
    while block := fh.read(_BLOCK):
        parts = block.split(b"\n")
        parts[0] = carry + parts[0]
        for i, part in enumerate(parts[:-1]):
            if not (cut and i == 0):
                yield part[:MAX_PLACE_LINE]
            cut = False
        carry = parts[-1]
        if len(carry) > MAX_PLACE_LINE:
            if not cut:
                yield carry[:MAX_PLACE_LINE]
            carry, cut = carry[:MAX_PLACE_LINE], True
    if carry and not cut:
        yield carry


def logged_places(job: SlurmJob) -> dict[int, LoggedRank]:
    """rank → host (and bus id) as the job's logs readable here tell them."""
    places = RankPlaces()
    for path in _log_paths(job):
        try:
            with open_job_file(path, job.user_id) as fh:
                for raw in islice(_lines(fh), MAX_PLACE_LINES):
                    places.add(peel(raw.decode("utf-8", "replace"))[0])
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
            with open_job_file(path, job.user_id) as fh:
                explained.append(explain_stream(path, fh))
                if skipped := skipped_bytes(fh):
                    notes.append(f"{path}: its first {skipped / 2**20:.0f} MiB were not read "
                                 "(the snapshot reads a job log's end)")
        except JobFileRefused as exc:
            notes.append(str(exc))
        except (ExplainInputError, OSError) as exc:
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
