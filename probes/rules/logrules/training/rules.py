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
from dataclasses import dataclass, field, replace

from probes.rules.logrules.lines import LogLine
from probes.rules.result import ExplainFinding
from probes.rules.text import clean_line
from probes.triage import Severity, Step

CRIT = Severity.CRITICAL
WARN = Severity.WARNING
INFO = Severity.INFO

EVIDENCE_MAX = 600
"""Evidence is one log line; a pathological line (a flattened traceback) is cut around the hit."""
DUP_WINDOW = 4
"""Lines within which the same record under another prefix is the same record printed by
another log handler (a line repeated byte for byte is the program logging it again)."""
FRAGMENTED_MIB = 256.0
"""Reserved-but-unallocated memory at least this large (and above the request) is fragmentation."""
OTHER_USE_MIB = 2048.0
"""GPU memory outside this process's allocator above this suggests another process (the CUDA
context and libraries alone take a few hundred MiB to ~1 GiB)."""

# --- amounts -------------------------------------------------------------------------------

_AMT = r"(?P<{0}>\d+(?:\.\d+)?)\s*(?P<{0}_u>[KMGTP]i?B|bytes|B)\b"
_UNIT_MIB: dict[str, float] = {
    "b": 1 / 1048576, "bytes": 1 / 1048576, "kb": 1 / 1024, "kib": 1 / 1024, "mb": 1.0,
    "mib": 1.0, "gb": 1024.0, "gib": 1024.0, "tb": 1048576.0, "tib": 1048576.0,
    "pb": 1073741824.0, "pib": 1073741824.0}


def _amount(name: str) -> str:
    return _AMT.format(name)


def to_mib(number: str, unit: str) -> float | None:
    """``"7.79", "GiB"`` → 7976.96; None for a unit this does not know."""
    factor = _UNIT_MIB.get(unit.lower())
    if factor is None:
        return None
    try:
        return round(float(number) * factor, 4)
    except ValueError:
        return None


# --- cuda-oom ------------------------------------------------------------------------------

_OOM = re.compile(
    r"(?:(?:Error|ERROR|error|Exception)\s*:\s*|^)(?:CUDA|HIP) out of memory"
    r"|(?:CUDA|HIP) out of memory\.?\s*(?:Tried to allocate|\(GPU|$)"
    r"|CUDA error:\s*out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY"
    r"|cuda runtime error \(2\)\s*:\s*out of memory|error=2\s*:\s*out of memory"
    r"|(?:^|(?<=: )|(?<=\] ))torch\.(?:cuda\.)?OutOfMemoryError\b(?=:|$)"
    r"|Caught OutOfMemoryError in replica"
    r"|OOM when allocating tensor|RESOURCE_EXHAUSTED:\s*Out of memory")
_OOM_MORE = re.compile(
    r"total capac|already allocated|is free|\bfree;|reserved|allocated by PyTorch"
    r"|memory in use|Tried to allocate|device:GPU:")
"""Words of an OOM report's later sentences: a wrapped or split report continues with them."""
_TRIED = re.compile(r"(?:Tried|trying) to allocate\s+" + _amount("v"), re.IGNORECASE)
_NEW_TOTAL = re.compile(r"GPU\s*(?P<gpu>\d+) has a total capac[a-z]*\s+of\s+" + _amount("v"))
_NEW_FREE = re.compile(r"of which\s+" + _amount("v") + r"\s+is free")
_IN_USE = re.compile(r"this process has\s+" + _amount("v") + r"\s+memory in use")
_PROCESS = re.compile(r"Process\s+(?P<pid>\d+)\s+has\s+" + _amount("v") + r"\s+memory in use")
_NEW_ALLOC = re.compile(r"Of the allocated memory\s+" + _amount("v") + r"\s+is allocated by")
_UNALLOC = re.compile(_amount("v") + r"\s+is reserved by PyTorch but unallocated")
_OLD_TOTAL = re.compile(r"\(GPU\s*(?P<gpu>\d+);\s*" + _amount("v") + r"\s+total capacity")
_OLD_ALLOC = re.compile(_amount("v") + r"\s+already allocated")
_OLD_FREE = re.compile(r";\s*" + _amount("v") + r"\s+free\b")
_OLD_RESERVED = re.compile(_amount("v") + r"\s+reserved in total by PyTorch")
_OLD_CACHED = re.compile(r";\s*" + _amount("v") + r"\s+cached\b")
"""torch 1.0-1.3 printed ``cached - allocated`` as ``N cached``: the unallocated part."""
_OOM_GPU = re.compile(r"device:GPU:(?P<a>\d+)|on device (?P<b>\d+)|\bGPU\s*(?P<c>\d+)\b")


