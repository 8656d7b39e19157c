"""A Slurm job as the bastion's Slurm client tells it: its owner, state, nodes, batch host,
log paths and, per node, the CPUs and GPUs it holds.

A job's name, paths and comment are written by its user, and ``scontrol show job`` prints
them among Slurm's own fields with nothing to tell them apart: a name such as
``x UserId=root(0) NodeList=vm,attacker`` (or with a newline) reads as those fields, and
Slurm 22.05 (Debian 12's) has no ``scontrol --json``.  ``squeue --json`` is exact, but on
22.05 it ignores ``-j`` and prints every job of the cluster (its man page: "All other
formatting and filtering arguments will be ignored").  So each field is asked of ``squeue
-O`` where it cannot be forged:

- Slurm's own fields (id, owner's uid, state, reason, exit code, node list, batch host,
  partition) come in one line, each followed by ``|``; none of them holds user text, and
  each must match its shape or the answer is refused.
- Each free-text field (name, StdOut, StdErr) comes alone, after the job id, in a call of
  its own: whatever it holds, newlines and ``Key=`` included, is that field's value.
- The per-node CPU and GPU detail lines are read from ``scontrol -d show job`` only as whole
  lines of their exact shape, for the nodes of Slurm's node list (``slurm_alloc``).

The node list is expanded by rigwatch's own reader, checked against ``scontrol show
hostnames`` and against the nodes of the job's partition (``sinfo``): a name that is not a
node of that partition is left out with one line, never dialled.  Every command runs with an
argv and a timeout, in bounded bytes (``slurm_cli``); bytes that are not UTF-8 become U+FFFD
and shown text is cleaned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from probes.config.fleet import HostSpec, TransportName
from probes.config.hostlist import HostlistError, expand_hostlist
from probes.config.slurm_alloc import AllocationUnclear, NodeAllocation, parse_allocation
from probes.config.slurm_cli import SLURM_TIMEOUT_S, SlurmError, run_slurm
from probes.wire.sanitize import clean_text

__all__ = ["ACTIVE_STATES", "JOB_LOG_LOOKBACK", "SCONTROL_TIMEOUT_S", "AllocationUnclear",
           "JobExit", "JobStatus", "NodeAllocation", "SlurmError", "SlurmJob",
           "expand_log_path", "job_specs", "parse_status_line", "poll_job", "query_job"]

SCONTROL_TIMEOUT_S = SLURM_TIMEOUT_S
JOB_LOG_LOOKBACK = 4 * 1024 * 1024
"""Bytes of a job's log read from before its end when the console starts: the lines of a
job that already failed (a 2 000-rank job's NCCL init alone is a few MiB)."""

ACTIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
                           "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                           "RESV_DEL_HOLD", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT",
                           "STOPPED"})
"""Slurm job states (squeue(1), "JOB STATE CODES") of a job that has not ended; every other
state (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED,
BOOT_FAIL, DEADLINE, REVOKED) is final."""

_STATUS_FIELDS = ("JobID", "ArrayJobID", "ArrayTaskID", "UserID", "UserName", "State",
                  "Reason", "exit_code", "NodeList", "BatchHost", "Partition")
_STATUS_FORMAT = ",".join(f"{f}:0|" for f in _STATUS_FIELDS)
_STATUS_LINE = re.compile(
    r"(?P<id>\d{1,12})\|(?P<array>\d{1,12})\|(?P<task>N/A|[\d,\[\]%-]{1,256})\|"
    r"(?P<uid>\d{1,10})\|(?P<user>[\w.$@-]{0,64})\|(?P<state>[A-Z_]{1,32})\|"
    r"(?P<reason>[^|\n]{0,1024})\|(?P<exit>N/A|\d{1,10})\|"
    r"(?P<nodes>[\w.\[\],-]{0,65536})\|(?P<batch>[\w./-]{0,255})\|"
    r"(?P<partition>[\w.,-]{0,1024})\|")
_NODE_NAME = re.compile(r"[\w.-]{1,255}")
_NONE = ("", "(null)", "N/A", "n/a", "None")


