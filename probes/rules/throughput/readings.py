"""One trainer progress line → one :class:`Reading` (what rate, at which step).

The shapes, each from the trainer's own source or public logs (tests name them):

* Hugging Face Trainer: the tqdm bar ``  5%|▌    | 50/1000 [00:25<08:00,  1.98it/s]`` (or
  ``s/it``) and the closing dict ``{'train_runtime': …, 'train_samples_per_second': 12.3, …}``
  (``train_tokens_per_second`` with ``include_tokens_per_second``);
* PyTorch Lightning: the same bar after ``Epoch 0:`` and its rich bar
  ``Epoch 0/9 ━━━━ 450/1000 0:02:15 • 0:02:45 3.32it/s``;
* DeepSpeed: ``epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=…,
  CurrSamplesPerSec=…, MemAllocated=…GB, MaxMemAllocated=…GB`` and the
  ``Samples/sec: … TFLOPs: …`` throughput line of DeepSpeed-Chat / Megatron-DeepSpeed;
* Megatron-LM: ``iteration 10/ 500000 | … | elapsed time per iteration (ms): 3456.7 |
  throughput per GPU (TFLOP/s/GPU): 412.3 | … | global batch size: 512 |``, Megatron-DeepSpeed's
  ``samples per second: … | tokens per gpu per second (tgs): …``, and the
  ``memory (MB) | allocated: … | max allocated: …`` line;
* torchtitan: ``step: 10  loss: 9.12  memory: 35.12GiB(44.39%)  tps: 6,123  tflops: 285.2
  mfu: 28.84%`` (``wps`` in older releases; per device);
* nanoGPT: ``iter 10: loss 4.2345, time 123.45ms, mfu 35.12%``;
* anything printing ``step N … 12345 tokens/s`` (or ``samples/s``, ``tok/s``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_GATE = re.compile(r"/s|/it|per.second|iteration|tps:|wps:|PerSec|train_runtime|\biter \d|"
                   r"memory \(MB\)|max_memory|world|seq_len|n_gpu|processes|MEMBER|device mesh",
                   re.IGNORECASE)
"""Words one of the readers needs: a line without any is skipped in one search (most are)."""
_ANSI = re.compile(r"(?:\x1b|\\x1b)\[[0-9;]*[A-Za-z]")
"""Colour codes, raw or as ``clean_log_line`` shows them (torchtitan colours its metrics)."""
_NUM = r"(\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_NUM_FIRST = r"(?<!\d)(?<!\d,)(\d[\d,]{0,30}(?![\d,])(?:\.\d+)?(?:[eE][-+]?\d+)?)"
"""A number that starts a pattern: only where a number starts, and bounded, or a run of n
digits is read from each of its n positions (review E2: ``1111… samples/s``)."""
_COUNT = r"(?<!\d)(?P<n>\d+)/(?P<total>\d+) "

_TQDM = re.compile(_COUNT + r"\[[\d:]+<[\d:?]+,\s*" + _NUM
                   + r"\s?(?P<unit>it|s|ba|batches|examples|samples|steps|tokens)/(?P<per>s|it)\b")
_RICH = re.compile(_COUNT + r"[\d:]+ \u2022 [\d:\-]+ " + _NUM + r"\s?it/s")
_HF_KEY = re.compile(r"'train_(?P<what>samples|tokens|steps)_per_second':\s*" + _NUM)
_DS_TIMER = re.compile(
    r"(?:global_step=(?P<step>\d+)|\b\d+/(?P<local>\d+)),\s*(?:RunningAvgSamplesPerSec="
    r"[\d.eE+\-]+,\s*CurrSamplesPerSec=(?P<curr>[\d.eE+\-]+)|SamplesPerSec=(?P<sps>[\d.eE+\-]+))")
"""DeepSpeed's timer line in its three releases' forms: ``0/40, SamplesPerSec=…`` (2022),
``0/2498, RunningAvgSamplesPerSec=…, CurrSamplesPerSec=…`` and
``epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=…`` (0.10 on)."""
_DS_MAXMEM = re.compile(r"MaxMemAllocated=" + _NUM + r"\s*(?P<u>[GM])B")
_MEGATRON = re.compile(r"\biteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|")
_ELAPSED_MS = re.compile(r"elapsed time per iteration \(ms\):\s*" + _NUM)
_TFLOPS_GPU = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*" + _NUM)
_GBS = re.compile(r"global batch size:\s*(\d+)")
_SAMPLES_PER = re.compile(r"(?:samples per second|Samples/sec|samples/sec)[:=]?\s*" + _NUM,
                          re.IGNORECASE)
_TGS = re.compile(r"tokens per gpu per second \(tgs\):\s*" + _NUM)
_TOKENS_PER = re.compile(r"(?:tokens per second|tokens_per_second|tokens/sec|tokens/s|tok/s)"
                         r"[:=]?\s*" + _NUM, re.IGNORECASE)
_TOKENS_AFTER = re.compile(_NUM_FIRST + r"\s*(?:tokens|tok)/s(?:ec)?\b", re.IGNORECASE)
_SAMPLES_AFTER = re.compile(_NUM_FIRST + r"\s*samples/s(?:ec)?\b", re.IGNORECASE)
_DS_TFLOPS = re.compile(r"\bTFLOPs:\s*" + _NUM)
_MEGA_MEM = re.compile(r"memory \(MB\) \| allocated: [\d.]+ \| max allocated:\s*" + _NUM)
_TITAN = re.compile(r"\bstep:\s*(?P<step>\d+)\s.{0,300}?\b(?:tps|wps):\s*" + _NUM)
_TITAN_MEM = re.compile(r"\bmemory:\s*" + _NUM + r"\s*GiB")
_TITAN_TFLOPS = re.compile(r"\btflops:\s*" + _NUM)
_MFU = re.compile(r"\bmfu[:\s]\s*(?P<v>-?[\d.]+)%")
_NANOGPT = re.compile(r"\biter (?P<step>\d+): loss [\d.]+, time " + _NUM + r"ms")
_STEP = re.compile(r"\b(?:step|global_step|iter|iteration)[\s:=]+(?P<step>\d+)", re.IGNORECASE)
_MAX_ALLOC = re.compile(r"max_memory_allocated\w{0,40}[\s:=()]+" + _NUM
                        + r"\s*(?P<u>GiB|GB|MiB|MB)", re.IGNORECASE)
_WORLD = re.compile(r"\b(?:world[_ ]size|Num processes|num_processes|n_gpu)\b[\s:=]+(\d+)"
                    r"|Starting with (\d+) processes|\bMEMBER: \d+/(\d+)"
                    r"|device mesh with \[[^\]]{0,200}\], \[(\d+)\]", re.IGNORECASE)
"""World size as trainers print it: Megatron's ``using world size: 16``, accelerate's ``Num
processes: 8``, Lightning's ``Starting with 8 processes`` / ``MEMBER: 1/8``, torchtitan's
``Building 1-D device mesh with ['dp_shard'], [8]``."""
_SEQ_LEN = re.compile(r"\b(?:seq_length|seq_len|max_seq_len)\b[\s.:=]+(\d+)")


@dataclass(frozen=True)
class Reading:
    """What one line says about the run's speed; every field null when the line lacks it."""

    trainer: str
    step: int | None = None
    tokens_s: float | None = None
    samples_s: float | None = None
    iters_s: float | None = None
    tflops_gpu: float | None = None
    mfu_pct: float | None = None
    peak_mem_gib: float | None = None
    per_gpu: bool = False
    """``tokens_s`` is per GPU (torchtitan's ``tps``, Megatron-DeepSpeed's ``tgs``)."""
    bar_total: int | None = None
    """A progress bar's total: a log with a training and an evaluation bar keeps the former."""
    summary: bool = False
    """A whole-run average (the Trainer's closing dict), not a point of the series."""
    global_batch: int | None = None
    world_size: int | None = None
    seq_len: int | None = None

    @property
    def rate(self) -> bool:
        return any(v is not None for v in (self.tokens_s, self.samples_s, self.iters_s,
                                           self.tflops_gpu))


