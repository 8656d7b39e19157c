"""PCI addresses in the contract's one form, whatever the tool printed."""

from __future__ import annotations

import re

_BDF = re.compile(r"^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])$")
BDF_IN_TEXT = re.compile(
    r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7](?![0-9A-Za-z])")
"""A bus id inside a longer line (``PCI:0000:3b:00``, ``GPU 00000000:3B:00.0:``)."""


def normalize_bus_id(text: str | None) -> str | None:
    """``00000000:3B:00.0`` → ``0000:3b:00.0``; ``4e:00.0`` → ``0000:4e:00.0``; else None.

    The domain is printed as Linux's ``%04x`` prints it (lspci, sysfs): NVIDIA's
    32-bit ``0000000F`` and ``00008ED0`` become ``000f`` and ``8ed0``, so the id joins
    with ``lspci`` and ``/sys/bus/pci``; a domain above 0xffff keeps the digits it needs.
    """
    if text is None:
        return None
    m = _BDF.match(text.strip())
    if m is None:
        return None
    domain, bus, dev, fn = m.groups()
    domain = f"{int(domain or '0', 16):04x}"
    return f"{domain}:{bus.lower().rjust(2, '0')}:{dev.lower().rjust(2, '0')}.{fn}"
