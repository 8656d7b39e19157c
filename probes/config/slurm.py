"""A Slurm job as the bastion's Slurm client tells it: its nodes, batch host and log paths.

``scontrol show job ID`` is read as text, because Slurm 22.05 (Debian 12's) has no
``scontrol --json``, and its ``StdOut=`` is already expanded (``squeue --json`` leaves
``%j`` in place).  The node list is expanded by rigwatch's own hostlist reader.  The command
runs with an argv (never a shell) and a timeout.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace

from probes.config.fleet import HostSpec, TransportName
from probes.config.hostlist import expand_hostlist
from probes.errors import ConfigError

SCONTROL_TIMEOUT_S = 10.0
JOB_LOG_LOOKBACK = 4 * 1024 * 1024
"""Bytes of a job's log read from before its end when the console starts: the lines of a
job that already failed (a 2 000-rank job's NCCL init alone is a few MiB)."""
_PAIR = re.compile(r"(?:^|\s)(?P<key>[A-Za-z][\w/:]*)=(?P<value>.*?)"
                   r"(?=(?<!\s)\s+[A-Za-z][\w/:]*=|$)")
"""``Key=value`` pairs.  The value ends where a space run before the next key starts (the
lookbehind): tried at every space of a long run, the rest of the run was read each time."""
_NONE = ("(null)", "")


class SlurmError(ConfigError):
    """Slurm cannot tell about the job: no client, no such job, or an answer not understood."""

    title = "Slurm job unusable"


@dataclass(frozen=True)
class SlurmJob:
    """What rigwatch needs of a job."""

    job_id: str
    name: str | None
    state: str | None
    user: str | None
    nodes: tuple[str, ...]
    batch_host: str | None
    stdout: str | None
    stderr: str | None

    def to_json(self) -> dict[str, object]:
        return {"id": self.job_id, "name": self.name, "state": self.state, "user": self.user,
                "nodes": list(self.nodes), "batch_host": self.batch_host,
                "stdout": self.stdout, "stderr": self.stderr}


def parse_show_job(text: str) -> SlurmJob:
    """``scontrol show job`` text (one job) → SlurmJob.

    Raises:
        SlurmError: no ``JobId=`` in it.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        for m in _PAIR.finditer(line.strip()):
            fields.setdefault(m.group("key"), m.group("value").strip())
    if "JobId" not in fields or not fields["JobId"].isdigit():
        raise SlurmError("scontrol show job printed no JobId")

    def get(key: str) -> str | None:
        value = fields.get(key)
        return None if value is None or value in _NONE else value

    node_list = get("NodeList")
    user = get("UserId")
    job = SlurmJob(
        job_id=fields["JobId"], name=get("JobName"), state=get("JobState"),
        user=user.split("(", 1)[0] if user else None,
        nodes=tuple(expand_hostlist(node_list)) if node_list else (),
        batch_host=get("BatchHost"), stdout=get("StdOut"), stderr=get("StdErr"))
    return replace(job, stdout=expand_log_path(job.stdout, job) if job.stdout else None,
                   stderr=expand_log_path(job.stderr, job) if job.stderr else None)


_PATTERN = re.compile(r"%(?P<width>\d{0,2})(?P<key>[%AaJjNnstux])")


def expand_log_path(path: str, job: SlurmJob) -> str:
    """A ``--output`` pattern as Slurm expands it for the batch step (sbatch(1), "filename
    pattern"): ``%j`` job id, ``%u`` user, ``%x`` job name, ``%N`` the batch host, ``%t``
    task 0, ``%n`` node 0, ``%s`` ``batch``, ``%J`` ``ID.batch``, ``%A`` the job id, ``%%``;
    a number after ``%`` pads with zeros (``%5j``).  Older Slurm clients print some of these
    unexpanded; what rigwatch cannot know (``%a`` of a non-array job) stays as it is."""
    values = {"j": job.job_id, "A": job.job_id, "u": job.user, "x": job.name,
              "N": job.batch_host or (job.nodes[0] if job.nodes else None), "t": "0", "n": "0",
              "s": "batch", "J": f"{job.job_id}.batch", "%": "%"}

    def one(m: re.Match[str]) -> str:
        value = values.get(m.group("key"))
        if value is None:
            return m.group(0)
        width = int(m.group("width") or 0)
        return value.zfill(width) if value.isdigit() else value

    return _PATTERN.sub(one, path)


def query_job(job_id: str, timeout_s: float = SCONTROL_TIMEOUT_S) -> SlurmJob:
    """Ask the local Slurm client about ``job_id``.

    Raises:
        SlurmError: not a job id, no ``scontrol``, a timeout, or Slurm's own refusal (its
            message, one line).
    """
    if not job_id.isdigit():
        raise SlurmError(f"not a Slurm job id: {job_id!r}")
    try:
        out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True,
                             text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise SlurmError("scontrol not found: run this where the Slurm client is "
                         "installed") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"scontrol show job {job_id} did not answer within "
                         f"{timeout_s:g} s") from None
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        raise SlurmError(f"scontrol show job {job_id}: {said[-1] if said else 'failed'}")
    return parse_show_job(out.stdout)


def job_specs(job: SlurmJob, inventory: list[HostSpec], here: str) -> list[HostSpec]:
    """The hosts to watch for ``job``: each node's inventory entry when it has one, this
    machine read locally when the node is ``here``, else an SSH host by that name (its
    settings from ``~/.ssh/config``); the batch host's agent follows the job's log."""
    known = {s.name: s for s in inventory}
    logs = tuple(p for p in dict.fromkeys((job.stdout, job.stderr)) if p)
    out = []
    for node in job.nodes:
        if node in known:
            spec = known[node]
        elif node == here:
            spec = HostSpec(name=node)
        else:
            spec = HostSpec(name=node, transport=TransportName.SSH)
        if node == job.batch_host and logs:
            # the batch host writes the job's log: its agent follows it (read-only)
            spec = replace(spec, logs=tuple(dict.fromkeys(spec.logs + logs)),
                           log_lookback_bytes=max(spec.log_lookback_bytes, JOB_LOG_LOOKBACK))
        out.append(spec)
    return out