@dataclass(frozen=True)
class OomReport:
    """What a CUDA OOM message says, amounts in MiB (None where the wording has no such part).

    ``reserved_mib`` is all memory PyTorch's caching allocator holds (allocated plus cached);
    ``reserved_unallocated_mib`` is the cached part, printed by torch 2.x and computed from
    the 1.x wording.  The printed amounts are kept (``shown``) so a summary quotes them.
    """

    gpu: int | None = None
    requested_mib: float | None = None
    total_mib: float | None = None
    free_mib: float | None = None
    process_in_use_mib: float | None = None
    allocated_mib: float | None = None
    reserved_mib: float | None = None
    reserved_unallocated_mib: float | None = None
    processes: tuple[tuple[int, float], ...] = ()
    shown: tuple[tuple[str, str], ...] = ()

    def printed(self, name: str) -> str | None:
        """An amount as the message printed it (``"64.00 MiB"``)."""
        return dict(self.shown).get(name)

    @property
    def outside_mib(self) -> float | None:
        """GPU memory in use that is not this process's (2.x) or not PyTorch's (1.x)."""
        if self.total_mib is None or self.free_mib is None:
            return None
        mine = self.process_in_use_mib if self.process_in_use_mib is not None else \
            self.reserved_mib
        if mine is None:
            return None
        return max(0.0, round(self.total_mib - self.free_mib - mine, 4))

    @property
    def fragmented(self) -> bool:
        """Cached-but-unused memory could have held the request, had it been contiguous."""
        un = self.reserved_unallocated_mib
        return un is not None and un >= FRAGMENTED_MIB and (
            self.requested_mib is None or un >= self.requested_mib)


def parse_oom(text: str) -> OomReport:
    """Read the amounts of one OOM message (any PyTorch generation; a cut message gives what
    it has); never raises."""
    values: dict[str, float] = {}
    shown: list[tuple[str, str]] = []
    gpu: int | None = None
    patterns = (("requested", _TRIED), ("total", _NEW_TOTAL), ("free", _NEW_FREE),
                ("in_use", _IN_USE), ("allocated", _NEW_ALLOC), ("unallocated", _UNALLOC),
                ("total", _OLD_TOTAL), ("allocated", _OLD_ALLOC), ("free", _OLD_FREE),
                ("reserved", _OLD_RESERVED), ("unallocated", _OLD_CACHED))
    for name, pattern in patterns:
        if name in values:
            continue
        m = pattern.search(text)
        if m is None:
            continue
        mib = to_mib(m.group("v"), m.group("v_u"))
        if mib is None:
            continue
        values[name] = mib
        shown.append((name, f"{m.group('v')} {m.group('v_u')}"))
        if "gpu" in pattern.groupindex and gpu is None:
            gpu = int(m.group("gpu"))
    if gpu is None:
        g = _OOM_GPU.search(text)
        if g is not None:
            gpu = int(g.group("a") or g.group("b") or g.group("c"))
    processes = []
    for p in _PROCESS.finditer(text):
        mib = to_mib(p.group("v"), p.group("v_u"))
        if mib is not None:
            processes.append((int(p.group("pid")), mib))
    allocated = values.get("allocated")
    reserved = values.get("reserved")
    unallocated = values.get("unallocated")
    if reserved is None and allocated is not None and unallocated is not None:
        reserved = round(allocated + unallocated, 4)
    if unallocated is None and allocated is not None and reserved is not None:
        unallocated = max(0.0, round(reserved - allocated, 4))
    return OomReport(gpu, values.get("requested"), values.get("total"), values.get("free"),
                     values.get("in_use"), allocated, reserved, unallocated, tuple(processes),
                     tuple(shown))


# --- illegal-memory-access, device-side-assert ---------------------------------------------

_IMA = re.compile(
    r"illegal memory access (?:was )?encountered|CUDA error:\s*an illegal mem"
    r"|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS"
    r"|cuda runtime error \(77\)|\berror=77\b", re.IGNORECASE)
