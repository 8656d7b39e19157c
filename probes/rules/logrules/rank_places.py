"""Where a rank ran, as a job's log tells it: NCCL's communicator init lines and torchrun's
failure table.

A failing rank is named by number (``[rank3]:``, srun's ``3:``); the operator needs its host
and GPU.  NCCL prints, for every rank of every communicator, a line that ties them together
(after NVIDIA/nccl#1814, #1029, #629 and nccl-tests#252):

    gpu-b07:983:1261 [3] NCCL INFO comm 0x55f0 rank 35 nranks 64 cudaDev 3 nvmlDev 3
        busId 59000 commId 0x5ae7 - Init COMPLETE
    kolyoz2:25146:25827 [0] NCCL INFO ncclCommInitRank comm 0x559d rank 4 nranks 8
        cudaDev 0 nvmlDev 0 busId 42000 commId 0x996e - Init START
    A03-R28-I49-3-9000018:193027:193119 [7] NCCL INFO comm 0x7fdf rank 15 nranks 16
        cudaDev 7 busId e7000 - Init COMPLETE      (NCCL 2.7: no nvmlDev)

A process also joins smaller communicators (tensor- or pipeline-parallel groups) where its
rank is a different number, so only the largest communicator a process joined names its
global rank.  torchrun's ``Root Cause`` / ``Failures`` table names host and rank on
consecutive lines (``host      : gpu-node-3`` then ``rank      : 5 (local_rank: 1)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_PROCESSES = 16384
"""Processes remembered per log: a 2 000-node job's init lines, with room to spare."""

_INIT = re.compile(
    r"^(?P<host>[A-Za-z0-9][\w.\-]{0,252}):(?P<pid>\d{1,10}):\d{1,10} \[\d{1,4}\] NCCL INFO "
    r"(?:ncclCommInitRank\w* )?comm 0x[0-9a-fA-F]+ rank (?P<rank>\d{1,7}) nranks "
    r"(?P<nranks>\d{1,7}) cudaDev (?P<cuda>\d{1,4})(?: nvmlDev (?P<nvml>\d{1,4}))? "
    r"busId (?P<bus>[0-9a-fA-F]{1,16})\b(?: commId (?P<comm>0x[0-9a-fA-F]{1,32})\b)?")
_TABLE_HOST = re.compile(r"^\s*host\s*:\s*(?P<host>[A-Za-z0-9][\w.\-]{0,252})\s*$")
_TABLE_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d{1,7})\b")


@dataclass(frozen=True)
class LoggedRank:
    """A rank's host (and GPU, when NCCL said its bus id) as the log printed them."""

    rank: int
    host: str
    bus_id: str | None = None
    """PCI bus id as the console writes it (``0000:59:00.0``)."""
    nranks: int | None = None
    comm: str | None = None
    """The communicator's id (``commId 0x5ae7…``, NCCL ≥ 2.12): ranks of one job share it."""


def nccl_bus_id(short: str) -> str:
    """NCCL's ``busId 59000`` (bus, device and function of a 64-bit id) as ``0000:59:00.0``."""
    value = int(short, 16)
    domain, bus, dev, fn = value >> 20, (value >> 12) & 0xFF, (value >> 4) & 0xFF, value & 0xF
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}"


class RankPlaces:
    """The ranks one log has placed so far; fed line by line, bounded."""

    def __init__(self) -> None:
        self._by_process: dict[tuple[str, int], LoggedRank] = {}
        self._table: dict[int, LoggedRank] = {}
        self._host: str | None = None

    def add(self, text: str) -> None:
        """One line's message (launcher prefixes peeled off, NCCL's own kept)."""
        if "NCCL INFO" in text:
            m = _INIT.match(text)
            if m is not None:
                self._add_init(m)
            return
        m = _TABLE_HOST.match(text)
        if m is not None:
            self._host = m.group("host")
            return
        m = _TABLE_RANK.match(text)
        if m is not None and self._host is not None:
            rank = int(m.group("rank"))
            if len(self._table) < MAX_PROCESSES:
                self._table[rank] = LoggedRank(rank, self._host)
            self._host = None

    def _add_init(self, m: re.Match[str]) -> None:
        key = (m.group("host"), int(m.group("pid")))
        nranks = int(m.group("nranks"))
        kept = self._by_process.get(key)
        if kept is not None and (kept.nranks or 0) >= nranks:
            return  # a smaller (or the same) communicator: not the global rank
        if kept is None and len(self._by_process) >= MAX_PROCESSES:
            return
        self._by_process[key] = LoggedRank(int(m.group("rank")), key[0],
                                           nccl_bus_id(m.group("bus")), nranks,
                                           m.group("comm"))

    def places(self) -> dict[int, LoggedRank]:
        """rank → where it ran: the largest communicator's ranks; torchrun's table where NCCL
        said nothing (it names no GPU)."""
        out = dict(self._table)
        widest = max((r.nranks or 0 for r in self._by_process.values()), default=0)
        for placed in self._by_process.values():
            if placed.nranks == widest:
                out[placed.rank] = placed
        return out
