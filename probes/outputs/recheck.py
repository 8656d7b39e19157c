"""A drained node's host read again now, and judged for a resume (``probes.actions.gate``).

The console's picture of a host holds everything since it started watching (an Xid seen an
hour ago stays in it); whether the cause is gone is a question about now.  So the host is
read afresh, the way ``snapshot`` reads it: its GPUs and, asked for explicitly, its kernel
log (what the running boot logged: an Xid 79 is there until the machine restarts), judged by
the same core, and only that read decides.
"""

from __future__ import annotations

import dataclasses

from probes.actions.evidence import Evidence
from probes.actions.gate import ResumeCheck, judge_resume
from probes.analysis.limits import DetectorLimits
from probes.config.fleet import HostSpec
from probes.outputs.fold_once import fold_once
from probes.transport.session import ONCE_TIMEOUT_S, collect_once

KERNEL_LOG_ARG = "--kernel-log=auto"
"""A ``--once`` run reads no kernel log unless asked (``agent.main.kernel_log_mode``)."""


def recheck_spec(spec: HostSpec) -> HostSpec:
    """``spec`` asking for the kernel log too."""
    if KERNEL_LOG_ARG in spec.extra_args:
        return spec
    return dataclasses.replace(spec, extra_args=(*spec.extra_args, KERNEL_LOG_ARG))


async def recheck(spec: HostSpec, cause: Evidence | None,
                  limits: DetectorLimits | None = None,
                  timeout_s: float = ONCE_TIMEOUT_S) -> ResumeCheck:
    """Read ``spec``'s host now and judge whether its node may resume.

    Args:
        spec: the host (the inventory's entry for the node).
        cause: the evidence of the drain, None when rigwatch did not drain it.
        limits: the operator's detector limits.
        timeout_s: how long the read may take.
    """
    result = await collect_once(recheck_spec(spec), timeout_s, to_now=True)
    if result.sample is None:
        return judge_resume((), cause, host=spec.name, read=False,
                            failure=result.failure or "no sample")
    fleet = fold_once([result], limits=limits)
    src = result.log_source
    kernel = (f"kernel log ({src.via or src.state.value})" if src is not None
              and src.state.value in ("ok", "simulated") else
              f"no kernel log ({src.state.value}: {src.detail})" if src is not None
              else "no kernel log")
    judged = f"GPU state and {kernel} of {spec.name}, read now"
    return judge_resume(fleet.all_findings([spec.name]), cause, host=spec.name, read=True,
                        judged=judged)
