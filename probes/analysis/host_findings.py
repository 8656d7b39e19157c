"""One host's findings as folded from its session: what its samples show now (with each
one's onset), what stays until acknowledged (events, lost GPUs), how it is built, what the
detectors and the fabric found; a concern of ``HostState`` of its own (issue #37: the fold
split by concern, its reads pure).

The writes are ``take_sample``, ``keep``, ``set_layout``/``set_chains``, ``set_detected``
and ``set_fabric``, called by the fold; ``merged`` reads (its memo is not state: it is keyed
by what the answer depends on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter

from probes.analysis.findings import Finding
from probes.analysis.reachability import REACHABILITY_CODES
from probes.analysis.repeats import merged_repeat
from probes.analysis.static_verdicts import dated as redated
from probes.triage import Code

FindingKey = tuple[str, str, int | None, int | None]
_BUT_TS = attrgetter(*(f.name for f in fields(Finding) if f.name != "ts"))
"""Every field of a finding but its ts (those ``==`` skips included)."""


def _same(a: Finding, b: Finding) -> bool:
    """Whether ``a`` can stand for ``b`` apart from its ts: every other field equal, and the
    values of ``extra`` of the same types too (``5 == 5.0``, ``True == 1``)."""
    if _BUT_TS(a) != _BUT_TS(b):
        return False
    x, y = a.extra, b.extra
    return x is y or all(type(v) is type(y[k]) for k, v in x.items())


def _kept_as(kept: tuple[Finding, ...], new: list[Finding] | tuple[Finding, ...]) -> bool:
    """Whether ``new`` holds exactly what ``kept`` holds, in order: the same findings, or
    ones equal to them in every field (ts and the types of ``extra``'s values included), so
    keeping ``kept`` changes nothing anyone reads."""
    return len(kept) == len(new) and all(
        a is b or (a.ts == b.ts and _same(a, b)) for a, b in zip(kept, new, strict=True))


@dataclass
class HostFindings:
    """Every kind of finding one host holds, and their merge, worst first."""

    sticky: dict[FindingKey, Finding] = field(default_factory=dict)
    """Findings from events and from GPUs that vanished: they stay until acknowledged."""
    current: tuple[Finding, ...] = ()
    """What the newest sample shows, each with the onset it was first seen at."""
    since: dict[FindingKey, float] = field(default_factory=dict)
    """When each current finding was first seen, so triage can order incidents in time."""
    layout: tuple[Finding, ...] = ()
    """Findings about how the host is built (topology, PCIe chains), kept until they change."""
    detected: tuple[Finding, ...] = ()
    """What the soak detectors found at their last run (leaks, sustained throttling …)."""
    fabric: tuple[Finding, ...] = ()
    """What the host's IB/RoCE ports and NVLinks are judged to be, onsets kept."""
    revision: int = 0
    """Writes so far."""
    content: int = 0
    """Writes that changed a kept list (a sample whose findings are the ones already kept,
    same objects, moves ``revision`` only): a memo of ``merged`` is good while it and its key
    hold (issue 38: at a thousand hosts every sample merged every host's findings again)."""
    reworded: int = 0
    """Of ``content``'s moves, a sample's findings that kept every key, severity and onset
    as they were (only words or values moved, a throttled clock's MHz): ``content -
    reworded`` moves only when which findings there are, or how bad, may have moved."""
    _memo: tuple[object, int, list[Finding]] | None = field(
        default=None, repr=False, compare=False)

    # writes

    def take_sample(self, found: Iterable[Finding] | None, ts: float) -> None:
        """The findings of a sample taken at ``ts``: a lost GPU stays (sticky), the rest are
        current, each keeping the onset it was first seen at.  None: the very findings of
        the last sample (``sample_judge.SampleJudge``), whose onsets are all kept already:
        nothing moves (``HostState._apply_sample`` takes that case as this count alone)."""
        self.revision += 1
        if found is None:
            return
        dated = {f.key: f for f in self.current}
        current = []
        for f in found:
            if f.code == Code.GPU_LOST:
                if f.key not in self.sticky:
                    self.sticky[f.key] = f
                    self.content += 1
                continue
            first = self.since.setdefault(f.key, ts)
            if f.ts != first:
                # Last tick's dated finding when only the tick's ts differs (issue 38: a
                # persisting finding re-dated per tick cost a ``replace`` per tick).
                last = dated.get(f.key)
                f = last if last is not None and last.ts == first and _same(last, f) \
                    else redated((f,), first)[0]
            current.append(f)
        keys = {f.key for f in current}
        for key in [k for k in self.since if k not in keys]:
            del self.since[key]
        if not _kept_as(self.current, current):
            self.content += 1
            if len(current) == len(self.current) and all(
                    a.key == b.key and a.severity is b.severity and a.ts == b.ts
                    for a, b in zip(self.current, current, strict=True)):
                self.reworded += 1
            self.current = tuple(current)

    def keep(self, found: Iterable[Finding]) -> None:
        """Findings of events (log lines, Xid events): kept until acknowledged, a repeat
        merged into the first."""
        self.revision += 1
        self.content += 1
        for f in found:
            kept = self.sticky.get(f.key)
            self.sticky[f.key] = f if kept is None else merged_repeat(kept, f)

    def set_layout(self, found: Iterable[Finding]) -> None:
        """How the host is built, from its hello (replaces the layout)."""
        self.revision += 1
        self.content += 1
        self.layout = tuple(found)

    def set_chains(self, chains: Iterable[Finding]) -> None:
        """Its PCIe chains as the newest sample shows them (replacing those of before)."""
        self.revision += 1
        layout = tuple(f for f in self.layout if f.code != Code.PCIE_LINK_DOWNGRADED)
        layout += tuple(chains)
        if not _kept_as(self.layout, layout):
            self.content += 1
            self.layout = layout

    def set_detected(self, found: Iterable[Finding]) -> None:
        """The soak detectors' newest verdicts."""
        self.revision += 1
        detected = tuple(found)
        if not _kept_as(self.detected, detected):
            self.content += 1
            self.detected = detected

    def set_fabric(self, found: Iterable[Finding] | None) -> None:
        """The fabric's newest verdicts, each keeping the onset of its first message (None:
        judged from the same inputs as the last ones, ``fabric_findings_changed``: they
        stand as kept)."""
        self.revision += 1
        if found is None:
            return
        was = {f.key: f.ts for f in self.fabric}
        fabric = tuple(replace(f, ts=was[f.key]) if was.get(f.key) is not None else f
                       for f in found)
        if not _kept_as(self.fabric, fabric):
            self.content += 1
            self.fabric = fabric

    # reads

    def merged(self, key: object, reach: Callable[[], Iterable[Finding]],
               watched: Callable[[], Iterable[Finding]],
               speed: Callable[[list[Finding]], Iterable[Finding]], *,
               copy: bool = True) -> list[Finding]:
        """Every finding of the host, one per incident, worst first; a host that cannot be
        watched leads its own list (everything else about it is old).

        ``reach``: its reachability; ``watched``: how it is watched (log sources, clock, job
        files refused); ``speed``: the throughput findings given all the others.  ``key``
        names what those depend on beyond this object (the host's revision, its status):
        the answer is remembered while it and ``content`` hold (every tick asks for every
        host's, and at a thousand hosts merging again is most of a tick); None: merged
        afresh and not remembered.  ``copy`` False: the remembered list itself, which the
        caller must not change (a reader that keeps what it worked out tells it by identity).
        """
        memo = self._memo
        if key is not None and memo is not None and memo[0] == key \
                and memo[1] == self.content:
            return list(memo[2]) if copy else memo[2]
        merged = {f.key: f for f in reach()}
        merged.update({f.key: f for f in self.layout})
        merged.update({f.key: f for f in watched()})
        merged.update({f.key: f for f in self.detected})
        merged.update({f.key: f for f in self.current})
        merged.update({f.key: f for f in self.fabric})
        merged.update(self.sticky)
        merged.update({f.key: f for f in speed(list(merged.values()))})
        found = sorted(merged.values(), key=lambda f: (
            -f.severity.rank, f.code not in REACHABILITY_CODES, f.step.value, f.code))
        if key is not None:
            self._memo = (key, self.content, found)
        return list(found) if copy else found