_ASYNC = re.compile(r"asynchronously reported|CUDA_LAUNCH_BLOCKING")
_DSA = re.compile(
    r"block:\s*\[[\d,\s]*\],?\s*thread:\s*\[[\d,\s]*\],?\s*Assertion\s*`(?P<cond>[^`]*)"
    r"|device-side assert triggered|cudaErrorAssert\b|CUDA_ERROR_ASSERT\b"
    r"|cuda runtime error \(59\)|\berror=59\b")
_CU_SITE = re.compile(r"\.cuh?:(?P<ln>\d+):\s*")
SITE_WINDOW = 1500
"""Characters before an assertion searched for its ``file.cu:NN: kernel-signature:`` head."""


@dataclass(frozen=True)
class AssertDetail:
    """A device-side assert's kernel, source location and failed condition, where printed."""

    kernel: str | None = None
    site: str | None = None
    condition: str | None = None


def _kernel_name(sig: str) -> str | None:
    """``void ns::cunn_X_kernel<T>(Dtype *, …) [with …]`` → ``cunn_X_kernel``."""
    sig = sig.replace("(anonymous namespace)", "anon").strip()
    if not sig:
        return None
    if "operator()" in sig:
        return "operator()"
    head = sig.split("(", 1)[0].split("[", 1)[0].split("<", 1)[0].strip()
    name = head.split()[-1].split("::")[-1] if head.split() else ""
    return name[:80] or None


def _assert_detail(m: re.Match[str], text: str) -> AssertDetail:
    cond = m.group("cond")
    if cond is None:
        return AssertDetail()
    head = text[max(0, m.start() - SITE_WINDOW):m.start()]
    site = _CU_SITE.search(head)
    if site is None:
        return AssertDetail(condition=cond.strip() or None)
    begin = site.start()
    while begin > 0 and (head[begin - 1].isalnum() or head[begin - 1] in "_.-"):
        begin -= 1
    name = head[begin:site.end()].split(":", 1)[0]
    sig = head[site.end():].rstrip().rstrip(":").strip()
    return AssertDetail(_kernel_name(sig), f"{name}:{site.group('ln')}", cond.strip() or None)


_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"n_classes|n_class|num_classes|t >= 0"),
     "a class label outside [0, n_classes): check the targets against the model's output size"),
    (re.compile(r"index out of bounds|srcIndex < srcSelectDimSize|idx_dim|index >= -sizes"),
     "an index outside the tensor (e.g. token ids >= the embedding's vocabulary size)"),
    (re.compile(r"input_val >= zero && input_val <= one|input >= 0\. && input <= 1\."),
     "BCELoss input outside [0, 1]: apply sigmoid first or use BCEWithLogitsLoss"),
)


# --- loss-nan ------------------------------------------------------------------------------

_LOSS_KV = re.compile(
    r"(?<![\w.])['\"]?(?P<key>(?:[A-Za-z][A-Za-z0-9]*[_/])*loss(?:[_/][A-Za-z0-9]+)*"
    r"|(?:lm|train|training|val|valid|validation|eval|test|total)\s+loss)['\"]?"
    r"\s*(?:[:=]\s*|\s+)(?:tensor\(\s*)?['\"]?(?P<val>[-+]?(?:nan|inf(?:inity)?))\b",
    re.IGNORECASE)
_NOT_A_LOSS = re.compile(
    r"(?:^|[_/])(?:scale|scaler|scaling|weight|weights|threshold|clip|coef|coeff)(?:$|[_/])"
    r"|(?:^|[_/])(?:best|min|lowest|prev|previous|init|initial)(?:$|[_/])", re.IGNORECASE)
"""Keys that are not a loss value (``loss_scale``) or start at inf by design (``best_loss``)."""
_LOSS_PHRASE = re.compile(
    r"\bloss (?:is|was|became|becomes|has become|went to)\s+(?:nan|inf|infinite|not finite)\b"
    r"|\b(?:nan|inf|non-finite) loss(?:es)? (?:detected|encountered)"
    r"|number of nan iterations:\s*(?P<n>[1-9]\d*)", re.IGNORECASE)


# --- loss-scale-overflow -------------------------------------------------------------------

