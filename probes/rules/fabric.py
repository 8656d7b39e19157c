"""The fabric's judgements, made once: IB/RoCE ports and NVLinks, for the console and ``explain``.

The live console (``probes.analysis.fabric``, from the agent's ``fabric`` message) and
``rigwatch explain`` (``ibstat``, ``nvidia-smi nvlink -s/-e``) hand the same small records to
these functions, so a port or a link reads the same wherever it was seen.  Codes and
severities follow the explain contract's additions of 2026-12-06.

A port is compared with its siblings: the host's other ports of the same link layer and
adapter model (a 100 Gb/s ConnectX-6 front-end NIC beside 400 Gb/s ConnectX-7 compute
ports is no degraded link; leptonai/gpud's ``ibstat.47.0.h100.some.down`` capture has both).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from probes.triage import Code, Severity

ACTIVE = "ACTIVE"
_STATES = {"active": ACTIVE, "down": "DOWN", "init": "INIT", "initializing": "INIT",
           "initialize": "INIT", "armed": "ARMED", "nop": "DOWN"}
NVLINK_FEW_REPLAYS = 100
"""Replays alone up to this many are ``info``: the link retried and recovered."""

ACTION_PORT_DOWN = ("Drain the host before multi-node jobs (NCCL will fall back or hang on "
                    "this rail); reseat or replace the cable and transceiver of the port, then "
                    "check its switch port (ibstat; the switch's port counters, ibportstate)")
ACTION_PORT_SLOW = ("Reseat or replace the cable; check the switch port's configured speed and "
                    "width (ibportstate, mlxlink -d <hca> -m): a link that trained lower cuts "
                    "the rail's bandwidth for every collective")
ACTION_PORT_ERRORS = ("Watch the port's counters (perfquery -x); symbol and link-recovery "
                      "errors that keep rising mean a bad cable or transceiver: reseat or "
                      "replace it and check the switch port; a link_downed step is a flap")
ACTION_NVLINK_DOWN = ("Drain the host; reset the GPU (nvidia-smi -r) or reboot, and check "
                      "Fabric Manager on NVSwitch systems; RMA the GPU or baseboard if the "
                      "link stays inactive (Xid 74 beside it confirms)")
ACTION_NVLINK_SLOW = ("Reset the GPU or reboot to retrain the link; check nvidia-smi nvlink -s "
                      "after; a link that keeps training low needs service")
ACTION_NVLINK_ERRORS = ("Watch nvidia-smi nvlink -e; CRC and recovery errors that rise point at "
                        "the GPU's NVLink or its NVSwitch: drain and reset, RMA if they recur")


def port_state(text: str | None) -> str | None:
    """``4: ACTIVE``, ``Active``, ``ACTIVE`` -> ``ACTIVE``; ``Initializing`` -> ``INIT``."""
    if not text:
        return None
    word = text.split(":", 1)[-1].strip().lower()
    return _STATES.get(word, word.upper() or None)


_RATE = re.compile(r"\d{1,7}(?:\.\d{1,6})?(?!\d)")
"""A rate's number where it starts (a run of thousands of digits is no rate)."""


def parse_rate(text: str | None) -> float | None:
    """sysfs ``400 Gb/sec (4X NDR)`` or ibstat ``400`` -> 400.0; None when not a number."""
    m = _RATE.match((text or "").lstrip())
    return float(m.group()) if m else None


def phys_state(text: str | None) -> str | None:
    """``5: LinkUp`` -> ``LinkUp``."""
    return text.split(":", 1)[-1].strip() or None if text else None


@dataclass(frozen=True)
class PortView:
    """One IB/RoCE port as any source shows it."""

    hca: str
    port: int | None
    state: str | None
    """``port_state``'s form: ``ACTIVE``, ``DOWN``, ``INIT``, ``ARMED``."""
    phys: str | None = None
    rate_gbs: float | None = None
    link_layer: str | None = None
    model: str | None = None
    """``hca_type`` / ``CA type`` (``MT4129``), when the source names it."""

    @property
    def name(self) -> str:
        """``mlx5_3/1``."""
        return f"{self.hca}/{self.port}" if self.port is not None else self.hca

    @property
    def sibling_key(self) -> tuple[str, str]:
        return ((self.link_layer or "?").lower(), self.model or "?")


@dataclass(frozen=True)
class Verdict:
    """One judgement: its code, severity, summary, what it is about and details."""

    code: Code
    severity: Severity
    summary: str
    action: str
    about: tuple[str, ...] = ()
    """The ports (``mlx5_3/1``) or links (``GPU3 link 5``) it names."""
    gpu: int | None = None
    extra: dict[str, object] = field(default_factory=dict)
    links: tuple[int, ...] = ()
    """The NVLinks it names, by number."""


