"""Incidents in words: the root, when, and what follows from it, for screens and reports."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from probes.analysis.findings import Finding
from probes.analysis.job_ranks import rank_where
from probes.analysis.onsets import CAUSE_STEPS
from probes.triage import Code


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def describe(f: Finding) -> str:
    """``Xid 79 on gpu017 GPU3``: what and where, for sentences and timelines."""
    what = f"Xid {f.xid}" if f.xid is not None else f.code
    ranked = rank_where(f)
    if ranked is not None:  # a job log's finding: where the rank runs, not who read the log
        return f"{what} {ranked}"
    where = f.host + (f" GPU{f.gpu}" if f.gpu is not None else "")
    return f"{what} on {where}"


_NAMES: Mapping[str, tuple[str, str]] = {
    Code.NCCL_TIMEOUT: ("NCCL watchdog timeout", "NCCL watchdog timeouts"),
    Code.NCCL_ERROR: ("NCCL error", "NCCL errors"),
    Code.NCCL_NET_ERROR: ("NCCL transport error", "NCCL transport errors"),
    Code.RANK_FAILED: ("failed rank", "failed ranks"),
    Code.GPU_LOST: ("lost GPU", "lost GPUs"), Code.XID: ("Xid", "Xids")}
_SHORT: Mapping[str, tuple[str, str]] = {
    Code.NCCL_TIMEOUT: ("NCCL timeout", "NCCL timeouts"), Code.CUDA_OOM: ("CUDA OOM", "CUDA OOMs"),
    Code.COLLECTIVE_HANG: ("hung collective", "hung collectives")}


def brief(f: Finding) -> str:
    """``Xid 79 on gpu-b02 GPU6`` / ``NCCL timeout on gpu-b03``: a finding named short, for
    the one-line headline's "also"."""
    if f.xid is not None:
        return describe(f)
    host = where_host(f)
    gpu = f.details.rank_gpu if f.details.rank_host else f.gpu
    where = host + (f" GPU{gpu}" if gpu is not None and f.step in CAUSE_STEPS else "")
    return f"{_name(f.code, 1, short=True)} on {where}"


def where_host(f: Finding) -> str:
    """The host a finding is about: where its rank runs when placed, else its own host."""
    placed = f.details.rank_host
    return placed if placed is not None else f.host