_NUM = r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_SCALE = re.compile(
    rf"(?i:overflow)!.{{0,80}}?Attempted loss scale:\s*(?P<from>{_NUM})"
    rf"(?:\s*,\s*(?:reducing to\s*(?P<to>{_NUM})|but hysteresis is\s*\d+))?"
    rf"|Gradient overflow\.\s+Skipping step,\s*(?:loss scaler \d+\s+)?reducing loss scale to\s*"
    rf"(?P<to2>{_NUM})"
    rf"|(?:gradient )?overflow detected, (?:ignoring gradient, )?setting loss scale to:?\s*"
    rf"(?P<to3>{_NUM})"
    rf"|(?P<minimum>Minimum loss scale reached(?:\s*\((?P<min>{_NUM})\))?"
    rf"|loss scale already at minimum)"
    rf"|Grad overflow on iteration\s*:?\s*\d+")


@dataclass(frozen=True)
class ScaleEvent:
    """One loss-scaler overflow record: the scale tried, the scale set, or a minimum reached."""

    attempted: float | None = None
    reduced_to: float | None = None
    minimum: bool = False
    minimum_value: float | None = None

    @property
    def stuck(self) -> bool:
        """At the minimum: the scaler cannot go lower (or fell to zero), every step is skipped."""
        if self.minimum:
            return True
        if self.reduced_to is not None and self.reduced_to <= 0:
            return True
        return (self.attempted is not None and self.reduced_to is not None
                and self.reduced_to >= self.attempted)


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_scale(m: re.Match[str]) -> ScaleEvent:
    """The :data:`_SCALE` match as numbers."""
    to = m.group("to") or m.group("to2") or m.group("to3")
    return ScaleEvent(_num(m.group("from")), _num(to), m.group("minimum") is not None,
                      _num(m.group("min")))


def _show_scale(v: float) -> str:
    return str(int(v)) if v.is_integer() and abs(v) < 1e18 else repr(v)


# --- tracebacks ----------------------------------------------------------------------------

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<ln>\d+)(?:, in (?P<fn>[^\s,]+))?')
_LIBRARY = re.compile(r"[/\\](?:site-packages|dist-packages|lib[/\\]python\d[\d.]*)[/\\]"
                      r"|^<frozen |^<string>$")
FRAME_GAP = 4
"""Lines an exception may sit below its innermost frame (source line, ``^^^`` marks, a hint)."""


@dataclass(frozen=True)
class Frame:
    """One ``File "…", line N, in fn`` frame of a Python traceback."""

    path: str
    line: int
    function: str | None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}"
        return f"{where} in {self.function}" if self.function else where

    @property
    def short(self) -> str:
        base = re.split(r"[/\\]", self.path)[-1] or self.path
        where = f"{base}:{self.line}"
        return f"{where} in {self.function}" if self.function else where


def _frame(m: re.Match[str]) -> Frame:
    return Frame(m.group("path"), int(m.group("ln")), m.group("fn"))


def traceback_frames(lines: Sequence[LogLine], i: int, start: int) -> list[Frame]:
    """The frames of the traceback that ends at line ``i`` (outermost first; empty if none).

    The exception line follows its innermost frame within a few lines, or on the same line
    when a launcher flattened the traceback; each earlier frame is a few lines above the
    next.
    """
    same = list(_FRAME.finditer(lines[i].text[:start]))
    if same:
        return [_frame(m) for m in same]
    frames: list[Frame] = []
    limit = i - FRAME_GAP
    j = i - 1
    while j >= max(0, limit) and len(frames) < 200:
        found = list(_FRAME.finditer(lines[j].text))
        if found:
            frames[:0] = [_frame(m) for m in found]
            limit = j - FRAME_GAP
        elif "Traceback (most recent call last)" in lines[j].text:
            break
        j -= 1
    return frames


def _user_frame(frames: list[Frame]) -> Frame | None:
    for f in reversed(frames):
        if not _LIBRARY.search(f.path):
            return f
    return None


# --- accumulating --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hit:
    """What one rule made of one line, before the lines of one code become a finding."""

    code: str
    severity: Severity
    start: int
    gpu: str | None = None
    oom: OomReport | None = None
    detail: AssertDetail | None = None
    scale: ScaleEvent | None = None
    keys: tuple[str, ...] = ()
    asynchronous: bool = False