@dataclass(frozen=True)
class JobExit:
    """How the job's batch script ended (``ExitCode=status:signal``)."""

    status: int
    """Its exit status (0 to 255); 0 when a signal ended it."""
    signal: int
    """The signal that ended it (9 for SIGKILL), 0 for none."""

    @classmethod
    def from_wait_status(cls, raw: int) -> JobExit:
        """From the wait(2) status squeue prints (``768`` is exit status 3)."""
        signal = raw & 0x7F
        return cls(0 if signal else (raw >> 8) & 0xFF, signal)

    def __str__(self) -> str:
        return f"{self.status}:{self.signal}"


@dataclass(frozen=True)
class JobStatus:
    """What one ``squeue`` call tells of a job: :func:`poll_job`, cheap enough to poll."""

    job_id: str
    state: str
    """Slurm's state name (``RUNNING``, ``COMPLETED``, ``FAILED``…): see ACTIVE_STATES."""
    reason: str | None
    """Why it is in that state (``Resources``, ``NonZeroExitCode``); None for ``None``."""
    exit: JobExit | None
    """How the batch script ended; None while it has not."""
    user: str | None
    user_id: int
    """The owner's uid: the uid the job's log files must belong to."""
    nodes: tuple[str, ...]
    """Its node list expanded, in Slurm's order; empty while it is pending."""
    node_list: str
    """The node list as Slurm wrote it (``n[1-4]``)."""
    batch_host: str | None
    partition: str | None
    array_job_id: str | None = None
    """The job array's id when the job is one of its tasks (``%A``), else None."""
    array_task_id: str | None = None
    """The task's index in its array (``%a``), else None."""

    @property
    def active(self) -> bool:
        """Pending or running: not yet in a final state."""
        return self.state in ACTIVE_STATES


