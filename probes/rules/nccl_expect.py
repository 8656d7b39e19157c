"""What bus bandwidth an nccl-tests run should reach, by the fabric its ranks share.

nccl-tests' ``busbw`` is corrected for the number of ranks so that it reads against the
speed of the slowest link a collective crosses (NVIDIA/nccl-tests ``doc/PERFORMANCE.md``).
So the expectation is the fabric's, chosen from what the run itself prints:

* ranks on more than one host: the inter-node network (``internode``);
* one host, every GPU an SXM/HGX part: that generation's NVLink/NVSwitch;
* one host otherwise (PCIe cards, ``NVL`` bridge pairs, names this table does not know):
  ``pcie``, the lowest, so an unknown GPU is never judged against NVLink.

The figures are the bus bandwidth a healthy system of that kind reaches at large sizes
(hundreds of MiB and up) — well under the links' nominal rates, as published runs show —
and ``low_ratio`` is how far below it a run must fall to be reported.  The inter-node figure
depends on the NICs per node (one 100 Gb/s NIC gives ~10 GB/s, eight 400 Gb/s NICs ~350), so
its default only catches a fabric that is plainly broken (sockets instead of RDMA); set it
to your fabric's figure.  Every figure can be set in ``settings.yaml``'s ``nccl_tests:``
section; ``explain`` and the console read the same table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum


class Fabric(str, Enum):
    """The links a run's ranks talk over."""

    NVLINK5 = "nvlink5"
    NVLINK4 = "nvlink4"
    NVLINK4_CUT = "nvlink4-cut"
    NVLINK3 = "nvlink3"
    NVLINK3_CUT = "nvlink3-cut"
    NVLINK2 = "nvlink2"
    PCIE = "pcie"
    INTERNODE = "internode"


@dataclass(frozen=True)
class NcclExpectations:
    """Expected busbw (GB/s) per fabric at the largest sizes, and when a run is "low"."""

    nvlink5_gbs: float = 700.0
    """B200 / GB200 (NVLink 5, 900 GB/s per direction); public NVL72 runs reach ~830."""
    nvlink4_gbs: float = 360.0
    """H100 / H200 / H20 SXM (NVLink 4, 450 GB/s per direction); runs reach 360–480."""
    nvlink4_cut_gbs: float = 160.0
    """H800 (NVLink cut to 200 GB/s per direction)."""
    nvlink3_gbs: float = 230.0
    """A100 SXM (NVLink 3, 300 GB/s per direction)."""
    nvlink3_cut_gbs: float = 150.0
    """A800 SXM (NVLink cut to 200 GB/s per direction)."""
    nvlink2_gbs: float = 130.0
    """V100 SXM2/SXM3 (NVLink 2, 150 GB/s per direction)."""
    pcie_gbs: float = 12.0
    """PCIe cards in one host (a Gen3 x16 link carries ~12 GB/s; Gen4/Gen5 more)."""
    internode_gbs: float = 10.0
    """Ranks on several hosts: the NICs per node decide; this default is one 100 Gb/s NIC."""
    low_ratio: float = 0.6
    """A run whose busbw at its largest sizes is below this share of the expectation is low."""
    min_bytes: int = 64 * 1024 * 1024
    """Only sizes from here up are judged: smaller messages measure latency, not links."""

    def expected(self, fabric: Fabric) -> float:
        """The figure for ``fabric`` (GB/s)."""
        return float(getattr(self, fabric.value.replace("-", "_") + "_gbs"))


DEFAULT = NcclExpectations()
_CONFIGURED = [DEFAULT]
"""The process's table (``settings.yaml``), set once by the command line at start."""
_CURRENT: ContextVar[NcclExpectations | None] = ContextVar("nccl_expectations", default=None)


def configure(table: NcclExpectations) -> None:
    """Make ``table`` the process's table (every thread's, the console's log scans too)."""
    _CONFIGURED[0] = table


def current() -> NcclExpectations:
    """The table in force: :func:`using`'s inside its block, else the configured one."""
    scoped = _CURRENT.get()
    return scoped if scoped is not None else _CONFIGURED[0]


@contextmanager
def using(table: NcclExpectations) -> Iterator[None]:
    """Judge nccl-tests runs against ``table`` inside the ``with`` block."""
    token = _CURRENT.set(table)
    try:
        yield
    finally:
        _CURRENT.reset(token)


_BY_NAME: tuple[tuple[re.Pattern[str], Fabric], ...] = (
    (re.compile(r"PCIe|NVL\b|\bNVL\d", re.IGNORECASE), Fabric.PCIE),
    (re.compile(r"\b(?:G?B[123]00)\b"), Fabric.NVLINK5),
    (re.compile(r"\bH800\b"), Fabric.NVLINK4_CUT),
    (re.compile(r"\b(?:G?H[12]00|H20)\b"), Fabric.NVLINK4),
    (re.compile(r"\bA800[- ]SXM", re.IGNORECASE), Fabric.NVLINK3_CUT),
    (re.compile(r"\bA100[- ]SXM", re.IGNORECASE), Fabric.NVLINK3),
    (re.compile(r"\bV100[- ]SXM", re.IGNORECASE), Fabric.NVLINK2),
)
"""GPU names as CUDA reports them (``NVIDIA H100 80GB HBM3``, ``NVIDIA A100-SXM4-80GB``,
``Tesla V100-SXM2-16GB``, ``NVIDIA H100 PCIe``); first match wins, so PCIe forms go first."""
_RANK_ORDER = (Fabric.PCIE, Fabric.NVLINK2, Fabric.NVLINK3_CUT, Fabric.NVLINK3,
               Fabric.NVLINK4_CUT, Fabric.NVLINK4, Fabric.NVLINK5)


def gpu_fabric(name: str) -> Fabric:
    """The intra-node fabric a GPU of this name sits on (``pcie`` when unknown)."""
    for pattern, fabric in _BY_NAME:
        if pattern.search(name):
            return fabric
    return Fabric.PCIE


def fabric_of(hosts: Sequence[str], gpu_names: Sequence[str]) -> Fabric | None:
    """The slowest fabric the run's ranks share; None when the input names no rank."""
    if not gpu_names:
        return None
    if len(set(hosts)) > 1:
        return Fabric.INTERNODE
    return min((gpu_fabric(n) for n in gpu_names), key=_RANK_ORDER.index)