def _f(text: str) -> float:
    return float(text.replace(",", ""))


def _gib(value: str, unit: str) -> float:
    v = _f(value)
    return v / 1024.0 if unit.upper().startswith("M") else v


def read_line(text: str) -> Reading | None:
    """The reading of one (peeled) log line, or None when it says nothing about speed."""
    if not text or len(text) > 4000 or _GATE.search(text) is None:
        return None
    if "x1b" in text:
        text = _ANSI.sub("", text)
    for words, read in _READERS:
        if any(w in text for w in words):
            got = read(text)
            if got is not None:
                return got
    return None


def _megatron(text: str) -> Reading | None:
    m = _MEGATRON.search(text)
    if m is None:
        if (mem := _MEGA_MEM.search(text)) is not None:
            return Reading("megatron", peak_mem_gib=_f(mem.group(1)) / 1024.0)
        return None
    ms = _ELAPSED_MS.search(text)
    tf = _TFLOPS_GPU.search(text) or _DS_TFLOPS.search(text)
    gbs = _GBS.search(text)
    sps = _SAMPLES_PER.search(text)
    tgs = _TGS.search(text)
    tok = _TOKENS_PER.search(text)
    iters = 1000.0 / _f(ms.group(1)) if ms is not None and _f(ms.group(1)) > 0 else None
    samples = _f(sps.group(1)) if sps is not None else (
        int(gbs.group(1)) * iters if gbs is not None and iters is not None else None)
    tokens = _f(tgs.group(1)) if tgs is not None else (_f(tok.group(1)) if tok else None)
    return Reading("megatron", int(m["step"]), tokens_s=tokens, samples_s=samples,
                   iters_s=iters, tflops_gpu=_f(tf.group(1)) if tf is not None else None,
                   per_gpu=tgs is not None,
                   global_batch=int(gbs.group(1)) if gbs is not None else None)