def port_verdicts(ports: Sequence[PortView]) -> list[Verdict]:
    """``ib-port-down`` and ``ib-link-degraded`` for one host's ports."""
    if not ports:
        return []
    out: list[Verdict] = []
    active = [p for p in ports if p.state == ACTIVE]
    down = [p for p in ports if p.state is not None and p.state != ACTIVE]
    if down and (active or len(down) == len(ports)):
        words = ", ".join(f"{p.name} {p.state}" + (f"/{p.phys}" if p.phys else "")
                          for p in down)
        tail = (f"; {len(active)} of {len(ports)} ports Active" if active
                else "; every port of the host is down")
        out.append(Verdict(Code.IB_PORT_DOWN, Severity.CRITICAL, f"{words}{tail}",
                           ACTION_PORT_DOWN, tuple(p.name for p in down),
                           extra={"ports": [p.name for p in down],
                                  "active": len(active), "total": len(ports)}))
    best: dict[tuple[str, str], float] = {}
    for p in active:
        if p.rate_gbs is not None:
            best[p.sibling_key] = max(best.get(p.sibling_key, 0.0), p.rate_gbs)
    slow = [p for p in active if p.rate_gbs is not None and p.rate_gbs < best[p.sibling_key]]
    if slow:
        words = ", ".join(f"{p.name} at {p.rate_gbs:g} Gb/s" for p in slow)
        top = max(best[p.sibling_key] for p in slow)
        out.append(Verdict(Code.IB_LINK_DEGRADED, Severity.WARNING,
                           f"{words}, below its siblings' {top:g} Gb/s", ACTION_PORT_SLOW,
                           tuple(p.name for p in slow),
                           extra={"ports": [p.name for p in slow], "expected_gbs": top}))
    return out


@dataclass(frozen=True, slots=True)
class LinkView:
    """One NVLink of one GPU; counters are totals (None: not shown).  Slotted: a host's
    tracker holds one per link (144 on an 8-GPU NVSwitch host), each with a dict was
    ~20 KB a host (issue 38)."""

    gpu: int
    link: int
    active: bool | None
    speed_gbs: float | None = None
    replay: int | None = None
    recovery: int | None = None
    crc: int | None = None


def nvlink_verdicts(links: Sequence[LinkView]) -> list[Verdict]:
    """``nvlink-down``, ``nvlink-slow`` and ``nvlink-errors``, one of each per GPU at most."""
    out: list[Verdict] = []
    up_links = {lk.link for lk in links if lk.active}
    top = max((lk.speed_gbs for lk in links if lk.active and lk.speed_gbs), default=None)
    by_gpu: dict[int, list[LinkView]] = {}
    for lk in links:
        by_gpu.setdefault(lk.gpu, []).append(lk)
    for gpu, own in sorted(by_gpu.items()):
        dead = [lk for lk in own if lk.active is False and (
            any(o.active for o in own) or lk.link in up_links)]
        if dead:
            names = ", ".join(str(lk.link) for lk in dead)
            out.append(Verdict(Code.NVLINK_DOWN, Severity.CRITICAL,
                               f"GPU {gpu}: NVLink {names} inactive ({len(dead)} of {len(own)} "
                               "links) while its other links or its peers' are up",
                               ACTION_NVLINK_DOWN, tuple(f"GPU{gpu} link {lk.link}" for lk in dead),
                               gpu, {"links": [lk.link for lk in dead]},
                               tuple(lk.link for lk in dead)))
        slow = [lk for lk in own if lk.active and lk.speed_gbs and top and lk.speed_gbs < top]
        if slow:
            out.append(Verdict(Code.NVLINK_SLOW, Severity.WARNING,
                               f"GPU {gpu}: NVLink {', '.join(str(lk.link) for lk in slow)} at "
                               f"{min(lk.speed_gbs or 0 for lk in slow):g} GB/s, below its "
                               f"peers' {top:g} GB/s", ACTION_NVLINK_SLOW,
                               tuple(f"GPU{gpu} link {lk.link}" for lk in slow), gpu,
                               {"links": [lk.link for lk in slow], "expected_gbs": top},
                               tuple(lk.link for lk in slow)))
        sums = {k: sum(getattr(lk, k) or 0 for lk in own) for k in ("replay", "recovery", "crc")}
        if any(sums.values()):
            only_few = not sums["recovery"] and not sums["crc"] \
                and sums["replay"] <= NVLINK_FEW_REPLAYS
            bad = [lk.link for lk in own if (lk.replay or 0) + (lk.recovery or 0) + (lk.crc or 0)]
            told = ", ".join(f"{v} {k}" for k, v in sums.items() if v)
            out.append(Verdict(Code.NVLINK_ERRORS, Severity.INFO if only_few else Severity.WARNING,
                               f"GPU {gpu}: NVLink errors {told} (links "
                               f"{', '.join(map(str, bad))})", ACTION_NVLINK_ERRORS,
                               tuple(f"GPU{gpu} link {n}" for n in bad), gpu,
                               {"links": bad, **sums}, tuple(bad)))
    return out
