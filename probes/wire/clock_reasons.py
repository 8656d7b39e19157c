"""NVML's clock-event reasons: the names the agent sends, their bits, and their display names.

The console's one definition.  The agent keeps its own copy (``CLOCK_REASON_BITS``: it ships
alone to hosts); ``tests/history/test_history_keys.py`` ties the two together.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple


class ClockReason(NamedTuple):
    """One ``nvmlClocksEventReason*`` (the same bits as the older ``ThrottleReason`` names)."""

    name: str
    """As the agent sends it in ``GpuSample.clock_reasons``."""
    bit: int
    label: str
    """As ``nvidia-smi -q`` prints it."""
    slows_under_any_load: bool = False
    """A hardware or thermal slowdown: clocks are held down whatever the GPU is doing.  The
    power cap is not one: idle at the cap costs nothing (``judge.slowing_reasons`` weighs it)."""


CLOCK_REASONS: tuple[ClockReason, ...] = (
    ClockReason("gpu_idle", 0x1, "GPU idle"),
    ClockReason("applications_clocks_setting", 0x2, "Applications clocks setting"),
    ClockReason("sw_power_cap", 0x4, "SW power cap"),
    ClockReason("hw_slowdown", 0x8, "HW slowdown", True),
    ClockReason("sync_boost", 0x10, "Sync boost"),
    ClockReason("sw_thermal_slowdown", 0x20, "SW thermal slowdown", True),
    ClockReason("hw_thermal_slowdown", 0x40, "HW thermal slowdown", True),
    ClockReason("hw_power_brake_slowdown", 0x80, "HW power brake", True),
    ClockReason("display_clock_setting", 0x100, "Display clock setting"),
)
SLOWDOWN_REASONS = frozenset(r.name for r in CLOCK_REASONS if r.slows_under_any_load)
"""Reasons that slow a GPU whatever its load: the live rules' and ``explain``'s one set."""
POWER_CAP = "sw_power_cap"
"""Slows a GPU only while it is busy; idle at the cap is fine."""
REASON_BITS: Mapping[str, int] = {r.name: r.bit for r in CLOCK_REASONS}
"""Bit of each reason, by the name the agent sends."""
REASON_NAMES: Mapping[str, str] = {r.name: r.label for r in CLOCK_REASONS}
"""Display name of each reason, by the name the agent sends."""


@functools.lru_cache(maxsize=1024)
def reasons_of(mask: int) -> tuple[str, ...]:
    """The reason names set in an NVML clock-event bitmask (dcgm-exporter's
    ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``); kept by mask, as 80,000 GPUs share a few."""
    return tuple(r.name for r in CLOCK_REASONS if mask & r.bit)


def mask_of(names: tuple[str, ...]) -> int:
    """The NVML bitmask of reason names: what rigwatch exports for ``reasons_of`` to read."""
    mask = 0
    for name in names:
        mask |= REASON_BITS.get(name, 0)
    return mask