def _titan(text: str) -> Reading | None:
    m = _TITAN.search(text)
    if m is None:
        return None
    mem = _TITAN_MEM.search(text)
    tf = _TITAN_TFLOPS.search(text)
    mfu = _MFU.search(text)
    return Reading("torchtitan", int(m["step"]), tokens_s=_f(m.group(2)),
                   tflops_gpu=_f(tf.group(1)) if tf else None,
                   mfu_pct=float(mfu["v"]) if mfu else None,
                   peak_mem_gib=_f(mem.group(1)) if mem else None, per_gpu=True)


def _deepspeed(text: str) -> Reading | None:
    m = _DS_TIMER.search(text)
    if m is not None:
        mem = _DS_MAXMEM.search(text)
        step = m["step"] or m["local"]
        return Reading("deepspeed", int(step), samples_s=_f(m["curr"] or m["sps"]),
                       peak_mem_gib=_gib(mem.group(1), mem["u"]) if mem else None)
    if "Samples/sec" in text and (tf := _DS_TFLOPS.search(text)) is not None:
        sps = _SAMPLES_PER.search(text)
        return Reading("deepspeed", samples_s=_f(sps.group(1)) if sps else None,
                       tflops_gpu=_f(tf.group(1)))
    return None


def _hf_summary(text: str) -> Reading | None:
    if "'train_runtime'" not in text:
        return None
    found = {m["what"]: _f(m.group(2)) for m in _HF_KEY.finditer(text)}
    return Reading("hf-trainer", tokens_s=found.get("tokens"), samples_s=found.get("samples"),
                   iters_s=found.get("steps"), summary=True)


def _nanogpt(text: str) -> Reading | None:
    m = _NANOGPT.search(text)
    if m is None:
        return None
    ms = _f(m.group(2))
    mfu = _MFU.search(text.replace("mfu ", "mfu: "))
    return Reading("nanogpt", int(m["step"]), iters_s=1000.0 / ms if ms > 0 else None,
                   mfu_pct=float(mfu["v"]) if mfu and float(mfu["v"]) >= 0 else None)


def _bar(text: str) -> Reading | None:
    m = _TQDM.search(text)
    rich = None if m is not None else _RICH.search(text)
    if m is None and rich is None:
        return None
    if m is not None:
        v = _f(m.group(3))
        per_s = m["per"] == "s"
        iters = v if per_s else (1.0 / v if v > 0 else None)
        n, total = int(m["n"]), int(m["total"])
        unit = m["unit"] if per_s else "it"
        trainer = "lightning" if text.lstrip().startswith("Epoch") else "tqdm"
        if unit in ("tokens",):
            return Reading(trainer, n, tokens_s=iters, bar_total=total)
        if unit in ("examples", "samples"):
            return Reading(trainer, n, samples_s=iters, bar_total=total)
        return Reading(trainer, n, iters_s=iters, bar_total=total)
    assert rich is not None
    return Reading("lightning", int(rich["n"]), iters_s=_f(rich.group(3)),
                   bar_total=int(rich["total"]))


def _generic(text: str) -> Reading | None:
    tok = _TOKENS_PER.search(text) or _TOKENS_AFTER.search(text)
    sps = None if tok is not None else (_SAMPLES_PER.search(text) or _SAMPLES_AFTER.search(text))
    mem = _MAX_ALLOC.search(text)
    if tok is None and sps is None:
        if mem is not None:
            return Reading("log", peak_mem_gib=_gib(mem.group(1), mem["u"]))
        return None
    step = _STEP.search(text)
    mfu = _MFU.search(text)
    return Reading("log", int(step["step"]) if step else None,
                   tokens_s=_f(tok.group(1)) if tok else None,
                   samples_s=_f(sps.group(1)) if sps else None,
                   mfu_pct=float(mfu["v"]) if mfu else None,
                   peak_mem_gib=_gib(mem.group(1), mem["u"]) if mem else None,
                   per_gpu="per gpu" in text.lower() or "/gpu" in text.lower())


def _setup(text: str) -> Reading | None:
    """Lines that say how big the run is (world size, sequence length), not how fast."""
    w = _WORLD.search(text)
    s = _SEQ_LEN.search(text)
    if w is None and s is None:
        return None
    world = next((int(g) for g in w.groups() if g), None) if w else None
    return Reading("setup", world_size=world,
                   seq_len=int(s.group(1)) if s else None)


_READERS = (
    (("iteration", "memory (MB)"), _megatron),
    (("tps:", "wps:"), _titan),
    (("PerSec", "Samples/sec"), _deepspeed),
    (("train_runtime",), _hf_summary),
    (("iter ",), _nanogpt),
    (("/s", "/it"), _bar),
    (("/s", "/S", "per second", "per_second", "max_memory", "MAX_MEMORY", "Max_memory"), _generic),
    (("world", "World", "WORLD", "seq_len", "n_gpu", "processes", "MEMBER", "device mesh"),
     _setup),
)
"""Each reader after the words it needs, in the order tried: a plain ``in`` test is much
cheaper than the reader's regular expressions."""