@dataclass(frozen=True)
class _Seen:
    line: LogLine
    hit: _Hit
    time: str | None
    frames: tuple[Frame, ...]
    new_record: bool


@dataclass
class _Acc:
    seen: list[_Seen] = field(default_factory=list)
    last: dict[tuple[str, str | None, int | None], tuple[int, str]] = field(
        default_factory=dict)
    """Per record key: the line number and raw text it was last printed with."""


_DECORATION = re.compile(
    r"^(?:\[\s*[A-Z]+\s*\]\s*|[\w.\-]+\s+-\s+[A-Z]+\s+-\s+|[A-Z]+:[\w.\-]*:|\|?\s*[A-Z]+\s*\|\s*"
    r"|[\w.\-]+\s*\|\s*)*")
_SPACES = re.compile(r"\s+")
_GAP = re.compile(r" {8,}")
_TIME_IN = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?")


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


def _evidence(line: LogLine, start: int) -> str:
    """The line as given, tqdm padding closed up, cut around the hit when very long."""
    raw = _GAP.sub(" ", clean_line(line.raw).strip())
    if len(raw) <= EVIDENCE_MAX:
        return raw
    anchor = line.text[start:start + 40]
    at = raw.find(anchor) if anchor else -1
    begin = max(0, at - 200) if at >= 0 else 0
    out = raw[begin:begin + EVIDENCE_MAX]
    return ("…" if begin else "") + out


def _gpu_name(n: int | None) -> str | None:
    return None if n is None else f"GPU{n}"


# --- rules ---------------------------------------------------------------------------------


def _oom_hit(lines: Sequence[LogLine], i: int, text: str) -> _Hit | None:
    m = _OOM.search(text)
    if m is None or "NVRM" in text:
        return None
    detail = text[m.start():]
    for j in range(i + 1, min(i + 3, len(lines))):
        nxt = lines[j].text
        if not _OOM_MORE.search(nxt) or _OOM.search(nxt):
            break
        detail += " " + nxt
    report = parse_oom(detail)
    return _Hit("cuda-oom", CRIT, m.start(), gpu=_gpu_name(report.gpu), oom=report)


def _ima_hit(lines: Sequence[LogLine], i: int, text: str) -> _Hit | None:
    m = _IMA.search(text)
    if m is None or "NVRM" in text:
        return None
    near = " ".join(ln.text for ln in lines[i:i + 4])
    return _Hit("illegal-memory-access", CRIT, m.start(),
                asynchronous=_ASYNC.search(near) is not None)


def _dsa_hit(lines: Sequence[LogLine], i: int, text: str) -> _Hit | None:
    m = _DSA.search(text)
    if m is None:
        return None
    return _Hit("device-side-assert", CRIT, m.start(), detail=_assert_detail(m, text))


def _nan_hit(lines: Sequence[LogLine], i: int, text: str) -> _Hit | None:
    keys: list[str] = []
    start = -1
    for m in _LOSS_KV.finditer(text):
        key = _SPACES.sub(" ", m.group("key"))
        if _NOT_A_LOSS.search(key):
            continue
        if key not in keys:
            keys.append(key)
        start = m.start() if start < 0 else start
    phrase = _LOSS_PHRASE.search(text)
    if phrase is not None:
        start = phrase.start() if start < 0 else min(start, phrase.start())
    if start < 0:
        return None
    return _Hit("loss-nan", WARN, start, keys=tuple(keys))


def _scale_hit(lines: Sequence[LogLine], i: int, text: str) -> _Hit | None:
    m = _SCALE.search(text)
    if m is None:
        return None
    event = parse_scale(m)
    return _Hit("loss-scale-overflow", CRIT if event.stuck else INFO, m.start(), scale=event)


Rule = Callable[[Sequence[LogLine], int, str], _Hit | None]
_RULES: tuple[tuple[tuple[str, ...], Rule], ...] = (
    (("memory", "outofmemory", "oom when", "resource_exhausted"), _oom_hit),
    (("illegal", "error=77", "(77)"), _ima_hit),
    (("assert", "error=59", "(59)"), _dsa_hit),
    (("nan", "inf"), _nan_hit),
    (("overflow", "loss scale"), _scale_hit),
)
"""Each rule with the lowercase words every one of its matches contains: a cheap test first."""


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


