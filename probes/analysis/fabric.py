"""A host's fabric live: its IB/RoCE ports and NVLinks, judged from the agent's ``fabric``
messages with the same judgements as ``explain`` (``probes.rules.fabric``).

The tracker keeps the newest ports and links and the error increases of the last
``ib_errors_window_s``; ``fabric_findings`` turns them into findings, naming the GPU each
HCA sits beside (``beside``: a GPU under the same PCIe switch, else on the same NUMA node).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from probes.analysis.findings import Finding
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.rules.fabric import (
    ACTION_PORT_ERRORS,
    LinkView,
    PortView,
    Verdict,
    nvlink_verdicts,
    port_state,
    port_verdicts,
)
from probes.rules.parsers.nvlink import link_views, parse_nvlink
from probes.triage import Code, Severity, Step
from probes.wire.samples import FabricSample, Hello, IbPortSample

ERRORS_KEPT = 1024
"""Port-messages with errors kept for the window: a port erroring every sample for 10 min,
64 ports sending every 5 samples, fits; a hostile host cannot grow it further."""
LINK_ERRORS = frozenset({
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "port_xmit_discards", "port_rcv_switch_relay_errors",
    "local_ack_timeout_err", "rx_icrc_encapsulated"})
"""Counters that say the link (cable, transceiver, switch port) is bad.  Sequence errors
(``out_of_sequence``, ``packet_seq_err``) also rise on a healthy fabric with adaptive
routing, and completion errors follow a job's own faults: shown, never judged."""
FLAP = "link_downed"
FLAP_COUNTERS = frozenset({FLAP})
"""A step of ``link_downed``: the link went down and came back (a flap)."""


SHARED_LINKS_MAX = 16384
"""Distinct links kept for sharing; past it the table starts again (counters that keep
rising on many hosts make new links each message)."""
_shared_links: dict[tuple[object, ...], LinkView] = {}


def shared_link(gpu: int, link: int, active: bool | None, speed_gbs: float | None,
                replay: int | None, recovery: int | None, crc: int | None) -> LinkView:
    """The ``LinkView`` of these values, one object for every host and message that has
    them (frozen: nothing writes it).  At 1000 hosts most links are alike (active, the
    same speed, no errors), and a tracker keeps 144 of them (issue 38).  The key holds
    the speed's type and sign, so an ``int`` or a ``-0.0`` comes back as it was given."""
    key = (gpu, link, active, speed_gbs, replay, recovery, crc, type(speed_gbs),
           speed_gbs is not None and math.copysign(1.0, speed_gbs))
    view = _shared_links.get(key)
    if view is None:
        if len(_shared_links) >= SHARED_LINKS_MAX:
            _shared_links.clear()
        view = _shared_links[key] = LinkView(gpu, link, active, speed_gbs, replay, recovery,
                                             crc)
    return view


@dataclass
class FabricTracker:
    """One host's newest fabric and its recent error increases."""

    ports: tuple[IbPortSample, ...] = ()
    links: tuple[LinkView, ...] = ()
    ts: float | None = None
    interval_s: float | None = None
    errors: deque[tuple[float, str, dict[str, int]]] | tuple[()] = ()
    """(time, port, increases) of every message whose port counted errors: the empty tuple
    until the first (an empty deque is ~0.8 KB a host, and most ports never err: issue
    38), then a deque of the newest ``ERRORS_KEPT``."""
    judged: tuple[object, ...] | None = field(default=None, repr=False, compare=False)
    """What ``fabric_findings_changed`` judged last (``judged_inputs``); None: nothing yet."""

    def add(self, f: FabricSample) -> None:
        """Fold one ``fabric`` message."""
        self.ts, self.ports = f.ts, f.ports
        self.interval_s = f.interval_s
        for p in f.ports:
            if p.errors:
                errors = self.errors
                if not isinstance(errors, deque):
                    errors = self.errors = deque(maxlen=ERRORS_KEPT)
                errors.append((f.ts, _name(p), dict(p.errors)))
        if f.nvlinks is not None:
            self.links = tuple(shared_link(n.gpu, n.link, n.active, n.speed_gbs, n.replay,
                                           n.recovery, n.crc) for n in f.nvlinks)
        elif f.nvlink_text is not None:
            self.links = tuple(shared_link(v.gpu, v.link, v.active, v.speed_gbs, v.replay,
                                           v.recovery, v.crc)
                               for v in link_views(parse_nvlink(f.nvlink_text.splitlines())))

    def recent(self, now: float, window_s: float) -> dict[str, dict[str, int]]:
        """Each port's error increases summed over the window before ``now``."""
        errors = self.errors
        while errors and errors[0][0] < now - window_s:
            assert isinstance(errors, deque)
            errors.popleft()
        out: dict[str, dict[str, int]] = {}
        for _, name, errs in errors:
            acc = out.setdefault(name, {})
            for k, v in errs.items():
                acc[k] = acc.get(k, 0) + v
        return out


