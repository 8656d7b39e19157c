"""Values as nvidia-smi and sysfs print them, turned into numbers, booleans and bus ids."""

from __future__ import annotations

import math
import re

# Bit values of nvmlClocksEventReason* (same bits as the older ThrottleReason names).
CLOCK_REASON_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
NA_MARKERS = ("n/a", "[n/a]", "[not supported]", "not supported", "", "[unknown error]",
              "[requested functionality has been deprecated]", "unknown error")


def parse_number(text):
    """A measured value from nvidia-smi CSV: strip units, None for N/A markers."""
    if text is None:
        return None
    s = text.strip()
    if s.lower() in NA_MARKERS:
        return None
    m = re.match(r"^[-+]?\d+(?:\.\d+)?", s)
    if not m:
        return None
    value = float(m.group(0))
    return value if math.isfinite(value) else None


def parse_int(text):
    v = parse_number(text)
    return int(v) if v is not None else None


def parse_str(text):
    if text is None:
        return None
    s = text.strip()
    return None if s.lower() in NA_MARKERS else s


def parse_yes(text):
    """'Yes'/'Enabled'/'1' -> True, 'No'/'Disabled'/'0' -> False, markers -> None."""
    value = parse_str(text)
    if value is None:
        return None
    low = value.lower()
    if low in ("yes", "enabled", "1", "true", "active"):
        return True
    if low in ("no", "disabled", "0", "false", "not active"):
        return False
    return None


def decode_reasons(mask):
    if mask is None:
        return []
    return [name for bit, name in CLOCK_REASON_BITS if mask & bit]


def normalise_bus_id(bus_id):
    """'00000000:3B:00.0' -> '0000:3b:00.0', '00008ED0:00:00.0' -> '8ed0:00:00.0'.

    The domain is printed as Linux prints it (``%04x``, as lspci and sysfs name the
    device), so a GPU joins its PCI link on hosts with a non-zero domain too.
    """
    if not bus_id:
        return bus_id
    b = bus_id.strip().lower()
    parts = b.split(":")
    if len(parts) == 2:
        parts.insert(0, "0000")
    elif len(parts) == 3:
        try:
            parts[0] = "%04x" % int(parts[0], 16)
        except ValueError:
            pass
    return ":".join(parts)
