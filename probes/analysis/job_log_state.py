"""Whether the agent can follow the files a job named, and a finding when it refused one.

The agent follows a job's StdOut/StdErr only as regular files owned by the job's user,
never through a symbolic link (``probes.agent.logs.open_regular``); a file it refuses (a
link swapped in, a FIFO, a device, another user's file) leaves the NCCL and model steps
blind to that job's log, so triage says so, with the agent's one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from probes.analysis.findings import Finding
from probes.triage import Code, Severity, Step
from probes.wire.samples import LogSourceState, LogSourceStatus, job_path

MAX_JOB_LOG_STATES = 64
"""Job files remembered per host (the agent follows at most 64)."""
ACTION_JOB_LOG = ("Read the job's log as the job's user (sudo -u USER tail FILE), or ask them "
                  "to write it to a regular file of their own")


def keep_job_log_state(states: dict[str, LogSourceState], item: LogSourceState) -> None:
    """Remember ``item`` as its job file's newest state (at most MAX_JOB_LOG_STATES files)."""
    if item.source in states or len(states) < MAX_JOB_LOG_STATES:
        states[item.source] = item


def refused_job_logs(host: str, states: Iterable[LogSourceState]) -> list[Finding]:
    """One warning for the job files the agent refuses now, each with its reason."""
    refused = [s for s in states if s.state is LogSourceStatus.DENIED
               and job_path(s.source) is not None]
    if not refused:
        return []
    first = refused[0]
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return [Finding(Step.NCCL, Code.JOB_LOG_REFUSED, Severity.WARNING,
                    f"job log not followed: {first.detail or job_path(first.source)}{more}",
                    host, evidence="; ".join(s.detail for s in refused)[:2000] or None,
                    action=ACTION_JOB_LOG, source=first.source)]
    # no ``ts``: how the host is watched, not something that happened (never a first failure)
