"""Training-log rules: the ``model`` step of triage (what the training program itself hit).

Lines arrive peeled by ``probes.rules.logrules.lines``; every rule matches with ``re.search`` on
the message so that a tqdm bar glued in front, a launcher label in the middle of a flattened
traceback or a prefix the peeler does not know cannot hide a record.

Codes follow ``shared/EXPLAIN-CONTRACT.md``:

* ``cuda-oom`` (``critical``: a CUDA OOM kills the step, and almost always the run) for every
  PyTorch wording (0.x THC ``error=2``, 1.x ``(GPU 1; … total capacity; …)``, 2.1's typo
  ``capacty``, 2.2+ ``Process N has … memory in use``), ``CUDA error: out of memory``,
  ``CUDA_ERROR_OUT_OF_MEMORY``, TensorFlow's ``OOM when allocating tensor`` and XLA's
  ``RESOURCE_EXHAUSTED: Out of memory``.  The amounts are parsed (:func:`parse_oom`) into
  MiB, because they say whether to shrink the batch, fix fragmentation or look for another
  process on the GPU.
* ``illegal-memory-access`` and ``device-side-assert`` (``critical``).  CUDA's hint lines
  (``CUDA kernel errors might be asynchronously reported``, ``Compile with
  `TORCH_USE_CUDA_DSA` to enable device-side assertions``) and c10 ``frame #N`` lines are
  never findings on their own: without the error line they do not say which error it was.
* ``loss-nan`` (``warning``): a loss value that is NaN or inf.  A NaN gradient norm alone is
  not one (fp16 overflow steps report it and are skipped by the loss scaler).
* ``loss-scale-overflow``: ``info`` while the dynamic loss scale is still going down,
  ``critical`` once it is at its minimum (stuck: "reducing" to the same value, or a
  minimum-reached message).

Each code is one finding for the whole input (a message repeated by several log handlers,
or by every rank, is one incident), with ``count`` the number of distinct records, the GPUs
and ranks involved, and the innermost Python traceback frame that raised it.

An uncaught Python exception of any other kind is deliberately not a finding here: most are
the echo of something another step already explains (torchrun's ``ChildFailedError``, a
``DistBackendError`` around an NCCL failure) and a guess would be a false alarm.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from probes.rules.logrules.common import CRIT, INFO, ISO_STAMP, WARN
from probes.rules.logrules.lines import LogLine
from probes.rules.logrules.training.frames import traceback_frames
from probes.rules.logrules.training.records import (
    ASYNC,
    DSA,
    IMA,
    LOSS_KV,
    LOSS_PHRASE,
    NOT_A_LOSS,
    OOM,
    OOM_MORE,
    SCALE,
    Acc,
    Hit,
    Seen,
    assert_detail,
    gpu_name,
    parse_oom,
    parse_scale,
)
from probes.rules.logrules.training.tell import finding
from probes.rules.result import ExplainFinding
from probes.rules.text import clean_line
from probes.triage import Code

DUP_WINDOW = 4
_RANK_IN_TEXT = re.compile(r"\[(?:PG [^\]]{0,60}? )?[Rr]ank ?(\d{1,5})\]")
"""torch's own rank marks inside a message (``[rank7]:`` after a glued progress bar,
``[PG ID 4 PG GUID 19 Rank 1]``, ``[Rank 7]``): the rank when no prefix was peeled."""
"""Lines within which the same record under another prefix is the same record printed by
another log handler (a line repeated byte for byte is the program logging it again)."""

_DECORATION = re.compile(
    r"^(?:\[\s*[A-Z]+\s*\]\s*|[\w.\-]+\s+-\s+[A-Z]+\s+-\s+|[A-Z]+:[\w.\-]*:|\|?\s*[A-Z]+\s*\|\s*"
    r"|[\w.\-]+\s*\|\s*)*")
_SPACES = re.compile(r"\s+")
_TIME_IN = re.compile(ISO_STAMP)


def _record_key(text: str) -> str:
    """The record a line prints, whatever handler printed it (prefix and tab gaps ignored)."""
    squeezed = _SPACES.sub(" ", text).strip()
    return _DECORATION.sub("", squeezed)[-240:]


_SOURCE_LOCATION = re.compile(r"[\w\-]\.(?:cuh?|py|cpp|cc|cxx|c|h|hpp)(?::\d+)+:$")
"""A compiler or Python-warning location (``Loss.cu:87:``, ``x.py:12:``) at a message's start."""


def _unpeel(line: LogLine) -> LogLine:
    """Undo a peel that took a source location for a grep file name and an srun label.

    ``/pytorch/…/ClassNLLCriterion.cu:87: void kernel(…) … Assertion …`` is peeled as file
    ``/pytorch/…/ClassNLLCriterion.cu``, rank 87; the location is part of the message.
    """
    cleaned = clean_line(line.raw).strip()
    if cleaned == line.text or not cleaned.endswith(line.text):
        return line
    prefix = cleaned[:len(cleaned) - len(line.text)].rstrip()
    if not _SOURCE_LOCATION.search(prefix):
        return line
    return replace(line, text=cleaned, host=None, rank=None)


