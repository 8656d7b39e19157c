"""The finding a drain rests on, and the reason Slurm keeps for it.

``scontrol update … reason=`` stores any text, but Slurm's accounting keeps a node event's
reason in a ``tinytext`` column (255 bytes, ``as_mysql_convert``'s ``event_table``), and
``scontrol show node`` cuts a reason at its first newline.  So a reason rigwatch writes is
one line of printable text of at most :data:`MAX_REASON_BYTES` bytes, and it starts with
``rigwatch`` and the incident id, so ``sinfo -R`` tells who drained the node and why.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from probes.actions.errors import ActionError
from probes.analysis.first_failure import FirstFailure
from probes.analysis.onsets import onset
from probes.wire.samples import HostFacts
from probes.wire.sanitize import clean_text

MAX_REASON_BYTES = 255
"""What Slurm's accounting keeps of a node's reason (``tinytext``)."""
TAG = "rigwatch"


@dataclass(frozen=True)
class Evidence:
    """What a drain rests on: the finding (code, Xid, GPU and its identity) and its
    incident, as the triage screen, the job view or the operator named it."""

    code: str
    host: str | None = None
    incident: str | None = None
    """``FirstFailure.incident_id``; None for a drain a script asked for by code alone."""
    gpu: int | None = None
    xid: int | None = None
    serial: str | None = None
    bus_id: str | None = None
    summary: str = ""
    onset: float | None = None
    """When it began (console clock), None when not known."""

    @classmethod
    def of_incident(cls, first: FirstFailure, facts: HostFacts | None = None) -> Evidence:
        """The incident's root, its GPU named by serial and bus id (the culprit's, else the
        host's hello facts)."""
        f = first.finding
        c = first.culprit
        host = c.host if c is not None and c.host else f.host
        gpu = c.gpu if c is not None and c.gpu is not None else f.gpu
        serial = c.serial if c is not None else None
        bus = c.bus_id if c is not None else None
        info = next((g for g in facts.gpus if g.index == gpu), None) \
            if facts is not None and gpu is not None else None
        if info is not None:
            serial = serial or info.serial
            bus = bus or info.bus_id
        return cls(str(f.code), host, first.incident_id or None, gpu, f.xid, serial, bus,
                   f.summary, onset(f) if f.ts is not None else None)

    def what(self) -> str:
        """``Xid 79 on GPU6 serial 1654116048262 (0000:ba:00.0)``: the finding in a few words."""
        text = f"Xid {self.xid}" if self.xid is not None else self.code
        if self.gpu is not None and self.gpu >= 0:
            text += f" on GPU{self.gpu}"
        if self.serial:
            text += f" serial {self.serial}"
        if self.bus_id:
            text += f" ({self.bus_id})"
        return text

    def to_json(self) -> dict[str, object]:
        """The ``evidence`` object of an audit record."""
        return {"incident": self.incident, "code": self.code, "host": self.host,
                "gpu": self.gpu, "xid": self.xid, "serial": self.serial,
                "bus_id": self.bus_id, "summary": self.summary, "onset": self.onset}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Evidence:
        """Back from :meth:`to_json` (an audit line); a field of the wrong type is dropped."""
        def text(key: str) -> str | None:
            v = data.get(key)
            return clean_text(v) if isinstance(v, str) else None

        def whole(key: str) -> int | None:
            v = data.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        when = data.get("onset")
        return cls(text("code") or "?", text("host"), text("incident"), whole("gpu"),
                   whole("xid"), text("serial"), text("bus_id"), text("summary") or "",
                   float(when) if isinstance(when, int | float)
                   and not isinstance(when, bool) else None)


def check_reason(text: str) -> str:
    """``text`` as one line Slurm keeps whole: whitespace runs become one space.

    Raises:
        ActionError: empty, a control character (a newline would cut it in ``scontrol show
            node``; an escape would reach every terminal that prints ``sinfo -R``), or more
            than :data:`MAX_REASON_BYTES` bytes.
    """
    line = " ".join(text.split())
    bad = next((c for c in line if unicodedata.category(c)[0] == "C"), None)
    if bad is not None:
        raise ActionError(f"the reason holds a control character (U+{ord(bad):04X}): "
                          "Slurm's reason is one line of text")
    if not line:
        raise ActionError("give a reason: it is what sinfo -R shows for the node")
    size = len(line.encode("utf-8"))
    if size > MAX_REASON_BYTES:
        raise ActionError(f"the reason is {size} bytes: Slurm's accounting keeps "
                          f"{MAX_REASON_BYTES} (shorten it)")
    return line


def _fit(head: str, body: str) -> str:
    """``head + body`` cut to :data:`MAX_REASON_BYTES` bytes, ``...`` marking a cut."""
    line = " ".join(f"{head}{body}".split())
    if len(line.encode("utf-8")) <= MAX_REASON_BYTES:
        return line
    room = MAX_REASON_BYTES - 3
    cut = line.encode("utf-8")[:room].decode("utf-8", "ignore")
    return cut.rstrip() + "..."


def drain_reason(evidence: Evidence | None, text: str | None = None) -> str:
    """The reason Slurm keeps for a drain rigwatch makes.

    From a finding: ``rigwatch 3f2a9c1b: Xid 79 on GPU6 serial … (0000:ba:00.0)`` (cut to
    fit, never refused).  From a script: ``rigwatch: TEXT``, or ``rigwatch xid: TEXT`` with
    ``--finding``; the operator's text must fit whole (:func:`check_reason`).

    Raises:
        ActionError: the operator's text cannot be kept whole.
    """
    if text is not None:
        head = f"{TAG} {evidence.code}: " if evidence is not None else f"{TAG}: "
        return check_reason(head + check_reason(text))
    if evidence is None:
        raise ActionError("nothing was found on this node to drain it for (rigwatch node "
                          "drain NODE --reason TEXT drains it with a reason of your own)")
    head = f"{TAG} {evidence.incident}: " if evidence.incident else f"{TAG}: "
    return _fit(clean_text(head), clean_text(evidence.what()))
