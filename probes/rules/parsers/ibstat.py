"""``ibstat`` (infiniband-diags; also ``ibstat -v``, ``ibstat <ca> [port]``) and ``ibstatus``.

``ibstat`` prints a block per adapter, ``CA 'mlx5_0'`` then indented ``Key: value`` lines
and a ``Port N:`` block per port (``State: Active``, ``Physical state: LinkUp``, ``Rate:
400``, ``Link layer: InfiniBand``).  ``ibstatus`` prints ``Infiniband device 'mlx5_0' port 1
status:`` blocks with ``state: 4: ACTIVE`` and ``rate: 200 Gb/sec (4X HDR)``.  Both are read
into the same adapters and judged by ``probes.rules.fabric``.  Shapes: leptonai/gpud
``pkg/nvidia-query/infiniband/testdata`` (``ibstat.47.0.h100.all.active.*``,
``ibstat.47.0.h100.some.down.with.polling.1``, ``ibstatus.39.0.a100.all.active.0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from probes.rules.fabric import PortView, parse_rate, phys_state, port_state, port_verdicts
from probes.rules.result import ExplainFinding, KindResult
from probes.rules.text import clean_lines
from probes.triage import Code, Step

KIND = "ibstat"
LOOKS_LIKE_LINES = 2000
_PREFIX = r"^\s*(?:[\w.\-\[\]]+:\s+)?"
_CA = re.compile(_PREFIX + r"CA:?\s+'(?P<name>[^']+)'\s*$")
_DEVICE = re.compile(_PREFIX + r"Infiniband device '(?P<name>[^']+)' port (?P<port>\d{1,4}) "
                     r"status:\s*$", re.IGNORECASE)
_PORT = re.compile(_PREFIX + r"Port (?P<port>\d{1,4}):\s*$")
_HOST_WORD = re.compile(r"[\w.\-\[\]]+")
_KEY = re.compile(r"[A-Za-z][\w ]*")
_KEYS = {"state": "state", "physical state": "physical_state", "phys state": "physical_state",
         "rate": "rate", "link layer": "link_layer", "link_layer": "link_layer",
         "base lid": "base_lid", "sm lid": "sm_lid", "port guid": "port_guid"}
_CA_KEYS = {"ca type": "ca_type", "firmware version": "firmware", "node guid": "node_guid",
            "number of ports": "ports_count"}


def _key_value(text: str) -> tuple[str, str] | None:
    key, sep, val = text.partition(":")
    key = key.rstrip()
    return (key, val.strip()) if sep and _KEY.fullmatch(key) else None


def _kv(line: str) -> tuple[str, str] | None:
    """``Key: value``, after an optional ``host: `` prefix (pdsh, clush), stripped.  String
    splits around two whole-string patterns: a key of spaces around a colon, or a value of
    spaces, read in linear time."""
    s = line.strip()
    head, sep, rest = s.partition(":")
    if sep and rest[:1].isspace() and _HOST_WORD.fullmatch(head):
        got = _key_value(rest.strip())
        if got is not None:
            return got
    return _key_value(s)


@dataclass
class _Port:
    port: int
    line: int
    fields: dict[str, str] = field(default_factory=dict)
    lines: dict[str, tuple[int, str]] = field(default_factory=dict)


@dataclass
class _Adapter:
    name: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)
    ports: dict[int, _Port] = field(default_factory=dict)


def parse_ibstat(lines: list[str]) -> list[_Adapter]:
    """Every adapter and port in the input, ``ibstat`` or ``ibstatus`` form."""
    adapters: dict[str, _Adapter] = {}
    cur: _Adapter | None = None
    port: _Port | None = None
    for no, line in enumerate(clean_lines(lines), 1):
        m = _CA.match(line) or _DEVICE.match(line)
        if m:
            cur = adapters.setdefault(m.group("name"), _Adapter(m.group("name"), no))
            port = None
            if "port" in m.groupdict() and m.group("port"):
                n = int(m.group("port"))
                port = cur.ports.setdefault(n, _Port(n, no))
            continue
        m = _PORT.match(line)
        if m and cur is not None:
            n = int(m.group("port"))
            port = cur.ports.setdefault(n, _Port(n, no))
            continue
        kv = _kv(line)
        if kv is None or cur is None:
            continue
        key, val = kv[0].strip().lower(), kv[1]
        if port is not None and key in _KEYS:
            port.fields[_KEYS[key]] = val
            port.lines[_KEYS[key]] = (no, line.strip())
        elif key in _CA_KEYS:
            cur.fields[_CA_KEYS[key]] = val
    return list(adapters.values())


def _state_word(text: str | None) -> str | None:
    """``Active`` as ``ibstat`` prints it; ``4: ACTIVE`` (``ibstatus``) -> ``ACTIVE``."""
    return text.split(":", 1)[-1].strip() if text else None


def explain(lines: list[str]) -> KindResult:
    """The contract's ``ibstat`` result: adapters and ports, and the ports' findings."""
    adapters = parse_ibstat(lines)
    parsed = {"adapters": [
        {"name": a.name, **{k: a.fields[k] for k in ("ca_type", "firmware", "node_guid")
                            if k in a.fields},
         "ports": [{"port": p.port, "state": _state_word(p.fields.get("state")),
                    "physical_state": _state_word(p.fields.get("physical_state")),
                    "rate_gbs": parse_rate(p.fields.get("rate")),
                    "link_layer": p.fields.get("link_layer")} for p in a.ports.values()]}
        for a in adapters]}
    views = [(PortView(a.name, p.port, port_state(p.fields.get("state")),
                       phys_state(p.fields.get("physical_state")), parse_rate(p.fields.get("rate")),
                       p.fields.get("link_layer"), a.fields.get("ca_type")), p)
             for a in adapters for p in a.ports.values()]
    by_name = {v.name: p for v, p in views}
    found = []
    for v in port_verdicts([v for v, _ in views]):
        first = by_name[v.about[0]]
        field_ = "state" if v.code == Code.IB_PORT_DOWN else "rate"
        line, text = first.lines.get(field_, (first.line, ""))
        found.append(ExplainFinding(Step.GPU, v.code, v.severity, line, text, v.summary,
                                    v.action, extra=dict(v.extra)))
    return KindResult(KIND, parsed, tuple(found))


def looks_like(lines: list[str]) -> bool:
    """A ``CA '<name>'`` line with a ``Port N:`` or ``State:`` under it, or an
    ``Infiniband device '<name>' port N status:`` line."""
    ca = False
    for line in clean_lines(lines[:LOOKS_LIKE_LINES]):
        if _DEVICE.match(line):
            return True
        if _CA.match(line):
            ca = True
        elif ca and (_PORT.match(line) or re.match(_PREFIX + r"(?:CA type|State):", line)):
            return True
    return False
