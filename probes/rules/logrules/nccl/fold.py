"""NCCL findings: the records of one input folded into at most one finding per code.

A distributed job's log says the same thing many times (every rank logs its watchdog
timeout; NCCL wraps one socket failure in ``ncclSystemError``, then torch wraps that in
``DistBackendError``), so :func:`scan` tells each code once for the whole incident: which
ranks, hosts and GPUs, and what the first failure was.

Codes follow ``shared/EXPLAIN-CONTRACT.md``: ``nccl-timeout`` (collective watchdog timeouts),
``nccl-net-error`` (IB, RoCE, OFI/EFA, socket, bootstrap and c10d-store transport failures,
also when NCCL wraps them as a system or remote error), ``nccl-error`` (every other NCCL
error) and ``rank-failed`` (a launcher reports a dead rank).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from probes.rules.logrules.common import CRIT, WARN, names, unique
from probes.rules.logrules.lines import LogLine
from probes.rules.logrules.nccl import patterns as pat
from probes.rules.logrules.nccl.parse import parse
from probes.rules.logrules.nccl.patterns import (
    ACTION_CUDA_OOM,
    ACTION_DUP_GPU,
    ACTION_HEARTBEAT,
    ACTION_MISMATCH,
    ACTION_NET,
    ACTION_RANK,
    ACTION_SHM,
    ACTION_TIMEOUT,
)
from probes.rules.logrules.nccl.records import NcclError, NetError, RankFailure, Timeout, Where
from probes.rules.result import ExplainFinding
from probes.triage import Code, Severity, Step

# --- wording --------------------------------------------------------------------------------


def _place(w: Where) -> str:
    """``rank 3, host gpu017, GPU2``: as much as the log tells about where it happened."""
    bits = []
    if w.rank is not None:
        bits.append(f"rank {w.rank}")
    if w.host:
        bits.append(f"host {w.host}")
    if w.gpu:
        bits.append(w.gpu)
    return ", ".join(bits)


def _common(records: Sequence[Where]) -> dict[str, object]:
    """``rank``/``host`` of the evidence, and the lists when several ranks or hosts are in."""
    first = records[0]
    extra: dict[str, object] = {}
    ranks = sorted({w.rank for w in records if w.rank is not None})
    hosts = unique([w.host for w in records])
    gpus = unique([w.gpu for w in records])
    if first.rank is not None:
        extra["rank"] = first.rank
    if first.host is not None:
        extra["host"] = first.host
    if len(ranks) > 1:
        extra["ranks"] = ranks
    if len(hosts) > 1:
        extra["hosts"] = hosts
    if len(gpus) > 1:
        extra["gpus"] = gpus
    return extra


def _finding(code: Code, severity: Severity, w: Where, summary: str, action: str,
             count: int, extra: Mapping[str, object]) -> ExplainFinding:
    return ExplainFinding(Step.NCCL, code, severity, w.line, w.evidence, summary, action,
                          gpu=w.gpu, time=w.time, count=max(1, count), extra=extra)


def _timeout_finding(timeouts: Sequence[Timeout], others: bool) -> ExplainFinding | None:
    real = [t for t in timeouts if t.kind != "ambiguous"]
    if not real and others:
        return None
    records = real or list(timeouts)
    if not records:
        return None
    first = records[0]
    per_rank: dict[object, Timeout] = {}
    for t in records:
        per_rank.setdefault(t.where.rank if t.where.rank is not None else id(t), t)
    ranks = sorted({t.where.rank for t in timeouts if t.where.rank is not None})
    coll = [t for t in records if t.kind in ("collective", "work")]
    ops_by_seq: dict[int, dict[str, list[int]]] = {}
    for t in coll:
        if t.seq is not None and t.op_type is not None:
            ops = ops_by_seq.setdefault(t.seq, {})
            ops.setdefault(t.op_type, [])
            if t.where.rank is not None and t.where.rank not in ops[t.op_type]:
                ops[t.op_type].append(t.where.rank)
    mismatch = {s: ops for s, ops in ops_by_seq.items() if len(ops) > 1}
    seqs = unique([t.seq for t in coll])
    extra: dict[str, object] = _common([t.where for t in timeouts])
    if ranks:
        extra["ranks"] = ranks
    lead = coll[0] if coll else first
    for key, value in (("seq", lead.seq), ("op_type", lead.op_type),
                       ("numel_in", lead.numel_in), ("numel_out", lead.numel_out),
                       ("timeout_ms", lead.timeout_ms)):
        if value is not None:
            extra[key] = value
    ran = [t.ran_ms for t in coll if t.ran_ms is not None]
    if ran:
        extra["ran_ms"] = max(ran)
    if len(seqs) > 1:
        extra["seqs"] = seqs
    op_types = unique([t.op_type for t in coll])
    if len(op_types) > 1:
        extra["op_types"] = op_types
    if mismatch:
        extra["mismatched"] = True
    done = [(t.last_completed, t.where.rank) for t in timeouts
            if t.last_completed is not None and t.where.rank is not None]
    if coll:
        extra["timeouts"] = [
            {k: v for k, v in (("rank", t.where.rank), ("seq", t.seq), ("op_type", t.op_type),
                               ("numel_in", t.numel_in), ("numel_out", t.numel_out),
                               ("ran_ms", t.ran_ms)) if v is not None} for t in coll]
    summary = _timeout_summary(records, coll, ranks, mismatch, seqs, done)
    action = ACTION_TIMEOUT
    if mismatch:
        action = ACTION_MISMATCH
    elif any(t.kind == "heartbeat" for t in records) and not coll:
        action = ACTION_HEARTBEAT + ". " + ACTION_TIMEOUT
    count = len({(t.where.rank, t.seq, t.kind) if t.where.rank is not None else id(t)
                 for t in records})
    # "an error or timeout" with nothing said of which is no timeout (#24): nccl-error
    code = Code.NCCL_TIMEOUT if real else Code.NCCL_ERROR
    return _finding(code, CRIT, first.where, summary, action, count, extra)


def _timeout_summary(records: Sequence[Timeout], coll: Sequence[Timeout], ranks: list[int],
                     mismatch: Mapping[int, Mapping[str, list[int]]], seqs: list[object],
                     done: list[tuple[int, int]]) -> str:
    who = (f"rank {ranks[0]}" if len(ranks) == 1 else
           f"{len(ranks)} ranks ({names(ranks)})" if ranks else "a rank")
    hosts = unique([t.where.host for t in records])
    where = f" on {names(hosts, 4)}" if hosts else ""
    if not coll:
        kinds = {t.kind for t in records}
        if "heartbeat" in kinds:
            return (f"NCCL watchdog hung on {who}{where}: the heartbeat monitor timed out "
                    "(the watchdog itself is stuck, usually in a CUDA call)")
        if "gloo" in kinds:
            ms = next((t.timeout_ms for t in records if t.timeout_ms), None)
            return f"gloo collective timed out on {who}{where}" + (f" after {ms} ms" if ms else "")
        if kinds == {"ambiguous"}:
            return (f"NCCL watchdog caught an error or timeout on {who}{where} (the log does not "
                    "say which or in what collective)")
        return f"NCCL collective timed out on {who}{where}"
    lead = coll[0]
    out = f"NCCL watchdog timeout on {who}{where}"
    if mismatch:
        seq, ops = next(iter(mismatch.items()))
        told = "; ".join(f"{op} on rank{'s' if len(r) > 1 else ''} {names(r)}" if r else op
                         for op, r in ops.items())
        return (out + f": mismatched collectives at SeqNum {seq} ({told}) — the ranks "
                "diverged, likely a code path that runs a different collective on some ranks")
    what = lead.op_type or "a collective"
    if len(seqs) == 1:
        what += f" SeqNum {seqs[0]}" if lead.op_type else f" (SeqNum {seqs[0]})"
    if lead.numel_in is not None:
        what += f" (NumelIn {lead.numel_in}, NumelOut {lead.numel_out})"
    out += f": {what}"
    ran = [t.ran_ms for t in coll if t.ran_ms is not None]
    if ran:
        out += f" ran {max(ran)} ms"
    if lead.timeout_ms is not None:
        out += f" against a {lead.timeout_ms} ms ({lead.timeout_ms / 60000:g} min) timeout"
    if len(seqs) > 1:
        out += (f"; ranks are stuck at different SeqNums ({names(seqs, 4)}): a rank skipped "
                "or added a collective")
    if done:
        low, rank = min(done)
        out += f"; lowest last completed work {low} on rank {rank}"
    return out


def recovered(n: NetError, completed: Sequence[int]) -> bool:
    """A warning NCCL went on from: a communicator came up after it (``Init COMPLETE``),
    as after ``Failed to open libibverbs.so`` when NCCL falls back to sockets."""
    return n.severity is not CRIT and any(c > n.where.line for c in completed)


def _net_finding(nets: Sequence[NetError], completed: Sequence[int] = ()
                 ) -> ExplainFinding | None:
    if not nets:
        return None
    if all(recovered(n, completed) for n in nets):
        n = nets[0]
        return _finding(Code.NCCL_NET_ERROR, Severity.INFO, n.where,
                        f"{n.transport}: {n.detail}; NCCL recovered (a communicator came up "
                        "after it): no network failure", ACTION_NET.get(n.category,
                                                                        ACTION_NET["net"]),
                        len(nets), {**_common([n.where]), "recovered": True,
                                    "transport": n.transport})
    crit = [n for n in nets if n.severity is CRIT]
    pool = crit or list(nets)
    primary = next((n for n in pool if n.category != "ib-flush"), pool[0])
    severity = CRIT if crit else WARN
    transports = unique([n.transport for n in nets])
    summary = f"{primary.transport} transport failure"
    place = _place(primary.where)
    if place:
        summary += f" on {place}"
    summary += f": {primary.detail}"
    if primary.peer:
        summary += f" (peer {primary.peer})"
    others = [t for t in transports if t != primary.transport]
    if others:
        summary += f"; also {names(others, 4)} failures"
    hosts = unique([n.where.host for n in nets])
    if len(hosts) > 1:
        summary += f"; seen on {len(hosts)} hosts ({names(hosts, 4)})"
    action = ACTION_NET.get(primary.category, ACTION_NET["net"])
    extra = _common([primary.where] + [n.where for n in nets])
    extra["transport"] = primary.transport
    if len(transports) > 1:
        extra["transports"] = transports
    if primary.status is not None:
        extra["ib_status"] = primary.status
    if primary.peer:
        extra["peer"] = primary.peer
    if primary.call:
        extra["call"] = primary.call
    return _finding(Code.NCCL_NET_ERROR, severity, primary.where, summary, action, len(nets),
                    extra)


def _error_finding(errors: Sequence[NcclError], others: bool) -> ExplainFinding | None:
    if not errors:
        return None
    real = [e for e in errors if e.kind != "aborted"]
    if not real and others:
        return None
    pool = real or list(errors)
    specific = [e for e in pool if not e.wrapper and e.kind not in ("error", "warn")]
    crit = [e for e in pool if e.kind != "warn"]
    primary = (specific or crit or pool)[0]
    label, action = pat.KIND_TEXT[primary.kind]
    detail = primary.last_error or primary.detail
    summary = label
    place = _place(primary.where)
    if place:
        summary += f" on {place}"
    if detail:
        summary += f": {detail}"
    elif primary.last_error == "":
        summary += " (its 'Last error' is empty: no transport or cause named)"
    kinds = unique([e.kind for e in pool])
    also = [k for k in kinds if k != primary.kind]
    if also:
        summary += f"; also {names([pat.KIND_TEXT[str(k)][0].split(' (')[0] for k in also], 4)}"
    text = " ".join(e.detail + " " + (e.last_error or "") for e in pool)
    if re.search(r"out of memory", text, re.IGNORECASE):
        action = ACTION_CUDA_OOM + ". " + action
    elif re.search(r"shared memory|/dev/shm", text):
        action = ACTION_SHM
    elif "Duplicate GPU" in text:
        action = ACTION_DUP_GPU
    severity = WARN if all(e.kind == "warn" for e in pool) else CRIT
    extra = _common([primary.where] + [e.where for e in pool])
    extra["kind"] = primary.kind
    if len(kinds) > 1:
        extra["kinds"] = kinds
    if primary.last_error is not None:
        extra["last_error"] = primary.last_error
    version = next((m.group("v") for e in pool for m in [pat.NCCL_VERSION.search(e.where.evidence)]
                    if m), None)
    if version:
        extra["nccl_version"] = version
    return _finding(Code.NCCL_ERROR, severity, primary.where, summary, action, len(pool), extra)


def _failure_finding(failures: Sequence[RankFailure]) -> ExplainFinding | None:
    if not failures:
        return None
    merged: list[RankFailure] = []
    for f in failures:
        twin = next((m for m in merged if _same_failure(m, f)), None)
        if twin is None:
            merged.append(f)
        else:
            merged[merged.index(twin)] = _fill(twin, f)
    told = [f for f in merged if f.launcher != "ChildFailedError"] or merged
    timed = [f for f in told if f.where.time is not None and f.launcher == "torchelastic"]
    primary = min(timed, key=lambda f: str(f.where.time)) if len(timed) > 1 else told[0]
    told = [primary] + [f for f in told if f is not primary]
    summary = _failure_summary(told)
    if any(f.launcher == "ChildFailedError" for f in merged) and told is not merged:
        summary += "; torchrun stopped the job (ChildFailedError)"
    key = primary.signal if primary.signal is not None and primary.signal in ACTION_RANK else "exit"
    if primary.exitcode is None and primary.signal is None:
        key = "exit"
    extra = _common([primary.where] + [f.where for f in told])
    for k, v in (("rank", primary.rank), ("local_rank", primary.local_rank),
                 ("exitcode", primary.exitcode), ("signal", primary.signal),
                 ("pid", primary.pid), ("host", primary.host)):
        if v is not None:
            extra[k] = v
    if len(told) > 1:
        extra["failures"] = [
            {k: v for k, v in (("rank", f.rank), ("local_rank", f.local_rank),
                               ("exitcode", f.exitcode), ("signal", f.signal), ("pid", f.pid),
                               ("host", f.host)) if v is not None} for f in told]
    return _finding(Code.RANK_FAILED, CRIT, primary.where, summary, ACTION_RANK[key], len(told),
                    extra)


def _same_failure(a: RankFailure, b: RankFailure) -> bool:
    if a.pid is not None and a.pid == b.pid:
        return True
    if a.launcher == "ChildFailedError" or b.launcher == "ChildFailedError":
        return a.launcher == b.launcher
    return (a.pid is None or b.pid is None) and a.local_rank is not None and (
        a.local_rank == b.local_rank and a.host == b.host)


def _fill(a: RankFailure, b: RankFailure) -> RankFailure:
    """One failure told twice (the agent's line and its summary block): keep what each says."""
    return RankFailure(
        a.where, a.launcher, a.rank if a.rank is not None else b.rank,
        a.local_rank if a.local_rank is not None else b.local_rank,
        a.exitcode if a.exitcode is not None else b.exitcode, a.signal or b.signal,
        a.pid if a.pid is not None else b.pid, a.host or b.host)


def _one_failure(f: RankFailure) -> str:
    about = []
    if f.rank is not None:
        name = f"rank {f.rank}"
        if f.local_rank is not None:
            about.append(f"local_rank {f.local_rank}")
    elif f.local_rank is not None:
        name = f"local_rank {f.local_rank}"
    else:
        name = "a rank"
    if f.pid is not None:
        about.append(f"pid {f.pid}")
    if about:
        name += f" ({', '.join(about)})"
    if f.host:
        name += f" on {f.host}"
    if f.signal == "SIGKILL":
        how = "was killed by SIGKILL"
    elif f.signal:
        how = f"died of {f.signal}"
    elif f.exitcode is not None:
        how = f"exited with code {f.exitcode}"
    else:
        how = "failed"
    if f.exitcode is not None and (f.signal or f.exitcode < 0):
        how += f" (exitcode {f.exitcode})"
    return f"{name} {how}"


def _failure_summary(told: Sequence[RankFailure]) -> str:
    if len(told) == 1 and told[0].launcher == "ChildFailedError":
        return "torchrun reports a failed child process (ChildFailedError); the details were cut"
    parts = [_one_failure(f) for f in told[:4]]
    out = ("Rank failed: " + parts[0] if len(told) == 1 else
           f"{len(told)} ranks failed: " + "; ".join(parts) + ("; …" if len(told) > 4 else ""))
    if any(f.signal == "SIGKILL" for f in told):
        out += " — likely the host OOM killer (see step syslog)"
    return out


def scan(lines: Sequence[LogLine]) -> list[ExplainFinding]:
    """NCCL-step findings of one input: at most one per code, in line order; never raises.

    Args:
        lines: the input's lines as ``probes.rules.logrules.lines.log_lines`` peeled them.

    Returns:
        ``nccl-timeout``, ``nccl-net-error``, ``nccl-error`` and ``rank-failed`` findings.
    """
    report = parse(lines)
    nccl_other = bool(report.net_errors or
                      [e for e in report.errors if e.kind != "aborted"])
    timeout = _timeout_finding(report.timeouts, nccl_other)
    errors_other = bool(report.net_errors or
                        [t for t in report.timeouts if t.kind != "ambiguous"])
    error = _error_finding(report.errors, errors_other)
    found = [timeout, _net_finding(report.net_errors, report.init_complete), error,
             _failure_finding(report.failures), _cuda_oom_via_nccl(error)]
    return sorted((f for f in found if f is not None), key=lambda f: f.line)


def _cuda_oom_via_nccl(error: ExplainFinding | None) -> ExplainFinding | None:
    """A CUDA out-of-memory that NCCL surfaced (``Cuda failure 2 'out of memory'``,
    ``ncclUnhandledCudaError`` with an OOM): the rank ran out of GPU memory, a model-code
    failure of its own, told beside the NCCL error that carried it."""
    if error is None or not re.search(r"out of memory", error.summary + " " + error.evidence,
                                      re.IGNORECASE):
        return None
    extra = {k: v for k, v in error.extra.items() if k in ("rank", "ranks", "host")}
    extra["via"] = "nccl"
    who = f" on rank {extra['rank']}" if "rank" in extra else ""
    return ExplainFinding(Step.MODEL, Code.CUDA_OOM, CRIT, error.line, error.evidence,
                          f"CUDA out of memory{who}, surfaced through NCCL "
                          "(a CUDA error inside a collective)", ACTION_CUDA_OOM,
                          gpu=error.gpu, time=error.time, count=error.count, extra=extra)
