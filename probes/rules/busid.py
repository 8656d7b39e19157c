"""PCI addresses in the contract's one form, whatever the tool printed."""

from __future__ import annotations

import re

_BDF = re.compile(r"^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])$")
BDF_IN_TEXT = re.compile(
    r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7](?![0-9A-Za-z])")
"""A bus id inside a longer line (``PCI:0000:3b:00``, ``GPU 00000000:3B:00.0:``)."""


def normalize_bus_id(text: str | None) -> str | None:
    """``00000000:3B:00.0`` → ``0000:3b:00.0``; ``4e:00.0`` → ``0000:4e:00.0``; else None.

    An all-zero domain is cut to four digits; any other domain wider than four
    (``00008ED0``) is kept whole, lowercased, as the contract's example shows.
    """
    if text is None:
        return None
    m = _BDF.match(text.strip())
    if m is None:
        return None
    domain, bus, dev, fn = m.groups()
    domain = (domain or "0").lower()
    if len(domain) > 4 and set(domain) <= {"0"}:
        domain = "0000"
    domain = domain.rjust(4, "0")
    return f"{domain}:{bus.lower().rjust(2, '0')}:{dev.lower().rjust(2, '0')}.{fn}"
