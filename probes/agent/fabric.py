"""The fabric: InfiniBand/RoCE ports from sysfs, NVLink from the GPU probe; a ``fabric`` message.

Port counters are read every tick and their increases summed until the message is sent
(on a change of state or rate at once, after errors within FABRIC_ERROR_TICKS, else every
FABRIC_EVERY_TICKS).  A PMA counter stops at its top value instead of wrapping, and a reset
or a driver reload starts it again from 0: neither may read as a rate, so such a tick's
increase is unknown (``unknown``), never a guess (sysfs-class-infiniband ABI; IBTA widths).
"""

from __future__ import annotations

import os

from .commands import read_text, run_command
from .pci import list_dir
from .values import parse_number

FABRIC_EVERY_TICKS = 30
FABRIC_ERROR_TICKS = 5
NVLINK_TEXT_EVERY_TICKS = 30
IB_COUNTERS = {
    "counters": ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                 "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
                 "port_xmit_discards", "port_xmit_constraint_errors",
                 "port_rcv_constraint_errors", "local_link_integrity_errors",
                 "excessive_buffer_overrun_errors", "VL15_dropped", "port_xmit_wait",
                 "port_rcv_data", "port_xmit_data"),
    "hw_counters": ("local_ack_timeout_err", "packet_seq_err", "out_of_sequence",
                    "rnr_nak_retry_err", "implied_nak_seq_err", "req_cqe_error",
                    "resp_cqe_error", "rx_icrc_encapsulated"),
}
IB_WIDTH = {"link_error_recovery": 8, "link_downed": 8, "port_xmit_constraint_errors": 8,
            "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
            "excessive_buffer_overrun_errors": 4, "port_xmit_wait": 32, "symbol_error": 16,
            "port_rcv_errors": 16, "port_rcv_remote_physical_errors": 16,
            "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16, "VL15_dropped": 16}
"""Bits of each PortCounters field; the data counters are 32 bits unless the kernel reads
PortCountersExtended (a value past 2**32 - 1 says so); hw_counters are 64-bit."""
IB_DATA = ("port_rcv_data", "port_xmit_data")
"""Counted in 4-octet words."""


def counter_delta(name, old, new):
    """How much ``name`` rose from ``old`` to ``new``; None when that cannot be known: a
    reset or wrap (``new < old``), a counter stuck at its top, or a data counter reaching
    it (its rate would read low)."""
    if old is None or new is None or new < old:
        return None
    bits = IB_WIDTH.get(name, 32 if name in IB_DATA and new <= 0xFFFFFFFF else 64)
    top = (1 << bits) - 1
    if old >= top or (new >= top and name in IB_DATA):
        return None
    return new - old


def _ib_value(path):
    text = read_text(path)
    return text.strip() if text is not None else None


def _ib_word(text):
    """sysfs ``4: ACTIVE`` -> ``ACTIVE``; ``5: LinkUp`` -> ``LinkUp``."""
    return text.split(":", 1)[-1].strip() if text else None


def read_ib_ports(sys_root):
    """[(hca, port, state, phys_state, rate_gbs, link_layer, {counter: value})] from sysfs."""
    root = os.path.join(sys_root, "class", "infiniband")
    out = []
    for hca in list_dir(root):
        for port in list_dir(os.path.join(root, hca, "ports")):
            p = os.path.join(root, hca, "ports", port)
            counts = {}
            for sub, names in IB_COUNTERS.items():
                for name in names:
                    v = _ib_value(os.path.join(p, sub, name))
                    if v is not None and v.isdigit():
                        counts[name] = int(v)
            out.append((hca, port, _ib_word(_ib_value(os.path.join(p, "state"))),
                        _ib_word(_ib_value(os.path.join(p, "phys_state"))),
                        parse_number(_ib_value(os.path.join(p, "rate"))),
                        _ib_value(os.path.join(p, "link_layer")), counts))
    return out[:64]


class FabricReader(object):
    """Ports and NVLink each tick; ``tick`` returns the ``fabric`` message's body when due."""

    def __init__(self, sys_root):
        self.root = sys_root
        self.last = {}
        self.acc = {}
        self.unknown = {}
        self.shown = None
        self.ticks = 0
        self.since = None
        self.errors = False
        self.nvlink_text = None
        self.nvlink = None
        self.sent = 0

    def tick(self, now, nvlink=None, nvlink_text=None):
        ports = read_ib_ports(self.root)
        if not ports and nvlink is None and nvlink_text is None:
            return None
        for hca, port, _s, _p, _r, _l, counts in ports:
            key = (hca, port)
            last, acc = self.last.get(key, {}), self.acc.setdefault(key, {})
            for name, v in counts.items():
                if name not in last:
                    continue
                d = counter_delta(name, last[name], v)
                if d is None:
                    self.unknown.setdefault(key, set()).add(name)
                elif d:
                    acc[name] = acc.get(name, 0) + d
                    self.errors = self.errors or name not in IB_DATA + ("port_xmit_wait",)
            self.last[key] = counts
        shown = ([p[:6] for p in ports], nvlink, nvlink_text)
        self.ticks += 1
        if self.since is None:
            self.since = now
        due = (shown != self.shown or self.ticks >= FABRIC_EVERY_TICKS
               or (self.errors and self.ticks >= FABRIC_ERROR_TICKS))
        if not due:
            return None
        dt = now - self.since
        msg = {"interval_s": round(dt, 3) if dt > 0 else None,
               "ports": [self._port(p, dt) for p in ports]}
        self.sent += 1
        if nvlink is not None and (nvlink != self.nvlink or self.sent % 10 == 1):
            msg["nvlink"] = self.nvlink = nvlink  # on a change, else every 10th message
        if nvlink_text is not None and nvlink_text != self.nvlink_text:
            msg["nvlink_text"] = self.nvlink_text = nvlink_text
        self.shown, self.ticks, self.since, self.errors = shown, 0, now, False
        self.acc, self.unknown = {}, {}
        return msg

    def _port(self, p, dt):
        hca, port, state, phys, rate, layer, counts = p
        acc = self.acc.get((hca, port), {})
        unknown = sorted(self.unknown.get((hca, port), ()))
        out = {"hca": hca, "port": int(port) if port.isdigit() else None, "state": state,
               "phys_state": phys, "rate_gbs": rate, "link_layer": layer,
               "errors": dict((k, v) for k, v in acc.items()
                              if k not in IB_DATA and k != "port_xmit_wait")}
        for name, key in (("port_rcv_data", "rx_bytes_s"), ("port_xmit_data", "tx_bytes_s"),
                          ("port_xmit_wait", "xmit_wait_s")):
            if name in counts and name not in unknown and dt > 0:
                scale = 4 if name in IB_DATA else 1
                out[key] = round(acc.get(name, 0) * scale / dt, 1)
        if unknown:
            out["unknown"] = unknown
        return out


def nvlink_text(smi):
    """``nvidia-smi nvlink -s`` and ``-e`` as printed (the console parses them as ``explain``
    does); None when nvidia-smi is not there or fails."""
    parts = []
    for flag in ("-s", "-e"):
        rc, out, _ = run_command([smi, "nvlink", flag], 5.0)
        if rc != 0:
            return None
        parts.append(out)
    return "\n".join(parts)[:65536]
