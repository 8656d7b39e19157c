"""Reference copy (issue 38, session 11): the start-up decode paths as they were before
session 11 made them cheaper.  ``test_start_decode_once.py`` checks the new code answers
as these do, line by line, field by field.

* ``check_depth_before``: ``sanitize.check_depth``, bracket by bracket in Python;
* ``take_before``: ``CompactStream._take``, which a collector's (thin) stream ran whole, v1's
  decoder over every GPU, to keep a summary of a few ints, and which checked the static
  half with the checked decoder (``check_all_before``) where the console's now takes the
  one-pass path;
* ``columns_before``: ``protocol._columns``, the hello's line parsed a second time for its
  ``columns``;
* ``shallow_enough_before``: ``sanitize._shallow_enough``, the tree walked node by node
  whenever orjson's text of it held more than ``MAX_DEPTH`` openers;
* ``judged_before``: ``analysis.fabric._judged``, every NVLink judged on every report, and
  the GPUs beside each HCA worked out whether a finding named them or not.
"""

from __future__ import annotations

import re
from typing import Any

from probes.analysis.fabric import FabricTracker, _finding, beside, errors_rising, port_views
from probes.analysis.findings import Finding
from probes.analysis.limits import DetectorLimits
from probes.rules.fabric import nvlink_verdicts, port_verdicts
from probes.wire.compact import (
    _GPU_PLACES,
    _HOST_PLACES,
    _STATIC_VALUES,
    HOST_STATIC,
    CompactStream,
    StaticEpoch,
    _static_gpu,
)
from probes.wire.protocol import _BLOCK_KEYS, _loads, shared_columns
from probes.wire.samples import Hello, HostSample
from probes.wire.sanitize import MAX_DEPTH, TooDeep, clean_tree, may_need_cleaning

_BRACKETS = re.compile(rb"[\[\]{}]")
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')


def check_depth_before(line: bytes) -> None:
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return
    depth = 0
    for m in _BRACKETS.finditer(_STRINGS.sub(b"", line)):
        if m.group() in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise TooDeep(f"nested deeper than {MAX_DEPTH}")
        else:
            depth -= 1


def check_all_before(self: CompactStream, gpus: list[dict[str, Any]]) -> HostSample | None:
    try:
        whole = self._checked({"type": "sample", "ts": 1.0, "host": self._static_host,
                               "gpus": gpus})
    except Exception:
        return None
    return whole if len(whole.gpus) == len(gpus) else None


def take_before(self: CompactStream, obj: dict[str, Any]) -> None:
    self._message = {} if self._builds else obj
    self._has_static = True
    self._static_gpus, self._static_host = self._statics(obj)
    v1 = [self._v1_gpu(g, None) for g in self._static_gpus]
    whole = check_all_before(self, v1)
    if whole is not None:
        host = whole.host
        self._gpu_base = [{k: getattr(s, k) for k in _STATIC_VALUES} | _GPU_PLACES
                          for s in whole.gpus]
        self._procs = [s.processes for s in whole.gpus]
    else:
        host = self._checked({"type": "sample", "ts": 1.0, "host": self._static_host}).host
        self._gpu_base, self._procs = [], []
        for g in v1:
            alone = self._checked({"type": "sample", "ts": 1.0, "gpus": [g]})
            s = alone.gpus[0] if alone.gpus else None  # None: v1 drops it (no index)
            self._gpu_base.append(None if s is None else
                                  {k: getattr(s, k) for k in _STATIC_VALUES} | _GPU_PLACES)
            self._procs.append(None if s is None else s.processes)
    self._host_base = {k: getattr(host, k) for k in HOST_STATIC} | _HOST_PLACES
    self._last_procs = [None] * len(self._procs)
    # (session 12, lazy12: the epoch holds the host's static half too, which the lazily
    # built ``HostSample.host`` reads: passed as the current ``_take`` passes it)
    self._epoch = StaticEpoch(tuple(_static_gpu(b, p) for b, p in
                                    zip(self._gpu_base, self._procs, strict=True)),
                              self._host_base)
    self._whole = all(b is not None for b in self._gpu_base) and \
        all(p is not None for p in self._procs)
    self._proc_counts = [len(p) for p in self._procs if p is not None]
    self._fit = [None if b is None or p is None else len(p)
                 for b, p in zip(self._gpu_base, self._procs, strict=True)]
    self._fit_all = None not in self._fit
    self._thin = not self._builds
    if self._thin:
        self._static_gpus, self._gpu_base, self._procs, self._last_procs = [], [], [], []
        self._host_base, self._proc_counts = {}, []
        self._epoch = StaticEpoch()


def columns_before(hello: bytes) -> Any:
    obj, _ = _loads(hello)
    if not isinstance(obj, dict):
        return None
    cols = obj.get("columns")
    return shared_columns(clean_tree(cols, _BLOCK_KEYS, 1) if may_need_cleaning(hello) else cols)


def judged_before(host: str, tracker: FabricTracker, hello: Hello | None,
                  limits: DetectorLimits, recent: dict[str, dict[str, int]]) -> list[Finding]:
    ts = tracker.ts or 0.0
    near = beside(hello)
    verdicts = port_verdicts(port_views(tracker.ports, hello)) + nvlink_verdicts(tracker.links)
    out = [_finding(host, v, ts, near) for v in verdicts]
    rising = errors_rising(recent, limits)
    if rising is not None:
        out.append(_finding(host, rising, ts, near))
    return out


def shallow_enough_before(value: Any, depth: int, dumped: bytes) -> bool:
    if dumped.count(b"[") + dumped.count(b"{") <= MAX_DEPTH - depth:
        return True
    todo: list[tuple[Any, int]] = [(value, depth)]
    while todo:
        node, level = todo.pop()
        if level > MAX_DEPTH:
            return False
        kids = node.values() if type(node) is dict else node if type(node) is list else ()
        for kid in kids:
            if type(kid) is dict or type(kid) is list:
                todo.append((kid, level + 1))
            elif level == MAX_DEPTH and type(kid) is not str:
                return False
    return True