def _oom_story(seen: list[_Seen], ev: _Seen) -> tuple[str, str, dict[str, object]]:
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
    gpu = _gpu_name(best.gpu) or "the GPU"
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


def _ima_story(seen: list[_Seen], ev: _Seen) -> tuple[str, str, dict[str, object]]:
    summary = "CUDA illegal memory access{where}: a kernel touched memory outside its buffers"
    extra: dict[str, object] = {}
    if any(s.hit.asynchronous for s in seen):
        summary += " (reported asynchronously: the traceback may not show the faulting kernel)"
        extra["asynchronous"] = True
    return summary, ACTION_IMA, extra


def _dsa_story(seen: list[_Seen], ev: _Seen) -> tuple[str, str, dict[str, object]]:
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
        for pattern, cause in _CAUSES:
            if pattern.search(cond):
                summary += f" ({cause})"
                extra["likely_cause"] = cause
                break
    return summary, ACTION_DSA, extra


def _nan_story(seen: list[_Seen], ev: _Seen) -> tuple[str, str, dict[str, object]]:
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


def _scale_story(seen: list[_Seen], ev: _Seen) -> tuple[str, str, dict[str, object]]:
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
            at = f" ({_show_scale(e.minimum_value)})" if e.minimum_value is not None else ""
            summary = (f"fp16 loss scale reached its minimum{at}{{where}}: gradients overflow "
                       f"even at the smallest scale ({steps})")
        else:
            low = _show_scale(min(values)) if values else "?"
            summary = (f"fp16 loss scale stuck at its minimum ({low}){{where}}: every step "
                       f"overflows and is skipped, the weights are not updating ({steps})")
        return summary, ACTION_SCALE_CRIT, extra
    summary = f"fp16 gradient overflow{{where}}: {steps} skipped"
    if values and min(values) != max(values):
        summary += (f", loss scale reduced from {_show_scale(max(values))} to "
                    f"{_show_scale(min(values))}")
    elif values:
        summary += f" at loss scale {_show_scale(values[0])}"
    return summary, ACTION_SCALE_INFO, extra


Story = Callable[[list[_Seen], _Seen], tuple[str, str, dict[str, object]]]
_STORIES: dict[str, Story] = {
    "cuda-oom": _oom_story, "illegal-memory-access": _ima_story,
    "device-side-assert": _dsa_story, "loss-nan": _nan_story,
    "loss-scale-overflow": _scale_story}


def _unique(values: Sequence[object]) -> list[object]:
    out: list[object] = []
    for v in values:
        if v is not None and v not in out:
            out.append(v)
    return out


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


def _finding(code: str, acc: _Acc) -> ExplainFinding:
    seen = acc.seen
    worst = max(seen, key=lambda s: s.hit.severity.rank).hit.severity
    ev = next(s for s in seen if s.hit.severity is worst)
    gpus = _unique([s.hit.gpu for s in seen])
    ranks = _unique([s.line.rank for s in seen])
    hosts = _unique([s.line.host for s in seen])
    summary, action, extra = _STORIES[code](seen, ev)
    summary = summary.replace("{where}", _where(gpus, ranks, hosts))
    frames = ev.frames or next((s.frames for s in seen if s.frames), ())
    if frames:
        inner = frames[-1]
        extra["frame"] = str(inner)
        summary += f"; raised at {inner.short}"
        user = _user_frame(list(frames))
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


def scan(lines: Sequence[LogLine]) -> list[ExplainFinding]:
    """Model-code findings of one input: at most one per code, in line order.

    Args:
        lines: the input's lines as ``probes.rules.logrules.lines.log_lines`` peeled them.

    Returns:
        Findings of the ``model`` step; ``count`` is the number of distinct records (the same
        record printed by several log handlers counts once).
    """
    accs: dict[str, _Acc] = {}
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
            acc = accs.setdefault(hit.code, _Acc())
            key = (_record_key(text), line.host, line.rank)
            last = acc.last.get(key)
            acc.last[key] = (line.number, line.raw)
            new = last is None or line.number - last[0] > DUP_WINDOW or line.raw == last[1]
            frames = tuple(traceback_frames(lines, i, hit.start))
            acc.seen.append(_Seen(line, hit, _time(line, hit.start), frames, new))
    out = [_finding(code, acc) for code, acc in accs.items()]
    return sorted(out, key=lambda f: f.line)
