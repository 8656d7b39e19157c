"""Who a GPU process works for: its Slurm job, step and task, its container or pod, its rank.

Read-only and bounded: ``/proc/PID/cgroup`` (readable by anyone) names the Slurm job of a
task under Slurm's cgroup plugins and the container a runtime put it in; a short whitelist of
``/proc/PID/environ`` variables names its rank.  environ is readable only by the process's
owner or root, so the agent run as another user sees the cgroup part only and says so.
Nothing of environ but the whitelisted names is kept, and nothing else is read.

Layouts read (each shaped after the source named in the tests):

* Slurm, cgroup v1: ``…/slurm[_NODE]/uid_U/job_J/step_S/task_T`` (proctrack/task cgroup);
* Slurm, cgroup v2: ``/system.slice/[NODE_]slurmstepd.scope/job_J/step_S/user/task_T``;
* Docker: ``/docker/ID`` (cgroupfs) or ``docker-ID.scope`` (systemd);
* containerd / CRI-O under Kubernetes: ``…/kubepods…/pod<UID>/ID`` (cgroupfs) or
  ``kubepods-<qos>-pod<UID_with_underscores>.slice/cri-containerd-ID.scope`` /
  ``crio-ID.scope`` (systemd);
* Podman: ``libpod-ID.scope``.
"""

from __future__ import annotations

import re

ENV_WHITELIST = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_LOCALID", "RANK",
                 "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES")
"""The only environment variables ever read from a process (issue #21)."""
MAX_CGROUP_BYTES = 16384
MAX_ENVIRON_BYTES = 262144
"""A process's environment beyond this is not read further (the whitelist is usually early)."""
MAX_VALUE_CHARS = 256

_SLURM = re.compile(r"/job_(?P<job>\d+)(?=/|$)(?:/step_(?P<step>[A-Za-z0-9_]+)(?=/|$))?"
                    r"(?:/(?:user/)?task_(?P<task>\d+)(?=/|$))?")
_HEX64 = r"[0-9a-f]{64}"
_RUNTIMES = (
    ("docker", re.compile(r"(?:/docker/|docker-)(?P<id>" + _HEX64 + r")(?:\.scope)?(?:/|$)")),
    ("containerd", re.compile(r"cri-containerd-(?P<id>" + _HEX64 + r")\.scope")),
    ("cri-o", re.compile(r"crio-(?:conmon-)?(?P<id>" + _HEX64 + r")\.scope")),
    ("podman", re.compile(r"libpod-(?:conmon-)?(?P<id>" + _HEX64 + r")\.scope")),
)
_POD = re.compile(r"pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}"
                  r"[-_][0-9a-f]{12})")
_KUBE_CONTAINER = re.compile(r"/kubepods[^\n]{0,200}/pod[0-9a-f_-]{36}(?:\.slice)?/(?P<id>"
                             + _HEX64 + r")(?:/|$)")


def _read(path, limit):
    """Up to ``limit`` bytes of a file; None when it cannot be read (gone, not permitted)."""
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except (OSError, ValueError):
        return None


def _value(raw):
    text = raw.decode("utf-8", "replace")
    return text[:MAX_VALUE_CHARS]


def from_cgroup(text):
    """The job and container facts a ``/proc/PID/cgroup`` text names ({} when none)."""
    out = {}
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if "job_" in path and ("slurm" in path or "/job_" in path):
            m = _SLURM.search(path)
            if m and "slurm_job" not in out:
                out["slurm_job"] = m.group("job")
                if m.group("step"):
                    out["slurm_step"] = m.group("step")
                if m.group("task"):
                    out["slurm_task"] = int(m.group("task"))
        if "container" not in out:
            for runtime, pattern in _RUNTIMES:
                m = pattern.search(path)
                if m:
                    out["container"], out["runtime"] = m.group("id")[:12], runtime
                    break
            else:
                m = _KUBE_CONTAINER.search(path)
                if m:
                    out["container"], out["runtime"] = m.group("id")[:12], "cri"
        if "pod" not in out and "kubepods" in path:
            m = _POD.search(path)
            if m:
                out["pod"] = m.group("uid").replace("_", "-")
    return out


def from_environ(raw):
    """The whitelisted variables of a NUL-separated environ block, as protocol fields."""
    env = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep:
            key = name.decode("ascii", "replace")
            if key in ENV_WHITELIST and key not in env:
                env[key] = _value(value)
    out = {}
    if "SLURM_JOB_ID" in env and env["SLURM_JOB_ID"].isdigit():
        out["slurm_job"] = env["SLURM_JOB_ID"]
    if "SLURM_STEP_ID" in env:
        out["slurm_step"] = env["SLURM_STEP_ID"]
    for key, field in (("RANK", "rank"), ("SLURM_PROCID", "rank"), ("LOCAL_RANK", "local_rank"),
                       ("SLURM_LOCALID", "local_rank"), ("WORLD_SIZE", "world_size")):
        if field not in out and env.get(key, "").isdigit():
            out[field] = int(env[key])
    if env.get("MASTER_ADDR"):
        out["master_addr"] = env["MASTER_ADDR"]
    if "CUDA_VISIBLE_DEVICES" in env:
        out["cuda_visible_devices"] = env["CUDA_VISIBLE_DEVICES"]
    return out


def attribute(pid, proc_root="/proc"):
    """What a GPU process works for, read from ``proc_root``/PID; {} when nothing is known.

    The cgroup names the job when Slurm's cgroup plugins are in use, and wins over the
    environment (a process can set SLURM_JOB_ID itself); ``environ`` says whether the
    process's environment could be read (False: another user's process).
    """
    if not isinstance(pid, int) or pid <= 0:
        return {}
    base = "%s/%d" % (proc_root, pid)
    out = {}
    cgroup = _read(base + "/cgroup", MAX_CGROUP_BYTES)
    environ = _read(base + "/environ", MAX_ENVIRON_BYTES)
    if environ is not None:
        out.update(from_environ(environ))
    if cgroup is not None:
        out.update(from_cgroup(cgroup.decode("utf-8", "replace")))
    if out or cgroup is not None:
        out["environ"] = environ is not None
    return out
