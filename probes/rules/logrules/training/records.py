"""What a training-log line says, as typed records: OOM amounts, assert details, loss scales.

The amounts of a CUDA OOM message are parsed (:func:`parse_oom`) into MiB, because they say
whether to shrink the batch, fix fragmentation or look for another process on the GPU.
:class:`Hit` is what one rule made of one line; :class:`Seen` and :class:`Acc` gather the
lines of one code until ``tell`` words them as one finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from probes.rules.logrules.lines import LogLine
from probes.rules.logrules.training.frames import Frame
from probes.triage import Code, Severity

FRAGMENTED_MIB = 256.0
"""Reserved-but-unallocated memory at least this large (and above the request) is fragmentation."""

# --- amounts -------------------------------------------------------------------------------

_AMT = r"(?<!\d)(?P<{0}>\d{{1,20}}(?:\.\d+)?)\s*(?P<{0}_u>[KMGTP]i?B|bytes|B)\b"
"""An amount and its unit.  Bounded and starting only where a number starts: unbounded, the
patterns that begin with it (``N already allocated``) read a run of n digits from each of its
n positions, the square of the line (review E1: 7 s for one 8 KB line)."""
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

OOM = re.compile(
    r"(?:(?:Error|ERROR|error|Exception)\s*:\s*|^)(?:CUDA|HIP) out of memory"
    r"|(?:CUDA|HIP) out of memory\.?\s*(?:Tried to allocate|\(GPU|$)"
    r"|CUDA error:\s*out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY"
    r"|cuda runtime error \(2\)\s*:\s*out of memory|error=2\s*:\s*out of memory"
    r"|(?:^|(?<=: )|(?<=\] ))torch\.(?:cuda\.)?OutOfMemoryError\b(?=:|$)"
    r"|Caught OutOfMemoryError in replica"
    r"|OOM when allocating tensor|RESOURCE_EXHAUSTED:\s*Out of memory")
OOM_MORE = re.compile(
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

IMA = re.compile(
    r"illegal memory access (?:was )?encountered|CUDA error:\s*an illegal mem"
    r"|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS"
    r"|cuda runtime error \(77\)|\berror=77\b", re.IGNORECASE)
ASYNC = re.compile(r"asynchronously reported|CUDA_LAUNCH_BLOCKING")
DSA = re.compile(
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


def assert_detail(m: re.Match[str], text: str) -> AssertDetail:
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


CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"n_classes|n_class|num_classes|t >= 0"),
     "a class label outside [0, n_classes): check the targets against the model's output size"),
    (re.compile(r"index out of bounds|srcIndex < srcSelectDimSize|idx_dim|index >= -sizes"),
     "an index outside the tensor (e.g. token ids >= the embedding's vocabulary size)"),
    (re.compile(r"input_val >= zero && input_val <= one|input >= 0\. && input <= 1\."),
     "BCELoss input outside [0, 1]: apply sigmoid first or use BCEWithLogitsLoss"),
)


# --- loss-nan ------------------------------------------------------------------------------

LOSS_KV = re.compile(
    r"(?<![\w.])['\"]?(?P<key>(?:[A-Za-z][A-Za-z0-9]*[_/]){0,8}loss(?:[_/][A-Za-z0-9]+){0,8}"
    r"|(?:lm|train|training|val|valid|validation|eval|test|total)\s+loss)['\"]?"
    r"(?:\s*[:=]\s*|\s+)(?:tensor\(\s*)?['\"]?(?P<val>[-+]?(?:nan|inf(?:inity)?))\b",
    re.IGNORECASE)
NOT_A_LOSS = re.compile(
    r"(?:^|[_/])(?:scale|scaler|scaling|weight|weights|threshold|clip|coef|coeff)(?:$|[_/])"
    r"|(?:^|[_/])(?:best|min|lowest|prev|previous|init|initial)(?:$|[_/])", re.IGNORECASE)
"""Keys that are not a loss value (``loss_scale``) or start at inf by design (``best_loss``)."""
LOSS_PHRASE = re.compile(
    r"\bloss (?:is|was|became|becomes|has become|went to)\s+(?:nan|inf|infinite|not finite)\b"
    r"|\b(?:nan|inf|non-finite) loss(?:es)? (?:detected|encountered)"
    r"|number of nan iterations:\s*(?P<n>[1-9]\d*)", re.IGNORECASE)


# --- loss-scale-overflow -------------------------------------------------------------------

_NUM = r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
SCALE = re.compile(
    rf"(?i:overflow)!.{{0,80}}?Attempted loss scale:\s*(?P<from>{_NUM})"
    rf"(?:\s*,\s*(?:reducing to\s*(?P<to>{_NUM})|but hysteresis is\s*\d+))?"
    rf"|Gradient overflow\.\s+Skipping step,\s*(?:loss scaler \d+\s+)?reducing loss scale to\s*"
    rf"(?P<to2>{_NUM})"
    rf"|(?:gradient )?overflow detected, (?:ignoring gradient, )?setting loss scale to:?\s*"
    rf"(?P<to3>{_NUM})"
    rf"|(?P<minimum>Minimum loss scale reached(?:\s*\((?P<min>{_NUM})\))?"
    rf"|loss scale already at minimum)"
    rf"|Grad overflow on iteration\s*(?::\s*)?\d+")


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
    """The :data:`SCALE` match as numbers."""
    to = m.group("to") or m.group("to2") or m.group("to3")
    return ScaleEvent(_num(m.group("from")), _num(to), m.group("minimum") is not None,
                      _num(m.group("min")))


def show_scale(v: float) -> str:
    return str(int(v)) if v.is_integer() and abs(v) < 1e18 else repr(v)


# --- accumulating --------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """What one rule made of one line, before the lines of one code become a finding."""

    code: Code
    severity: Severity
    start: int
    gpu: str | None = None
    oom: OomReport | None = None
    detail: AssertDetail | None = None
    scale: ScaleEvent | None = None
    keys: tuple[str, ...] = ()
    asynchronous: bool = False


@dataclass(frozen=True)
class Seen:
    line: LogLine
    hit: Hit
    time: str | None
    frames: tuple[Frame, ...]
    new_record: bool


@dataclass
class Acc:
    seen: list[Seen] = field(default_factory=list)
    last: dict[tuple[str, str | None, int | None], tuple[int, str]] = field(
        default_factory=dict)
    """Per record key: the line number and raw text it was last printed with."""



def gpu_name(n: int | None) -> str | None:
    return None if n is None else f"GPU{n}"