@dataclass(frozen=True)
class SlurmJob:
    """What rigwatch needs of a job.  Shown text (``name``, ``reason``) is cleaned; the log
    paths are the job's literal paths (clean them before showing them)."""

    job_id: str
    name: str | None
    state: str | None
    user: str | None
    nodes: tuple[str, ...]
    batch_host: str | None
    stdout: str | None
    stderr: str | None
    user_id: int | None = None
    """The owner's uid: the job's log files are read only when they belong to it."""
    reason: str | None = None
    exit: JobExit | None = None
    partition: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    allocation: tuple[NodeAllocation, ...] = ()
    """Per node, the CPU ids and GPU indices the job holds (``scontrol -d``), in the order
    of ``nodes``; empty when Slurm printed none or they could not be told apart (``notes``
    says so)."""
    notes: tuple[str, ...] = field(default=())
    """One line for each thing of the job that was left out (a node that is not a node of
    its partition, unclear allocation lines, a log path that is not text)."""
    num_tasks: int | None = None
    """Tasks the job was given (``NumTasks``): the ranks an ``srun`` in it starts."""
    cpus_per_task: int | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def task_layout(self) -> dict[int, tuple[str, int]] | None:
        """Task id → (node, its place on the node) as ``srun``'s default block
        distribution lays the job's tasks out: consecutive tasks share a node, each node as
        many as its CPUs hold (``CPU_IDs`` ÷ ``cpus-per-task``).  None unless those counts
        add up to the job's tasks exactly (then the layout is Slurm's, not a guess)."""
        if not self.num_tasks or not self.allocation or not self.cpus_per_task:
            return None
        counts = [len(a.cpu_ids) // self.cpus_per_task for a in self.allocation]
        if sum(counts) != self.num_tasks or not all(counts):
            return None
        out: dict[int, tuple[str, int]] = {}
        task = 0
        for alloc, n in zip(self.allocation, counts, strict=True):
            for local in range(n):
                out[task] = (alloc.node, local)
                task += 1
        return out

    def task_gpus(self) -> dict[int, tuple[str, int]]:
        """Task id → (node, GPU index) when Slurm fixes both: the block layout holds
        (:meth:`task_layout`) and every node gives each of its tasks one GPU of its own
        (``GRES=gpu:N(IDX:…)`` with N equal to its tasks); else empty."""
        layout = self.task_layout()
        if layout is None:
            return {}
        per_node: dict[str, int] = {}
        for node, _ in layout.values():
            per_node[node] = per_node.get(node, 0) + 1
        gpus = {a.node: a.gpu_indices for a in self.allocation}
        if any(len(gpus.get(node, ())) != n for node, n in per_node.items()):
            return {}
        return {task: (node, gpus[node][local]) for task, (node, local) in layout.items()}

    def node_allocation(self, node: str) -> NodeAllocation | None:
        """What ``node`` gives the job, None when unknown."""
        return next((a for a in self.allocation if a.node == node), None)

    def to_json(self) -> dict[str, object]:
        return {"id": self.job_id, "name": self.name, "state": self.state, "user": self.user,
                "nodes": list(self.nodes), "batch_host": self.batch_host,
                "stdout": self.stdout, "stderr": self.stderr, "user_id": self.user_id,
                "reason": self.reason, "exit_code": str(self.exit) if self.exit else None,
                "partition": self.partition, "num_tasks": self.num_tasks,
                "cpus_per_task": self.cpus_per_task,
                "allocation": [a.to_json() for a in self.allocation],
                "notes": list(self.notes)}


def _none(value: str) -> str | None:
    return None if value in _NONE else value


def parse_status_line(text: str, job_id: str) -> JobStatus:
    """``squeue -h -t all -j ID -O JobID:0|,…`` (``_STATUS_FORMAT``) → JobStatus.

    Raises:
        SlurmError: no such job, a job array's several tasks, or a line of another shape.
    """
    lines = [line for line in text.split("\n") if line]
    if not lines:
        raise SlurmError(f"Slurm job {job_id}: no such job (squeue lists it no more)")
    found = [_STATUS_LINE.fullmatch(line) for line in lines]
    bad = next((line for line, m in zip(lines, found, strict=True) if m is None), None)
    if bad is not None:
        raise SlurmError(f"squeue printed a line rigwatch does not understand for job "
                         f"{job_id}: {clean_text(bad[:120])!r}")
    matched = [m for m in found if m is not None]
    if len(matched) > 1:
        tasks = ", ".join(m.group("id") for m in matched[:4])
        raise SlurmError(f"Slurm job {job_id} is a job array of {len(lines)} tasks: give one "
                         f"task's own job id ({tasks}{' …' if len(lines) > 4 else ''})")
    m = matched[0]
    if m.group("id") != job_id:
        raise SlurmError(f"squeue answered for job {m.group('id')}, not {job_id}")
    node_list = m.group("nodes")
    try:
        nodes = tuple(expand_hostlist(node_list)) if _none(node_list) else ()
    except HostlistError as exc:
        raise SlurmError(f"Slurm job {job_id}: {exc}") from None
    exit_raw = m.group("exit")
    state = m.group("state")
    return JobStatus(
        job_id=job_id, state=state, reason=_none(clean_text(m.group("reason").strip())),
        exit=None if exit_raw == "N/A" or state in ACTIVE_STATES
        else JobExit.from_wait_status(int(exit_raw)),
        user=m.group("user") or None, user_id=int(m.group("uid")), nodes=nodes,
        node_list=node_list, batch_host=_none(m.group("batch")),
        partition=_none(m.group("partition")),
        array_job_id=m.group("array") if m.group("task") != "N/A" else None,
        array_task_id=_none(m.group("task")))


def poll_job(job_id: str, timeout_s: float = SCONTROL_TIMEOUT_S) -> JobStatus:
    """The job's state, reason, exit code and nodes now: one ``squeue`` call.

    Raises:
        SlurmError: not a job id, no Slurm client, a timeout, or Slurm's refusal.
    """
    if not job_id.isdigit():
        raise SlurmError(f"not a Slurm job id: {job_id!r}")
    out = run_slurm(["squeue", "-h", "-t", "all", "-j", job_id, "-O", _STATUS_FORMAT],
                    timeout_s, what=f"squeue -j {job_id}")
    return parse_status_line(out.decode("utf-8", "replace"), job_id)


def _free_field(job_id: str, name: str, timeout_s: float) -> bytes:
    """One user-written field, asked alone after the id: all that follows ``ID|`` is it."""
    out = run_slurm(["squeue", "-h", "-t", "all", "-j", job_id, "-O", f"JobID:0|,{name}:0"],
                    timeout_s, what=f"squeue -j {job_id}")
    head = f"{job_id}|".encode()
    if not out.startswith(head) or not out.endswith(b"\n"):
        raise SlurmError(f"squeue printed no {name} for job {job_id}")
    return out[len(head):-1]


def _path(raw: bytes, what: str, notes: list[str]) -> str | None:
    """A log path as the job wrote it, when it is text a file name can be."""
    if raw in (b"", b"(null)"):
        return None
    try:
        path = raw.decode("utf-8")
    except UnicodeDecodeError:
        notes.append(f"{what} path is not UTF-8 text: not followed")
        return None
    if "\x00" in path or not path.startswith("/"):
        notes.append(f"{what} path {clean_text(path[:200])!r} is not an absolute path: "
                     "not followed")
        return None
    if path == "/dev/null":
        return None  # output thrown away: nothing to follow
    return path


def query_job(job_id: str, timeout_s: float = SCONTROL_TIMEOUT_S) -> SlurmJob:
    """Ask the local Slurm client about ``job_id`` (a few ``squeue`` calls, ``scontrol -d``
    for the allocation, ``scontrol show hostnames`` and ``sinfo`` for the nodes).

    Raises:
        SlurmError: not a job id, no Slurm client, a timeout, Slurm's own refusal (the end of
            its message, one line), or an answer not understood.
    """
    status = poll_job(job_id, timeout_s)
    notes: list[str] = []
    raw_name = _free_field(job_id, "Name", timeout_s).decode("utf-8", "replace")
    nodes = _slurm_nodes(status, timeout_s, notes)
    allocation: tuple[NodeAllocation, ...] = ()
    if nodes:
        text = run_slurm(["scontrol", "-d", "show", "job", job_id], timeout_s,
                         what=f"scontrol show job {job_id}")
        try:
            allocation = parse_allocation(text.decode("utf-8", "replace"), nodes)
        except AllocationUnclear as exc:
            notes.append(f"{exc}: CPU and GPU placement not read")
    job = SlurmJob(
        job_id=job_id, name=clean_text(raw_name) or None, state=status.state,
        user=status.user, nodes=nodes,
        batch_host=status.batch_host if status.batch_host in nodes else None,
        stdout=None, stderr=None, user_id=status.user_id, reason=status.reason,
        exit=status.exit, partition=status.partition, array_job_id=status.array_job_id,
        array_task_id=status.array_task_id, allocation=allocation)
    if status.batch_host and job.batch_host is None:
        notes.append(f"batch host {status.batch_host!r} is not a node of the job: its log "
                     "is not followed there")
    raw = replace(job, name=raw_name)  # Slurm expands %x with the name as written
    paths = []
    for what in ("STDOUT", "STDERR"):
        path = _path(_free_field(job_id, what, timeout_s), what.capitalize(), notes)
        if path and job.array_task_id and path.endswith(f"/slurm-{job_id}.out"):
            # squeue names an array task's default file by its own id; Slurm writes %A_%a
            path = path[:-len(f"slurm-{job_id}.out")] + "slurm-%A_%a.out"
        paths.append(expand_log_path(path, raw) if path else None)
    tasks, per_task = _task_counts(job_id, timeout_s)
    return replace(job, stdout=paths[0], stderr=paths[1], notes=tuple(notes),
                   num_tasks=tasks, cpus_per_task=per_task)


_TASKS_LINE = re.compile(r"(?P<id>\d{1,12})\|(?P<tasks>\d{1,9}|N/A)\|(?P<cpt>\d{1,6}|N/A)\|\n")


def _task_counts(job_id: str, timeout_s: float) -> tuple[int | None, int | None]:
    """(NumTasks, cpus-per-task) of the job; (None, None) when Slurm does not say."""
    out = run_slurm(["squeue", "-h", "-t", "all", "-j", job_id, "-O",
                     "JobID:0|,NumTasks:0|,cpus-per-task:0|"], timeout_s,
                    what=f"squeue -j {job_id}")
    m = _TASKS_LINE.fullmatch(out.decode("ascii", "replace"))
    if m is None or m.group("id") != job_id:
        return None, None
    tasks, cpt = m.group("tasks"), m.group("cpt")
    return (int(tasks) if tasks.isdigit() else None, int(cpt) if cpt.isdigit() else None)


def _slurm_nodes(status: JobStatus, timeout_s: float, notes: list[str]) -> tuple[str, ...]:
    """The job's nodes that Slurm itself knows as nodes of its partition."""
    if not status.nodes:
        return ()
    names = run_slurm(["scontrol", "show", "hostnames", status.node_list], timeout_s,
                      what="scontrol show hostnames")
    if tuple(names.decode("utf-8", "replace").split()) != status.nodes:
        raise SlurmError(f"Slurm job {status.job_id}: node list {status.node_list!r} does not "
                         "expand as scontrol show hostnames expands it")
    argv = ["sinfo", "-h", "-N", "-o", "%N"]
    if status.partition and "," not in status.partition:
        argv += ["-p", status.partition]  # hidden partitions too: -p names one
    else:
        argv.append("-a")
    known = set(run_slurm(argv, timeout_s, what="sinfo -N").decode("utf-8", "replace").split())
    kept = []
    for node in status.nodes:
        if node in known and _NODE_NAME.fullmatch(node):
            kept.append(node)
        else:
            notes.append(f"{clean_text(node)!r} is not a node of partition "
                         f"{status.partition or '?'} (sinfo): not watched")
    return tuple(kept)


_PATTERN = re.compile(r"%(?P<width>\d{0,2})(?P<key>[%AaJjNnstux])")


def expand_log_path(path: str, job: SlurmJob) -> str:
    """A ``--output`` pattern as Slurm expands it for the batch step (sbatch(1), "filename
    pattern"): ``%j`` job id, ``%u`` user, ``%x`` job name, ``%N`` the batch host, ``%t``
    task 0, ``%n`` node 0, ``%s`` ``batch``, ``%J`` ``ID.batch``, ``%A`` the job id, ``%%``;
    a number after ``%`` pads with zeros (``%5j``).  ``squeue`` prints the pattern as given;
    ``%A``/``%a`` are the array's id and the task's index; what rigwatch cannot know (``%a`` of
    a non-array job) stays as it is."""
    values = {"j": job.job_id, "A": job.array_job_id or job.job_id, "a": job.array_task_id,
              "u": job.user, "x": job.name,
              "N": job.batch_host or (job.nodes[0] if job.nodes else None), "t": "0", "n": "0",
              "s": "batch", "J": f"{job.job_id}.batch", "%": "%"}

    def one(m: re.Match[str]) -> str:
        value = values.get(m.group("key"))
        if value is None:
            return m.group(0)
        width = int(m.group("width") or 0)
        return value.zfill(width) if value.isdigit() else value

    return _PATTERN.sub(one, path)


def job_specs(job: SlurmJob, inventory: list[HostSpec], here: str) -> list[HostSpec]:
    """The hosts to watch for ``job``: each node's inventory entry when it has one (by name,
    or by its ``slurm_node:``), this machine read locally when the node is ``here``, else an
    SSH host by that name (its settings from ``~/.ssh/config``); the batch host's agent
    follows the job's log files, as literal paths, read only as regular files owned by the
    job's user."""
    known = {s.name: s for s in inventory}
    # a host whose Slurm node has another name (``slurm_node:``) answers for that node
    known.update({s.slurm_node: s for s in inventory if s.slurm_node})
    logs = tuple(p for p in dict.fromkeys((job.stdout, job.stderr)) if p)
    if job.user_id is None:
        logs = ()  # whose files they are is unknown: never followed
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
                           job_logs=logs, job_log_owner=job.user_id,
                           log_lookback_bytes=max(spec.log_lookback_bytes, JOB_LOG_LOOKBACK))
        out.append(spec)
    return out