def _name(p: IbPortSample) -> str:
    return f"{p.hca}/{p.port}" if p.port is not None else p.hca


def port_views(ports: tuple[IbPortSample, ...], hello: Hello | None) -> list[PortView]:
    """The agent's ports as the shared judgement reads them, with each HCA's model."""
    models = {n.name: n.hca_type for n in hello.nics} if hello is not None else {}
    return [PortView(p.hca, p.port, port_state(p.state), p.phys_state, p.rate_gbs,
                     p.link_layer, models.get(p.hca)) for p in ports]


def beside(hello: Hello | None) -> dict[str, tuple[tuple[int, ...], str]]:
    """Each HCA's nearest GPUs and how near: ``pcie`` (a PCIe switch or root port above
    both), ``numa`` (the same node); HCAs with neither are left out."""
    if hello is None:
        return {}
    chains = {g.index: {link.address for link in hello.pcie.get(g.bus_id or "", ())[1:]}
              for g in hello.facts.gpus}
    numa = {g.index: next((link.numa_node for link in hello.pcie.get(g.bus_id or "", ())),
                          None) for g in hello.facts.gpus}
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for nic in hello.nics:
        if nic.kind != "infiniband":
            continue
        for bridge in nic.bridges:  # nearest first: the first shared one is the closest
            near = tuple(i for i, up in sorted(chains.items()) if bridge in up)
            if near:
                out[nic.name] = (near, "pcie")
                break
        else:
            same = tuple(i for i, n in sorted(numa.items())
                         if n is not None and n == nic.numa_node)
            if same:
                out[nic.name] = (same, "numa")
    return out


def _gpus_word(ports: tuple[str, ...], near: dict[str, tuple[tuple[int, ...], str]]) -> str:
    gpus = sorted({g for p in ports for g in near.get(p.split("/")[0], ((), ""))[0]})
    if not gpus:
        return ""
    return " (beside GPU " + ", ".join(str(g) for g in gpus) + ")"


def _finding(host: str, v: Verdict, ts: float, near: dict[str, tuple[tuple[int, ...], str]]
             ) -> Finding:
    summary = v.summary
    extra = dict(v.extra)
    if v.code in (Code.IB_PORT_DOWN, Code.IB_LINK_DEGRADED):
        head, sep, tail = summary.partition("; " if v.code == Code.IB_PORT_DOWN else ", below")
        summary = head + _gpus_word(v.about, near) + sep + tail
        extra["gpus"] = sorted({g for p in v.about for g in near.get(p.split("/")[0],
                                                                       ((), ""))[0]})
    return Finding(Step.GPU, v.code, v.severity, summary, host, gpu=v.gpu,
                   evidence=", ".join(v.about) or None, ts=ts, action=v.action, extra=extra)


def fabric_findings(host: str, tracker: FabricTracker, hello: Hello | None,
                    limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding]:
    """The host's port, error and NVLink findings from its newest fabric."""
    if tracker.ts is None:
        return []
    return _judged(host, tracker, hello, limits,
                   tracker.recent(tracker.ts, limits.ib_errors_window_s))


def _judged(host: str, tracker: FabricTracker, hello: Hello | None, limits: DetectorLimits,
            recent: dict[str, dict[str, int]]) -> list[Finding]:
    ts = tracker.ts or 0.0
    verdicts = port_verdicts(port_views(tracker.ports, hello)) + \
        quiet_or_verdicts(tracker.links)
    rising = errors_rising(recent, limits)
    if rising is not None:
        verdicts.append(rising)
    if not verdicts:  # a healthy fabric: no finding names a GPU beside a port
        return []
    near = beside(hello)
    return [_finding(host, v, ts, near) for v in verdicts]


QUIET_KEPT = 64
"""Sets of links judged quiet, kept (a fleet runs a few models; a healthy host of each)."""
_quiet: dict[tuple[int, ...], tuple[LinkView, ...]] = {}


def quiet_or_verdicts(links: tuple[LinkView, ...]) -> list[Verdict]:
    """``nvlink_verdicts(links)``; none, without judging, for the very link objects that
    were judged to have none before (``shared_link``: a thousand healthy hosts of one
    model hold the same 144 objects).  The key is the objects' ids, and the entry holds
    the objects, so no id in a key is reused while the key is kept; a ``LinkView`` is
    frozen, and the verdicts read nothing but the links (issue 38, start-up: ~75 µs of a
    healthy host's first report, ~160 µs, in the console)."""
    key = tuple(map(id, links))
    if key in _quiet:
        return []
    out = nvlink_verdicts(links)
    if not out:
        if len(_quiet) >= QUIET_KEPT:
            _quiet.clear()
        _quiet[key] = links
    return out


