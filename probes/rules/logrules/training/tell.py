"""Telling: the lines of one training-log code worded as one finding (summary, action, extra).

Each code is one finding for the whole input (a message repeated by several log handlers,
or by every rank, is one incident), with ``count`` the number of distinct records, the GPUs
and ranks involved, and the innermost Python traceback frame that raised it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from probes.rules.logrules.common import CRIT, EVIDENCE_MAX, GAP, clip_evidence, unique
from probes.rules.logrules.lines import LogLine
from probes.rules.logrules.training.frames import user_frame
from probes.rules.logrules.training.records import (
    CAUSES,
    Acc,
    OomReport,
    ScaleEvent,
    Seen,
    gpu_name,
    show_scale,
)
from probes.rules.result import ExplainFinding
from probes.rules.text import clean_line
from probes.triage import Code, Step

EVIDENCE_BEFORE = 200
"""Characters of a long line kept before the hit (more than NCCL's: a traceback's head)."""
OTHER_USE_MIB = 2048.0
"""GPU memory outside this process's allocator above this suggests another process (the CUDA
context and libraries alone take a few hundred MiB to ~1 GiB)."""

# --- telling -------------------------------------------------------------------------------

ACTION_IMA = (
    "First check the syslog step for an Xid 13, 31 or 43 on that GPU at the same time: a GPU "
    "or driver fault shows there. Otherwise it is a kernel reading or writing outside its "
    "memory: the CUDA context is unusable, restart the process; rerun with "
    "CUDA_LAUNCH_BLOCKING=1 to find the faulting op (errors are reported asynchronously, so "
    "the traceback may point at a later call) and suspect custom CUDA extensions, "
    "out-of-range indices and mismatched library builds (flash-attn, apex, xformers)")
ACTION_DSA = (
    "A kernel's bounds check failed on the GPU; check the tensors it indexes with: class "
    "labels in [0, num_classes), token ids below the vocabulary size, gather/scatter indices "
    "inside the dimension. Rerun with CUDA_LAUNCH_BLOCKING=1 (or the same batch on CPU) for "
    "the exact op; the CUDA context is unusable after the assert, restart the process")
ACTION_NAN = (
    "The run has diverged: resume from a checkpoint before the first NaN with a lower learning "
    "rate or longer warmup and gradient clipping; check the batch for NaN/inf inputs or bad "
    "labels; with fp16 prefer bf16 or check the loss scaler; torch.autograd.detect_anomaly() "
    "names the first op that produced the NaN")
ACTION_SCALE_INFO = (
    "Occasional overflows are normal with dynamic loss scaling (the step is skipped and the "
    "scale halved). If they keep coming, lower the learning rate, clip gradients, look for bad "
    "batches, or train in bf16")
ACTION_SCALE_CRIT = (
    "Every step overflows and is skipped: the weights are not updating. Stop the run; restart "
    "from a checkpoint before the collapse with a lower learning rate, gradient clipping or "
    "bf16, and look for NaN/inf in inputs or the loss")
_FRAMEWORK_OOM = re.compile(r"OOM when allocating|RESOURCE_EXHAUSTED")


def _mib(v: float) -> str:
    return f"{v / 1024:.2f} GiB" if v >= 1024 else f"{v:.2f} MiB"


def _oom_story(seen: list[Seen], ev: Seen) -> tuple[str, str, dict[str, object]]:
    reports = [s.hit.oom for s in seen if s.hit.oom is not None]
    best = max(reports, key=lambda r: len(r.shown), default=OomReport())
    if ev.hit.oom is not None and len(ev.hit.oom.shown) >= len(best.shown):
        best = ev.hit.oom
    parts = []
    if best.printed("requested"):
        parts.append(f"tried to allocate {best.printed('requested')}")
    if best.printed("free") and best.printed("total"):
        parts.append(f"{best.printed('free')} free of {best.printed('total')}")
    elif best.printed("total"):
        parts.append(f"{best.printed('total')} total")
    held = []
    if best.printed("allocated"):
        held.append(f"{best.printed('allocated')} allocated by PyTorch")
    if best.printed("unallocated"):
        held.append(f"{best.printed('unallocated')} reserved but unallocated")
    elif best.printed("reserved"):
        held.append(f"{best.printed('reserved')} reserved in total")
    if best.printed("in_use"):
        parts.append(f"this process holds {best.printed('in_use')}"
                     + (f" ({', '.join(held)})" if held else ""))
    elif held:
        parts.append(", ".join(held))
    if len(best.processes) > 1:
        parts.append(f"{len(best.processes)} processes on the GPU")
    word = "GPU out of memory" if _FRAMEWORK_OOM.search(ev.line.text) else "CUDA out of memory"
    summary = word + "{where}" + (": " + "; ".join(parts) if parts else "")
    extra: dict[str, object] = {}
    for key, value in (("requested_mib", best.requested_mib), ("total_mib", best.total_mib),
                       ("free_mib", best.free_mib), ("process_in_use_mib",
                                                     best.process_in_use_mib),
                       ("allocated_mib", best.allocated_mib), ("reserved_mib", best.reserved_mib),
                       ("reserved_unallocated_mib", best.reserved_unallocated_mib)):
        if value is not None:
            extra[key] = value
    if best.processes:
        extra["processes"] = [{"pid": pid, "mib": mib} for pid, mib in best.processes]
    outside = best.outside_mib
    if outside is not None:
        extra["outside_mib"] = outside
    steps = []
    others = len(best.processes) > 1 or (outside is not None and outside >= OTHER_USE_MIB)
    gpu = gpu_name(best.gpu) or "the GPU"
    if others:
        what = (f"{len(best.processes)} processes hold memory" if len(best.processes) > 1
                else f"{_mib(outside or 0.0)} is in use outside this process's allocator")
        steps.append(f"On {gpu} {what}: check what else runs there first (gpu step: "
                     "nvidia-smi --query-compute-apps=pid,used_memory --format=csv; a leftover "
                     "or second job) before shrinking the model")
    if best.fragmented:
        steps.append(f"{best.printed('unallocated') or _mib(best.reserved_unallocated_mib or 0)}"
                     " is reserved but unallocated (fragmentation): set "
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (torch >= 2.1; "
                     "max_split_size_mb on older versions)")
    steps.append("Reduce the per-GPU batch size (gradient accumulation keeps the global batch), "
                 "sequence length or resolution; use activation checkpointing, bf16/fp16, or "
                 "shard optimizer state (ZeRO, FSDP)")
    if not others:
        steps.append("Check that no other process holds memory on that GPU (gpu step, "
                     "nvidia-smi); the GPU number is the process's CUDA index, after "
                     "CUDA_VISIBLE_DEVICES")
    return summary, ". ".join(steps), extra


def _ima_story(seen: list[Seen], ev: Seen) -> tuple[str, str, dict[str, object]]:
    summary = "CUDA illegal memory access{where}: a kernel touched memory outside its buffers"
    extra: dict[str, object] = {}
    if any(s.hit.asynchronous for s in seen):
        summary += " (reported asynchronously: the traceback may not show the faulting kernel)"
        extra["asynchronous"] = True
    return summary, ACTION_IMA, extra


def _dsa_story(seen: list[Seen], ev: Seen) -> tuple[str, str, dict[str, object]]:
    kernel = site = cond = None
    for s in seen:
        d = s.hit.detail
        if d is None:
            continue
        kernel, site, cond = kernel or d.kernel, site or d.site, cond or d.condition
    summary = "CUDA device-side assert{where}"
    extra: dict[str, object] = {}
    if kernel or site:
        where = " ".join(x for x in (kernel, f"({site})" if site and kernel else site) if x)
        summary += f" in {where}"
    if kernel:
        extra["kernel"] = kernel
    if site:
        extra["site"] = site
    if cond:
        summary += f": `{cond}` failed"
        extra["condition"] = cond
        for pattern, cause in CAUSES:
            if pattern.search(cond):
                summary += f" ({cause})"
                extra["likely_cause"] = cause
                break
    return summary, ACTION_DSA, extra


def _nan_story(seen: list[Seen], ev: Seen) -> tuple[str, str, dict[str, object]]:
    keys: list[str] = []
    for s in seen:
        keys.extend(k for k in s.hit.keys if k not in keys)
    records = sum(1 for s in seen if s.new_record)
    summary = "Loss became NaN/inf{where}"
    if keys:
        shown = ", ".join(keys[:6]) + (", …" if len(keys) > 6 else "")
        summary += f" ({shown})"
    summary += f" in {records} logged step{'s' if records != 1 else ''}"
    extra: dict[str, object] = {"keys": keys} if keys else {}
    return summary, ACTION_NAN, extra


def _scale_story(seen: list[Seen], ev: Seen) -> tuple[str, str, dict[str, object]]:
    values: list[float] = []
    for s in seen:
        e = s.hit.scale
        if e is None:
            continue
        values.extend(v for v in (e.attempted, e.reduced_to, e.minimum_value) if v is not None)
    records = sum(1 for s in seen if s.new_record)
    extra: dict[str, object] = {"overflows": records}
    if values:
        extra["lowest_scale"] = min(values)
        extra["highest_scale"] = max(values)
    steps = f"{records} overflow step{'s' if records != 1 else ''}"
    if ev.hit.severity is CRIT:
        e = ev.hit.scale or ScaleEvent()
        if e.minimum:
            at = f" ({show_scale(e.minimum_value)})" if e.minimum_value is not None else ""
            summary = (f"fp16 loss scale reached its minimum{at}{{where}}: gradients overflow "
                       f"even at the smallest scale ({steps})")
        else:
            low = show_scale(min(values)) if values else "?"
            summary = (f"fp16 loss scale stuck at its minimum ({low}){{where}}: every step "
                       f"overflows and is skipped, the weights are not updating ({steps})")
        return summary, ACTION_SCALE_CRIT, extra
    summary = f"fp16 gradient overflow{{where}}: {steps} skipped"
    if values and min(values) != max(values):
        summary += (f", loss scale reduced from {show_scale(max(values))} to "
                    f"{show_scale(min(values))}")
    elif values:
        summary += f" at loss scale {show_scale(values[0])}"
    return summary, ACTION_SCALE_INFO, extra


Story = Callable[[list[Seen], Seen], tuple[str, str, dict[str, object]]]
_STORIES: dict[Code, Story] = {
    Code.CUDA_OOM: _oom_story, Code.ILLEGAL_MEMORY_ACCESS: _ima_story,
    Code.DEVICE_SIDE_ASSERT: _dsa_story, Code.LOSS_NAN: _nan_story,
    Code.LOSS_SCALE_OVERFLOW: _scale_story}


def _where(gpus: list[object], ranks: list[object], hosts: list[object]) -> str:
    out = ""
    if len(gpus) == 1:
        out += f" on {gpus[0]}"
    elif gpus:
        out += f" on {len(gpus)} GPUs ({', '.join(str(g) for g in gpus[:8])}"
        out += ", …)" if len(gpus) > 8 else ")"
    if len(hosts) > 1:
        out += f" on {len(hosts)} hosts"
    elif hosts:
        out += f" on {hosts[0]}"
    if len(ranks) == 1:
        out += f" (rank {ranks[0]})"
    elif ranks:
        shown = ", ".join(str(r) for r in ranks[:8]) + (", …" if len(ranks) > 8 else "")
        out += f" (ranks {shown})"
    return out


def finding(code: Code, acc: Acc) -> ExplainFinding:
    seen = acc.seen
    worst = max(seen, key=lambda s: s.hit.severity.rank).hit.severity
    ev = next(s for s in seen if s.hit.severity is worst)
    gpus = unique([s.hit.gpu for s in seen])
    ranks = unique([s.line.rank for s in seen])
    hosts = unique([s.line.host for s in seen])
    summary, action, extra = _STORIES[code](seen, ev)
    summary = summary.replace("{where}", _where(gpus, ranks, hosts))
    frames = ev.frames or next((s.frames for s in seen if s.frames), ())
    if frames:
        inner = frames[-1]
        extra["frame"] = str(inner)
        summary += f"; raised at {inner.short}"
        user = user_frame(list(frames))
        if user is not None and user != inner:
            extra["user_frame"] = str(user)
            summary += f", called from {user.short}"
    if len(gpus) > 1:
        extra["gpus"] = gpus
    if ranks:
        extra["ranks"] = ranks
    if len(hosts) > 1:
        extra["hosts"] = hosts
    count = sum(1 for s in seen if s.new_record)
    return ExplainFinding(Step.MODEL, code, worst, ev.line.number, _evidence(ev.line, ev.hit.start),
                          summary, action, gpu=str(gpus[0]) if gpus else None, time=ev.time,
                          count=max(1, count), extra=extra)



def _evidence(line: LogLine, start: int) -> str:
    """The line as given, tqdm padding closed up, cut around the hit when very long."""
    raw = GAP.sub(" ", clean_line(line.raw).strip())
    if len(raw) <= EVIDENCE_MAX:
        return raw
    anchor = line.text[start:start + 40]
    at = raw.find(anchor) if anchor else -1
    return clip_evidence(raw, raw, at, before=EVIDENCE_BEFORE)
