"""A host's per-sample judges, run again only when what they read moved (issue 38 item 1).

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

from probes.analysis.allocation import (
    IDLE_CHECK_EVERY_S,
    HoldTracker,
    _strays_of,
    idle_allocation_findings,
)
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
    peer = _peer(host, hello, epoch, peers) if expect_gpus is None else None
    return (epoch, static, hello, limits, host, (reasons, moving), disks, swapped, strays,
            epoch.listed, expect_gpus, peer)


def _peer(host: str, hello: Hello | None, epoch: StaticEpoch,
          peers: PeerCounts | None) -> tuple[int, int] | None:
    """The peers' count as the judging reads it: None where the host lists what its peers
    do (no finding reads the peers' counts then)."""
    peer = peers.expected(host) if peers is not None else None
    if peer is not None and peer[0] <= max(len(hello.facts.gpus) if hello else 0,
                                           epoch.listed):
        return None
    return peer


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

    __slots__ = ("_after", "_before", "_idle", "_inputs", "_misses", "_peers_seen", "_quiet",
                 "_rest")

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
        self._quiet: tuple[Any, ...] | None = None
        """``_inputs`` when they are a quiet tick's (``_quiet_inputs``): a tick is then
        checked against them without building its inputs (``_still_quiet``)."""
        self._peers_seen = -1
        """``PeerCounts.version`` at which the peers' answer was last found ``_quiet``'s."""

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
            quiet = self._quiet
            if quiet is not None and _still_quiet(self, quiet, host, hello, sample, limits,
                                                  expect_gpus, peers):
                return self._as_last(host, history, sample, holds, limits)
            inputs = tick_inputs(host, hello, sample, limits, expect_gpus, peers)
            last = self._inputs
            if inputs is not None and last is not None and _same(inputs, last):
                return self._as_last(host, history, sample, holds, limits)
            self._misses += 1
            if self._misses >= MISSES:
                self._misses, self._rest = 0, REST
        before, idle, after = sample_judged_parts(host, hello, sample, history, holds,
                                                  limits, expect_gpus, peers)
        if inputs is None or any(f.code == Code.GPU_LOST for f in before):
            self._inputs = self._quiet = None
        else:  # the epoch's static verdicts as this judging left them (the first tick
            # of an epoch judges and keeps them)
            self._inputs = (inputs[0], inputs[0].findings, *inputs[2:])
            self._quiet = _quiet_inputs(self._inputs)
            self._peers_seen = -1
        self._before, self._idle, self._after = before, idle, after
        return before + idle + after

    def _as_last(self, host: str, history: HostHistory, sample: HostSample,
                 holds: HoldTracker, limits: DetectorLimits) -> list[Finding] | None:
        """A tick whose inputs are the last judging's: only the idle allocations asked."""
        self._misses = 0
        if not self._idle and not holds.idle:
            # ``idle_allocation_findings``' answer between its checks, written out: none
            # now as none then (a call and a list less on nearly every tick)
            ts, checked = sample.ts, holds.checked_at
            if ts - checked < IDLE_CHECK_EVERY_S and ts >= checked:
                return None
        idle = idle_allocation_findings(host, history, sample, holds, limits)
        if not (idle or self._idle) or _identical(idle, self._idle):
            return None
        self._idle = idle
        return self._before + idle + self._after


def _quiet_inputs(inputs: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """``inputs`` (as kept) when they are a quiet tick's, else None: no GPU with clock-event
    reasons, none whose load the epoch's verdicts read (so no GPU's load or clock is in
    them), no disk saturated, no swapping, no process that could be a stray (the epoch's
    places known, and none).  Such a tick's inputs are those again exactly when
    ``_still_quiet`` says so, which reads a handful of fields instead of building them."""
    epoch, static, _, _, _, gpus, disks, swapped, strays = inputs[:9]
    if not isinstance(gpus, tuple):  # not (reasons, moving) as ``tick_inputs`` makes them
        return None
    reasons, moving = gpus
    if (any(reasons) or moving or disks or swapped is not None or strays
            or not isinstance(static, StaticVerdicts) or static.loaded
            or epoch.strays is None or epoch.strays):
        return None
    return inputs


def _still_quiet(judge: SampleJudge, quiet: tuple[Any, ...], host: str, hello: Hello | None,
                 sample: HostSample, limits: DetectorLimits, expect_gpus: int | None,
                 peers: PeerCounts | None) -> bool:
    """Whether ``tick_inputs`` of this tick would be ``quiet`` (``_quiet_inputs``), read
    without building them (issue 38: a quiet tick of a quiet host is nearly every tick).

    Item by item as ``tick_inputs`` makes them: the same epoch, its verdicts, hello and
    limits (the very objects; equal limits that are not the same object go the long way);
    the reasons: a row's are tuples (``GpuRow.clock_reasons``), so none truthy is each
    ``()``, as kept, and with the verdicts' ``loaded`` empty no GPU is ``moving``; no disk
    saturated and no swapping as ``tick_inputs`` tests them; the epoch's stray places
    still none; its listed count, the expected count and the peers' answer equal (asked
    again only when a hello was added since it was last found equal)."""
    epoch = sample.static_epoch
    row: Any = sample.wire_row
    if (epoch is not quiet[0] or row is None or epoch.findings is not quiet[1]
            or hello is not quiet[2] or limits is not quiet[3] or host != quiet[4]
            or expect_gpus != quiet[10]):
        return False
    rows = row.gpus
    if len(rows) != len(quiet[5][0]):
        return False
    for g in rows:  # a loop, not ``any(map(...))``: half the cost over eight GPUs
        if g.clock_reasons:
            return False
    saturated = limits.disk_saturated_util_pct
    for d in row.disks:
        if (u := d.util) is not None and u == u and u >= saturated:
            return False
    swap = row.host.swap_in_pages_s
    if swap is not None and swap >= SWAP_PAGES_S:
        return False
    places = epoch.strays
    if places is None or places or epoch.listed != quiet[9]:
        return False
    if peers is not None and expect_gpus is None and peers.version != judge._peers_seen:
        if _peer(host, hello, epoch, peers) != quiet[11]:
            return False
        judge._peers_seen = peers.version
    return True


def _identical(a: Sequence[Finding], b: Sequence[Finding]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