def ranks_phrase(ranks: Sequence[int], most: int = 6) -> str:
    """``ranks 0, 2, 3`` / ``rank 4`` / ``12 ranks``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if len(ranks) > most:
        return f"{len(ranks)} ranks"
    return "ranks " + ", ".join(str(r) for r in ranks)


def _hosts_phrase(group: Sequence[Finding]) -> str:
    hosts = sorted({where_host(f) for f in group})
    return f"{len(hosts)} hosts" if len(hosts) > 3 else ", ".join(hosts)


def _name(code: str, n: int, short: bool = False) -> str:
    one, many = (_SHORT.get(code) if short else None) or _NAMES.get(
        code, (f"{code} finding", f"{code} findings"))
    return one if n == 1 else many


def _consequence_phrase(code: str, group: list[Finding]) -> str:
    start = min(f.ts or 0.0 for f in group)
    ranks = {r for f in group for r in _ranks_of(f)}
    where = f"of {len(ranks)} ranks" if len(ranks) > 1 else f"on {_hosts_phrase(group)}"
    return f"{_name(code, len(group))} {where} from {_clock(start)}"


def _ranks_of(f: Finding) -> list[int]:
    ranks = f.details.ranks
    if ranks is not None:
        return list(ranks)
    rank = f.details.rank
    return [rank] if rank is not None else []


def _by_code(later: Sequence[Finding]) -> list[tuple[str, list[Finding]]]:
    by_code: dict[str, list[Finding]] = {}
    for f in later:
        by_code.setdefault(f.code, []).append(f)
    return sorted(by_code.items(), key=lambda kv: min(f.ts or 0.0 for f in kv[1]))


def explain_root(root: Finding, later: Sequence[Finding], hardware_seen: bool,
                 others: Sequence[Finding] = (), culprit: str | None = None,
                 waiting: Sequence[int] = ()) -> str:
    """One sentence for the operator: the root, when, and what follows from it.

    ``culprit`` names the rank the root points at (``rank 1 on n2 GPU1``), ``waiting`` the
    ranks whose watchdog timed out waiting.
    """
    assert root.ts is not None
    head = f"{describe(root)} at {_clock(root.ts)}"
    if root.code == Code.NCCL_TIMEOUT:
        waited = f"{ranks_phrase(waiting)} timed out waiting" if waiting else \
            "the ranks timed out waiting"
        head += (f"; {waited} on {culprit}, which never completed the collective"
                 if culprit else f"; {waited}, and no rank is known to have failed first")
    elif waiting:
        head += f" ({ranks_phrase(waiting)} then waited on it and timed out)"
    groups = _by_code(later)
    if groups:
        parts = [_consequence_phrase(code, group) for code, group in groups]
        single = len(groups) == 1 and len(groups[0][1]) == 1
        verb = "is its consequence" if single else (
            "are its consequence" if len(parts) == 1 else "are its consequences")
        head += "; " + "; ".join(parts) + " " + verb
    if root.step not in CAUSE_STEPS:
        head += (". No GPU or kernel fault precedes it" if not hardware_seen else
                 ". GPU and kernel faults came later")
        ranked = rank_where(root)
        head += (f": read the traceback of {ranked} in {root.host}'s job log, then the model "
                 "code" if ranked and root.code != Code.NCCL_TIMEOUT
                 else f": read {root.host}'s job log and model code")
    if others:
        head += ". Separate faults: " + "; ".join(
            f"{describe(o)} at {_clock(o.ts or 0.0)}" for o in others)
    return head + "."


def headline_root(root: Finding, later: Sequence[Finding], hardware_seen: bool,
                  others: Sequence[Finding] = ()) -> str:
    """The root once, with its onset, then what follows: ``16:14:40 Xid 79 on gpu-b02 GPU6,
    then NCCL timeout on gpu-b03`` (one line at 80 columns for a typical incident)."""
    assert root.ts is not None
    head = f"{_clock(root.ts)} {describe(root)}"
    groups = _by_code(later)
    if groups:
        code, group = groups[0]
        ranks = {r for f in group for r in _ranks_of(f)}
        where = f"of {len(ranks)} ranks" if len(ranks) > 1 else f"on {_hosts_phrase(group)}"
        head += f", then {_name(code, len(group), short=True)} {where}"
        rest = sum(len(g) for _, g in groups[1:])
        if rest:
            head += f" and {rest} more"
    if root.step not in CAUSE_STEPS:
        head += ("; no GPU or kernel fault before it" if not hardware_seen else
                 "; GPU and kernel faults came later")
    if others:
        head += f"; also {brief(others[0])}"
        if len(others) > 1:
            head += f" and {len(others) - 1} more"
    return head


def explain_earliest(root: Finding, others: Sequence[Finding]) -> str:
    """The earliest warning when nothing critical happened, and how many others stand."""
    assert root.ts is not None
    head = f"{describe(root)} at {_clock(root.ts)}"
    if others:
        head += (f"; {len(others)} more warning{'s' if len(others) > 1 else ''} on "
                 f"{_hosts_phrase(others)}")
    return head + "; nothing critical so far."


def headline_earliest(root: Finding, others: Sequence[Finding]) -> str:
    """``16:41:30 memory-leak on gpu-a02 GPU3; 5 more warnings, nothing critical``."""
    assert root.ts is not None
    more = f"{len(others)} more warning{'s' if len(others) != 1 else ''}, " if others else ""
    return f"{_clock(root.ts)} {describe(root)}; {more}nothing critical"

