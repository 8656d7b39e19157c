"""A Slurm job's own log, read where the bastion can (a shared filesystem), in triage order,
each finding naming the rank and the host it came from.

The log is read through ``explain``'s log rules, so it is judged exactly as a pasted log
is: rank marks (``[rank3]:``, srun's ``3:`` labels, torchrun's prefixes) become ``rank``.
A rank's host is the job's only node; on a multi-node job it is said only where the line
itself names a host (srun ``--label`` does not), never guessed.
"""

from __future__ import annotations

from probes.config.slurm import SlurmJob
from probes.explain.run import ExplainInputError, ordered
from probes.explain.stream import explain_stream, open_input


def job_log_findings(job: SlurmJob) -> tuple[list[dict[str, object]], list[str]]:
    """(findings, notes): every finding of the job's StdOut and StdErr with ``job``,
    ``rank`` where known and ``host``; a note for each log the bastion could not read."""
    paths = [p for p in dict.fromkeys((job.stdout, job.stderr)) if p]
    explained, notes = [], []
    for path in paths:
        try:
            with open_input(path) as fh:
                explained.append(explain_stream(path, fh))
        except ExplainInputError as exc:
            notes.append(f"{exc} (the job's log is read on this machine: follow it on "
                         f"{job.batch_host or 'the batch host'} with the agent instead)")
    only = job.nodes[0] if len(job.nodes) == 1 else None
    out = []
    for source, finding in ordered(explained):
        row = finding.to_json(source)
        row["job"] = job.job_id
        ranks = row.get("ranks")
        if "rank" not in row and isinstance(ranks, list) and len(ranks) == 1:
            row["rank"] = ranks[0]  # one rank named: it is the finding's rank
        row.setdefault("host", only)
        out.append(row)
    return out, notes
