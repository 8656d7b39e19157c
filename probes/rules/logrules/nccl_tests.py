"""nccl-tests results in a log: wrong data (``nccl-tests-wrong``) and low bus bandwidth
(``nccl-bandwidth-low``), in the ``nccl`` step of triage.

The table is read by :mod:`probes.rules.parsers.nccl_tests`; this family judges it, so the
same findings come from ``explain`` (whatever kind the input is detected as) and from a job
log the console follows.  Live, a scan sees the new lines plus a short tail, so a bandwidth
verdict needs the ``#  Rank`` lines (which say which fabric the run used) in the same
batch; wrong data is seen row by row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probes.rules.logrules.common import CRIT, WARN
from probes.rules.logrules.lines import LogLine
from probes.rules.nccl_expect import Fabric, current, fabric_of
from probes.rules.parsers.nccl_tests import NcclTest, parse
from probes.rules.result import ExplainFinding
from probes.triage import Code, Step

_CHEAP = re.compile(r"Avg bus bandwidth|Out of bounds values|\b\d+\s+\d+\s+(?:float|half|"
                    r"bfloat16|double|u?int(?:8|32|64)|fp8\w*|f8\w*|char)\s")
"""A line worth a full parse: a footer, or the start of a table row."""
_JUDGED_OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                         "sendrecv", "alltoall"})
_REDUCTIONS = frozenset({"sum", "prod", "min", "max", "avg", "premulsum"})
ACTION_WRONG = ("Treat it as a hardware fault until shown otherwise: rerun on halves of the "
                "GPUs and hosts to isolate the GPU or link, and read the hosts' Xid, ECC and "
                "PCIe AER (rigwatch explain on dmesg and nvidia-smi -q -d ECC); do not train "
                "on these GPUs")
ACTION_LOW = ("Check the links the run used: nvidia-smi topo -m and nvidia-smi nvlink -s "
              "(NVLink down, PCIe downgraded), NCCL_DEBUG=INFO transport lines (NET/Socket "
              "instead of IB, P2P disabled), NIC link speed; rerun on one host, then two, to "
              "find the slow step.  The expectation is settings.yaml's nccl_tests table")


def cue(line: LogLine) -> bool:
    """Whether this line is a footer or a table row: without one, :func:`scan` finds
    nothing, and a later line completes no finding without one."""
    return _CHEAP.search(line.text) is not None


def scan(lines: Sequence[LogLine]) -> list[ExplainFinding]:
    """Findings for every nccl-tests run in ``lines``."""
    if not any(_CHEAP.search(line.text) for line in lines):
        return []
    number = [line.number for line in lines]
    found: list[ExplainFinding] = []
    for test in parse([line.raw for line in lines]):
        found.extend(_wrong(test, number))
        found.extend(_low(test, number))
    return found


def _name(test: NcclTest) -> str:
    return f"{test.op}_perf" if test.op else "nccl-tests"


def _wrong(test: NcclTest, number: list[int]) -> list[ExplainFinding]:
    bad = [r for r in test.rows
           if test.wrong_is_count and any(w is not None and w > 0 for w in (r.wrong, r.ip_wrong))]
    oob = test.out_of_bounds or 0
    if not bad and oob <= 0:
        return []
    if bad:
        first = bad[0]
        at, evidence = first.line, first.text
        what = (f"{len(bad)} of {len(test.rows)} sizes returned wrong elements (first at "
                f"{first.size_bytes} B: {_whole(first.wrong)} out-of-place, "
                f"{_whole(first.ip_wrong)} in-place)")
    else:
        at, evidence = test.oob_line or 1, test.oob_text.strip()
        what = f"{oob} out-of-bounds values"
    if oob > 0 and bad:
        what += f"; {oob} out-of-bounds values"
    return [ExplainFinding(
        Step.NCCL, Code.NCCL_TESTS_WRONG, CRIT, number[at - 1], evidence,
        f"{_name(test)}: {what} — data is corrupted between GPUs", ACTION_WRONG,
        extra={"wrong_rows": len(bad), "out_of_bounds": test.out_of_bounds})]


def _whole(v: float | None) -> str:
    return "N/A" if v is None else (str(int(v)) if v == int(v) else str(v))


def _low(test: NcclTest, number: list[int]) -> list[ExplainFinding]:
    table = current()
    fabric = fabric_of(test.hosts, [r.name for r in test.ranks])
    if fabric is None or len(test.ranks) < 2 or test.separate_processes \
            or not _judged(test, fabric):
        return []
    big = [r for r in test.rows if r.size_bytes >= table.min_bytes and r.best_busbw is not None]
    if not big:
        return []
    sizes = sorted({r.size_bytes for r in big})[-3:]
    top = [r for r in big if r.size_bytes in sizes]
    best = max(top, key=lambda r: r.best_busbw or 0.0)
    busbw = best.best_busbw or 0.0
    expected = table.expected(fabric)
    ratio = busbw / expected if expected > 0 else 1.0
    if ratio >= table.low_ratio:
        return []
    hosts = len(test.hosts)
    where = f"{len(test.ranks)} ranks on {hosts} host{'s' if hosts > 1 else ''}"
    return [ExplainFinding(
        Step.NCCL, Code.NCCL_BANDWIDTH_LOW, WARN, number[best.line - 1], best.text.strip(),
        f"{_name(test)}: bus bandwidth {busbw:g} GB/s at {best.size_bytes} B is "
        f"{ratio:.0%} of the {expected:g} GB/s expected over {fabric.value} ({where})",
        ACTION_LOW,
        extra={"busbw_gbs": busbw, "expected_gbs": expected, "ratio": round(ratio, 3),
               "fabric": fabric.value, "size_bytes": best.size_bytes})]


def _judged(test: NcclTest, fabric: Fabric) -> bool:
    """Ops whose busbw reads against one link; alltoall only inside one host (across hosts it
    measures the network's bisection, not a link); an unnamed run only when its rows show a
    reduction (all_reduce, reduce_scatter or reduce)."""
    if test.op is None:
        return bool(test.rows) and all(r.redop in _REDUCTIONS for r in test.rows)
    if test.op == "alltoall":
        return fabric is not Fabric.INTERNODE
    return test.op in _JUDGED_OPS