def _time(line: LogLine, start: int) -> str | None:
    if line.time is not None:
        return line.time
    found = _TIME_IN.findall(line.text[:start])
    return found[-1] if found else None


# --- rules ---------------------------------------------------------------------------------


def _oom_hit(lines: Sequence[LogLine], i: int, text: str) -> Hit | None:
    m = OOM.search(text)
    if m is None or "NVRM" in text:
        return None
    detail = text[m.start():]
    for j in range(i + 1, min(i + 3, len(lines))):
        nxt = lines[j].text
        if not OOM_MORE.search(nxt) or OOM.search(nxt):
            break
        detail += " " + nxt
    report = parse_oom(detail)
    return Hit(Code.CUDA_OOM, CRIT, m.start(), gpu=gpu_name(report.gpu), oom=report)


def _ima_hit(lines: Sequence[LogLine], i: int, text: str) -> Hit | None:
    m = IMA.search(text)
    if m is None or "NVRM" in text:
        return None
    near = " ".join(ln.text for ln in lines[i:i + 4])
    return Hit(Code.ILLEGAL_MEMORY_ACCESS, CRIT, m.start(),
                asynchronous=ASYNC.search(near) is not None)


def _dsa_hit(lines: Sequence[LogLine], i: int, text: str) -> Hit | None:
    m = DSA.search(text)
    if m is None:
        return None
    return Hit(Code.DEVICE_SIDE_ASSERT, CRIT, m.start(), detail=assert_detail(m, text))


def _nan_hit(lines: Sequence[LogLine], i: int, text: str) -> Hit | None:
    keys: list[str] = []
    start = -1
    for m in LOSS_KV.finditer(text):
        key = _SPACES.sub(" ", m.group("key"))
        if NOT_A_LOSS.search(key):
            continue
        if key not in keys:
            keys.append(key)
        start = m.start() if start < 0 else start
    phrase = LOSS_PHRASE.search(text)
    if phrase is not None:
        start = phrase.start() if start < 0 else min(start, phrase.start())
    if start < 0:
        return None
    return Hit(Code.LOSS_NAN, WARN, start, keys=tuple(keys))


def _scale_hit(lines: Sequence[LogLine], i: int, text: str) -> Hit | None:
    m = SCALE.search(text)
    if m is None:
        return None
    event = parse_scale(m)
    return Hit(Code.LOSS_SCALE_OVERFLOW, CRIT if event.stuck else INFO, m.start(), scale=event)


Rule = Callable[[Sequence[LogLine], int, str], Hit | None]
_RULES: tuple[tuple[tuple[str, ...], Rule], ...] = (
    (("memory", "outofmemory", "oom when", "resource_exhausted"), _oom_hit),
    (("illegal", "error=77", "(77)"), _ima_hit),
    (("assert", "error=59", "(59)"), _dsa_hit),
    (("nan", "inf"), _nan_hit),
    (("overflow", "loss scale"), _scale_hit),
)
"""Each rule with the lowercase words every one of its matches contains: a cheap test first."""
_CUE_WORDS = tuple(w for words, _ in _RULES for w in words)


def cue(line: LogLine) -> bool:
    """Whether any rule could match this line (its words are in it): a line without them
    adds nothing of its own to what :func:`scan` finds, so a live scan may skip the family
    when no new line has them (``probes.rules.logrules.live``)."""
    low = line.raw.lower()
    return any(w in low for w in _CUE_WORDS)


def scan(lines: Sequence[LogLine]) -> list[ExplainFinding]:
    """Model-code findings of one input: at most one per code, in line order.

    Args:
        lines: the input's lines as ``probes.rules.logrules.lines.log_lines`` peeled them.

    Returns:
        Findings of the ``model`` step; ``count`` is the number of distinct records (the same
        record printed by several log handlers counts once).
    """
    accs: dict[Code, Acc] = {}
    lines = [_unpeel(line) for line in lines]
    for i, line in enumerate(lines):
        text = line.text
        low = text.lower()
        for words, rule in _RULES:
            if not any(w in low for w in words):
                continue
            hit = rule(lines, i, text)
            if hit is None:
                continue
            acc = accs.setdefault(hit.code, Acc())
            if line.rank is None and (mark := _RANK_IN_TEXT.search(text)) is not None:
                line = replace(line, rank=int(mark.group(1)))
            key = (_record_key(text), line.host, line.rank)
            last = acc.last.get(key)
            acc.last[key] = (line.number, line.raw)
            new = last is None or line.number - last[0] > DUP_WINDOW or line.raw == last[1]
            frames = tuple(traceback_frames(lines, i, hit.start))
            acc.seen.append(Seen(line, hit, _time(line, hit.start), frames, new))
    out = [finding(code, acc) for code, acc in accs.items()]
    return sorted(out, key=lambda f: f.line)
