"""``nvidia-smi nvlink -s`` / ``--status`` and ``-e`` / ``--errorcounters`` (``-c`` may be there).

A GPU line (``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)``) opens each GPU; under it each
link prints ``Link 3: 26.562 GB/s`` or ``Link 3: <inactive>`` (``-s``), ``Link 0: Replay
Errors: 0`` (``-e``, one line per counter) and ``Link 0, P2P is supported: true`` (``-c``).
Both outputs of one host may be pasted together (the console's agent sends them so); the
links of the same GPU merge.  Shapes: leptonai/gpud ``fabric-manager/testdata/
nvidia-smi.nvlink.status.a100``, Azure/azhpc-diagnostics#73 (``<inactive>`` links on a
V100), NVIDIA/srt-slurm#307 (``-e`` on a GB300), NVIDIA/k8s-test-infra#371 (GB200 ``-s``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from probes.rules.fabric import LinkView, nvlink_verdicts
from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import clean_lines
from probes.triage import Step

KIND = "nvlink"
LOOKS_LIKE_LINES = 2000
_GPU = re.compile(r"^\s*(?:[\w.\-\[\]]+:\s+)?GPU\s+(?P<i>\d{1,4}):")
_LINK = re.compile(r"^\s*(?:[\w.\-\[\]]+:\s+)?Link\s+(?P<n>\d{1,4})\s*(?P<sep>[:,])")
_SPEED = re.compile(r"^(?P<v>\d{1,6}(?:\.\d{1,6})?)\s*GB/s$", re.IGNORECASE)
_INACTIVE = re.compile(r"^<?\s*inactive\s*>?$", re.IGNORECASE)
_COUNTER_NAME = re.compile(r"[A-Za-z][\w \-]*")
MAX_COUNTER_DIGITS = 20
"""An error counter is 64 bits: a longer run of digits is no counter."""


def _gpu_name(rest: str) -> tuple[str | None, str | None]:
    """``NVIDIA H100 80GB HBM3 (UUID: GPU-…)`` -> name, uuid (string splits: linear)."""
    rest = rest.strip()
    at = rest.rfind("(UUID:")
    if rest.endswith(")") and at >= 0 and ")" not in rest[at:-1]:
        return rest[:at].rstrip() or None, rest[at + 6:-1].strip() or None
    return rest or None, None


def _counter(rest: str) -> tuple[str, int] | None:
    """``Replay Errors: 0`` -> (name, value); None for anything else."""
    name, sep, value = rest.partition(":")
    name, value = name.rstrip(), value.strip()
    if not sep or not _COUNTER_NAME.fullmatch(name) or not value.isdigit() or \
            not value.isascii() or len(value) > MAX_COUNTER_DIGITS:
        return None
    return name, int(value)


@dataclass
class _Link:
    link: int
    line: int
    text: str
    state: str | None = None
    speed_gbs: float | None = None
    errors: dict[str, int] = field(default_factory=dict)


@dataclass
class _Gpu:
    index: int
    name: str | None
    uuid: str | None
    line: int
    links: dict[int, _Link] = field(default_factory=dict)


def parse_nvlink(lines: list[str]) -> list[_Gpu]:
    """Every GPU and its links, in input order; a GPU printed twice (``-s`` then ``-e``)
    is one."""
    gpus: dict[int, _Gpu] = {}
    cur: _Gpu | None = None
    for no, line in enumerate(clean_lines(lines), 1):
        m = _GPU.match(line)
        if m:
            i = int(m.group("i"))
            name, uuid = _gpu_name(line[m.end():])
            cur = gpus.setdefault(i, _Gpu(i, name, uuid, no))
            continue
        m = _LINK.match(line)
        if not m:
            continue
        if cur is None:
            cur = gpus.setdefault(0, _Gpu(0, None, None, no))
        n = int(m.group("n"))
        link = cur.links.setdefault(n, _Link(n, no, line.strip()))
        rest = line[m.end():].strip()
        if m.group("sep") == ",":
            continue  # -c: capabilities, no state
        speed = _SPEED.match(rest)
        counter = _counter(rest)
        if speed:
            link.state, link.speed_gbs = "active", float(speed.group("v"))
        elif _INACTIVE.match(rest):
            link.state, link.line, link.text = "inactive", no, line.strip()
        elif counter:
            name = re.sub(r"[\s\-]+", "_", counter[0].strip().lower())
            first_bad = not any(link.errors.values())
            link.errors[name] = counter[1]
            if counter[1] > 0 and first_bad and link.state != "inactive":
                link.line, link.text = no, line.strip()
    return list(gpus.values())


def _total(errors: dict[str, int], word: str) -> int | None:
    hits = [v for k, v in errors.items() if word in k]
    return sum(hits) if hits else None


def link_views(gpus: list[_Gpu]) -> list[LinkView]:
    """The links as the shared judgement reads them (``probes.rules.fabric``)."""
    return [LinkView(g.index, lk.link, None if lk.state is None else lk.state == "active",
                     lk.speed_gbs, _total(lk.errors, "replay"), _total(lk.errors, "recovery"),
                     _total(lk.errors, "crc"))
            for g in gpus for lk in g.links.values()]


def explain(lines: list[str]) -> KindResult:
    """The contract's ``nvlink`` result and its findings."""
    gpus = parse_nvlink(lines)
    parsed = {"gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid,
                        "links": [{"link": lk.link, "state": lk.state,
                                   "speed_gbs": lk.speed_gbs, "errors": dict(lk.errors)}
                                  for lk in g.links.values()]} for g in gpus]}
    found = []
    by_gpu = {g.index: g for g in gpus}
    for v in nvlink_verdicts(link_views(gpus)):
        g = by_gpu[v.gpu] if v.gpu is not None else gpus[0]
        first = min((g.links[n] for n in v.links if n in g.links), key=lambda lk: lk.line,
                    default=None)
        line, text = (first.line, first.text) if first else (g.line, "")
        found.append(ExplainFinding(Step.GPU, v.code, v.severity, line, text, v.summary,
                                    v.action, gpu=f"GPU{v.gpu}", extra=dict(v.extra)))
    return KindResult(KIND, parsed, tuple(found))


def looks_like(lines: list[str]) -> bool:
    """At least two ``Link N: <speed | inactive | counter>`` lines under a GPU line."""
    gpu = links = 0
    for line in clean_lines(lines[:LOOKS_LIKE_LINES]):
        if _GPU.match(line):
            gpu += 1
        m = _LINK.match(line)
        if m and gpu:
            rest = line[m.end():].strip()
            if _SPEED.match(rest) or _INACTIVE.match(rest) or _counter(rest):
                links += 1
        if gpu and links >= 2:
            return True
    return False
