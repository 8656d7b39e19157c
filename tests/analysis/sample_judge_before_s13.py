"""Reference copy (issue 38, session 13, branch issue38-judge13) of
``probes.analysis.sample_judge`` as it was at main ``31f101a``, for ``test_judge_s13``'s
equivalence and ``bench_judge_s13``.

A host's per-sample judges, run again only when what they read moved (issue 38 item 1).

``item_findings.sample_judged`` judges every tick of every host: the instant findings
(throttled, PCIe link, the static epoch's verdicts re-dated, saturated disks), swapping,
idle allocations, stray processes, GPUs never listed.  From one second to the next a
tick's verdict inputs mostly repeat (the same static epoch, clock-event reasons and
"busy"; no disk saturated), yet every troubled GPU's findings were built anew and
``HostFindings.take_sample`` threw them away for the ones it kept.  ``SampleJudge`` reads
the inputs off a fast-path tick's row (``tick_gpus``: no per-GPU objects) and, when they
are those of the tick before, says so (None) instead of judging: the kept findings stand,
onsets and all (``HostFindings.take_sample(None)``).

The inputs are exactly what the judges read, as the judges see them: the static epoch and
its verdicts, host, hello and limits (their identity; equal limits too), each GPU's
reasons and, where reasons or a link below its generation make them count, whether it is
busy and its clock as the summary prints it; each saturated disk as printed; swapping as
printed; each possible stray's memory (its type too: it is kept in ``extra``); the GPU
count and its expected count (the peers' count only where it exceeds what the host lists:
otherwise no finding reads it, and while a fleet connects it moves with every hello, so
every host of the model would be judged whole, and rest whole, for a minute).  Idle
allocations are
time-dependent (checked once a minute, ``allocation.idle_allocation_findings``): they are
asked every tick, as before, and a new answer (not the same objects) is a change.  A tick
without a row (wire v1, the checked path, a replay) and a sample showing a lost GPU (the
sticky kind) are judged whole every time; so is a host whose inputs moved ``MISSES``
ticks in a row, for the next ``REST`` ticks, without reading them (a throttling GPU's
clock is printed in its finding and moves every tick: reading would cost on top).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from probes.analysis.allocation import HoldTracker, _strays_of, idle_allocation_findings
from probes.analysis.findings import Finding
from probes.analysis.gpu_peers import PeerCounts
from probes.analysis.item_findings import sample_judged_parts
from probes.analysis.judge import SWAP_PAGES_S
from probes.analysis.limits import DetectorLimits
from probes.analysis.static_verdicts import StaticVerdicts
from probes.history import HostHistory
from probes.triage import Code
from probes.wire.compact import StaticEpoch
from probes.wire.samples import Hello, HostSample


def tick_inputs(host: str, hello: Hello | None, sample: HostSample, limits: DetectorLimits,
                expect_gpus: int | None, peers: PeerCounts | None) -> tuple[Any, ...] | None:
    """What ``sample_judged`` reads of a fast-path tick but its time and the idle
    allocations; None for a tick without a row and static epoch (judged whole).

    Read off the decoded row alone (its GPUs', host's and disks' Structs): a sample kept as
    its row (``compact``'s fast path, the only maker of ``wire_row``) has its host and disk
    stats filled from those very Structs, value for value, and the row's are slots, not a
    ``__dict__`` each (issue 38: a quiet tick's judge cost is this reading, cold in memory)."""
    row: Any = sample.wire_row
    epoch = sample.static_epoch
    if row is None or not isinstance(epoch, StaticEpoch):
        return None
    rows = row.gpus
    reasons = tuple(map(_REASONS, rows))
    static = epoch.findings
    loaded = _loaded(static)
    moving: tuple[object, ...] = ()
    if loaded or any(reasons):  # a GPU's load and clock count only beside these
        busy = limits.power_cap_busy_util_pct
        moving = tuple((i, (u := g.util_pct) is not None and u >= busy,
                        None if not g.clock_reasons or (c := g.sm_clock_mhz) is None
                        else f"{c:.0f}")
                       for i, g in enumerate(rows)
                       if g.clock_reasons or loaded is _EVERY or i in loaded)
    saturated = limits.disk_saturated_util_pct
    disks = []  # a loop, not a comprehension: no frame of its own (Python 3.11)
    for d in row.disks:
        if (u := d.util) is not None and u == u and u >= saturated:
            disks.append((d.name, f"{u:.0f}", f"{d.aqu_sz or 0:.1f}"))
    swap = row.host.swap_in_pages_s
    swapped = f"{swap:.0f}" if swap is not None and swap >= SWAP_PAGES_S else None
    strays: tuple[object, ...] = ()
    places: Any = epoch.strays  # (GPU, process) positions, once per epoch
    if places is None:
        places = _strays_of(sample)
    if places:
        strays = tuple((u := (rows[i].processes or ())[k], type(u)) for i, k in places)
    peer = peers.expected(host) if peers is not None and expect_gpus is None else None
    if peer is not None and peer[0] <= max(len(hello.facts.gpus) if hello else 0,
                                           epoch.listed):
        peer = None  # lists what its peers do: no finding reads the peers' counts
    return (epoch, static, hello, limits, host, (reasons, moving), disks, swapped, strays,
            epoch.listed, expect_gpus, peer)


_REASONS = attrgetter("clock_reasons")


_EVERY = range(1 << 30)
"""Every GPU position (its verdicts not judged yet: which links want the load unknown)."""


def _loaded(static: object) -> range | tuple[int, ...]:
    """The GPU positions whose load a tick's judges read even without clock-event reasons
    (``StaticVerdicts.loaded``); every one while the epoch's verdicts are not judged yet."""
    if not isinstance(static, StaticVerdicts):
        return _EVERY
    return static.loaded


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """``tick_inputs`` alike: epoch, its verdicts and the hello the same objects, the
    limits the same or equal, the rest equal: one tuple comparison (it takes an item that
    is the same object as equal without asking, so the limits need no ``is`` first)."""
    return a[0] is b[0] and a[1] is b[1] and a[2] is b[2] and a == b


MISSES = 4
REST = 60


class SampleJudge:
    """One host's ``sample_judged``, kept with the inputs it was judged from."""

    __slots__ = ("_after", "_before", "_idle", "_inputs", "_misses", "_rest")

    def __init__(self) -> None:
        self._inputs: tuple[Any, ...] | None = None
        self._misses = 0
        """Ticks in a row whose inputs moved."""
        self._rest = 0
        """Ticks still to judge whole without reading their inputs: a host whose inputs
        move every tick (a GPU throttling, its clock printed in the finding) pays the
        reading on top of the judging, so after ``MISSES`` it rests ``REST`` ticks."""
        self._before: list[Finding] = []
        """The instant and host findings last judged (before the idle allocations)."""
        self._after: list[Finding] = []
        """The strays and the GPU count last judged (after them)."""
        self._idle: list[Finding] = []

    def judged(self, host: str, hello: Hello | None, sample: HostSample,
               history: HostHistory, holds: HoldTracker, limits: DetectorLimits,
               expect_gpus: int | None, peers: PeerCounts | None) -> list[Finding] | None:
        """``sample_judged``'s findings (``history`` and ``holds`` already hold the
        sample), or None when they are the very ones of the last call: its caller's
        ``take_sample`` keeps what it kept."""
        if self._rest:
            self._rest -= 1
            inputs = None
        else:
            inputs = tick_inputs(host, hello, sample, limits, expect_gpus, peers)
            last = self._inputs
            if inputs is not None and last is not None and _same(inputs, last):
                self._misses = 0
                idle = idle_allocation_findings(host, history, sample, holds, limits)
                if not (idle or self._idle) or _identical(idle, self._idle):
                    return None
                self._idle = idle
                return self._before + idle + self._after
            self._misses += 1
            if self._misses >= MISSES:
                self._misses, self._rest = 0, REST
        before, idle, after = sample_judged_parts(host, hello, sample, history, holds,
                                                  limits, expect_gpus, peers)
        if inputs is None or any(f.code == Code.GPU_LOST for f in before):
            self._inputs = None
        else:  # the epoch's static verdicts as this judging left them (the first tick
            # of an epoch judges and keeps them)
            self._inputs = (inputs[0], inputs[0].findings, *inputs[2:])
        self._before, self._idle, self._after = before, idle, after
        return before + idle + after


def _identical(a: Sequence[Finding], b: Sequence[Finding]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
