"""PCIe link judgement shared by every source that reports a link (lspci, ``nvidia-smi -q``,
NVML samples, kernel "limited by … capable of …" lines).

One function decides whether a link is short of its capability and how much that matters,
so the live console and ``rigwatch explain`` can never disagree about the same link.
"""

from __future__ import annotations

import re

from probes.triage import Severity

GEN_GTS: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}
"""Per-lane transfer rate of each PCIe generation (GT/s)."""

_SPEED = re.compile(r"(?<!\d)(\d+(?:[.,]\d+)?)\s*(?:GT/s|GT|Gb/s)", re.IGNORECASE)
"""A rate, read only where a number starts: from every digit of a long run it cost the square
of the run (review E2)."""
_WIDTH = re.compile(r"(?<![\w])x\s?(\d{1,2})(?!\d)", re.IGNORECASE)


def gen_to_gts(gen: int | None) -> float | None:
    """GT/s of a PCIe generation (``4`` → ``16.0``); None when unknown."""
    if gen is None:
        return None
    return GEN_GTS.get(gen)


def parse_speed_gts(text: str) -> float | None:
    """The first ``16GT/s`` / ``16.0 GT/s`` / ``2,5GT/s`` in ``text`` as a float, else None."""
    m = _SPEED.search(text)
    if m is None:
        return None
    try:
        return float(m.group(1).replace(",", "."))
    except ValueError:
        return None


def parse_width(text: str) -> int | None:
    """The first ``x16`` / ``x 8`` lane count in ``text``, else None."""
    m = _WIDTH.search(text)
    return int(m.group(1)) if m else None


def link_shortfall(cap_gts: float | None, cap_width: int | None,
                   cur_gts: float | None, cur_width: int | None) -> Severity | None:
    """How serious a link running below its capability is; None when it is not (or unknown).

    A width below capability is a ``warning``: lanes are lost whatever the load (a bad seat,
    riser or slot).  A speed below capability alone is ``info``: GPUs train down to Gen1 when
    idle to save power, so it matters only under load.  Unknown values compare as equal.

    Args:
        cap_gts: capable per-lane rate (GT/s), e.g. lspci LnkCap.
        cap_width: capable lane count.
        cur_gts: current per-lane rate (GT/s), e.g. lspci LnkSta.
        cur_width: current lane count.

    Returns:
        ``Severity.WARNING``, ``Severity.INFO`` or None.
    """
    if cap_width is not None and cur_width is not None and 0 < cur_width < cap_width:
        return Severity.WARNING
    if cap_gts is not None and cur_gts is not None and 0 < cur_gts < cap_gts - 0.01:
        return Severity.INFO
    return None


def gen_shortfall(cap_gen: int | None, cap_width: int | None,
                  cur_gen: int | None, cur_width: int | None) -> Severity | None:
    """``link_shortfall`` for sources that report generations (``nvidia-smi -q``, NVML).

    Generations order like their rates, so they compare directly.
    """
    cap = float(cap_gen) if cap_gen is not None else None
    cur = float(cur_gen) if cur_gen is not None else None
    return link_shortfall(cap, cap_width, cur, cur_width)