def judged_inputs(host: str, tracker: FabricTracker, hello: Hello | None,
                  limits: DetectorLimits, recent: dict[str, dict[str, int]]
                  ) -> tuple[object, ...]:
    """Everything ``fabric_findings`` reads but the report's time: each port's judged fields
    (not its rates or counters, which move every report), the links (shared objects:
    ``shared_link``), the hello and limits, the window's error increases.  Numbers keep
    their types and signs (``400`` and ``400.0``, ``-0.0`` print apart)."""
    ports = tuple((p.hca, p.port, p.state, p.phys_state, p.link_layer, p.rate_gbs,
                   type(p.rate_gbs), p.rate_gbs is not None and math.copysign(1.0, p.rate_gbs))
                  for p in tracker.ports)
    errors = tuple((name, tuple((k, v, type(v)) for k, v in errs.items()))
                   for name, errs in recent.items())
    return (host, hello, limits, ports, tracker.links, errors)


def _same_inputs(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """``judged_inputs`` alike: the hello, the limits and each link the same objects (a
    hello or link view equal but not the same is judged again), the rest equal."""
    la, lb = a[4], b[4]
    return a[1] is b[1] and (a[2] is b[2] or a[2] == b[2]) and a[0] == b[0] \
        and a[3] == b[3] and a[5] == b[5] and (la is lb or (
            len(la) == len(lb)  # type: ignore[arg-type]
            and all(x is y for x, y in zip(la, lb, strict=True))))  # type: ignore[call-overload]


def fabric_findings_changed(host: str, tracker: FabricTracker, hello: Hello | None,
                            limits: DetectorLimits = DEFAULT_LIMITS) -> list[Finding] | None:
    """``fabric_findings``, or None when every input it reads but the report's time is what
    it read at the last call (issue 38: a report every 30 s a host, ~130 µs to judge, and
    nearly always the same ports, links and errors).  None means the findings of the last
    call stand: the caller keeps them as ``HostFindings.set_fabric`` kept them (each with
    the onset of its first report; only a new finding takes a report's time, and a
    report of the same inputs has none).  The window's errors are read (and the old ones
    dropped) on every call, as ``fabric_findings`` reads them."""
    if tracker.ts is None:
        tracker.judged = None
        return []
    recent = tracker.recent(tracker.ts, limits.ib_errors_window_s)
    inputs = judged_inputs(host, tracker, hello, limits, recent)
    if tracker.judged is not None and _same_inputs(tracker.judged, inputs):
        return None
    tracker.judged = inputs
    return _judged(host, tracker, hello, limits, recent)


def errors_rising(recent: dict[str, dict[str, int]], limits: DetectorLimits) -> Verdict | None:
    """``ib-errors-rising``: ports whose error counters rose at least ``ib_errors_min``
    within the window, or that flapped (``link_downed`` rose at all)."""
    judged = {name: {k: v for k, v in errs.items() if k in LINK_ERRORS}
              for name, errs in recent.items()}
    bad = {name: errs for name, errs in judged.items()
           if sum(errs.values()) >= limits.ib_errors_min or errs.get(FLAP)}
    if not bad:
        return None
    flaps = sum(e.get(FLAP, 0) for e in bad.values())
    parts = []
    for name, errs in sorted(bad.items()):
        told = ", ".join(f"+{v} {k}" for k, v in sorted(errs.items(), key=lambda kv: -kv[1]))
        parts.append(f"{name} {told}")
    minutes = limits.ib_errors_window_s / 60
    summary = "; ".join(parts) + f" in {minutes:g} min" + (
        f" ({flaps} flap{'s' if flaps != 1 else ''})" if flaps else "")
    return Verdict(Code.IB_ERRORS_RISING, Severity.WARNING, summary, ACTION_PORT_ERRORS,
                   tuple(sorted(bad)), extra={"ports": sorted(bad), "flaps": flaps,
                                              "counts": {k: dict(v) for k, v in bad.items()}})


_MARKS: dict[str, str] = {Code.IB_PORT_DOWN: "down", Code.IB_LINK_DEGRADED: "slow",
          Code.IB_ERRORS_RISING: "errors", Code.NVLINK_DOWN: "down", Code.NVLINK_SLOW: "slow",
          Code.NVLINK_ERRORS: "errors"}
"""A fabric finding's word on the port or GPU it names (the worst wins)."""
_ORDER = ("ok", "errors", "slow", "down")


def marks(found: tuple[Finding, ...] | list[Finding]) -> tuple[dict[str, str], dict[int, str]]:
    """The core's verdict word per port (``mlx5_3/1``) and per GPU's NVLinks, from the
    host's fabric findings: what the network panel shows beside each line."""
    ports: dict[str, str] = {}
    gpus: dict[int, str] = {}
    for f in found:
        word = _MARKS.get(f.code)
        if word is None or (f.severity is Severity.INFO and word == "errors"):
            continue
        for p in f.details.ports:
            if _ORDER.index(word) > _ORDER.index(ports.get(p, "ok")):
                ports[p] = word
        nvlink = f.code in (Code.NVLINK_DOWN, Code.NVLINK_SLOW, Code.NVLINK_ERRORS)
        if nvlink and f.gpu is not None and \
                _ORDER.index(word) > _ORDER.index(gpus.get(f.gpu, "ok")):
            gpus[f.gpu] = word
    return ports, gpus
