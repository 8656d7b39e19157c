"""A host whose clock is off the console's: its times are corrected, and it is said.

The session takes the skew off every time the host reports (``probes.transport.host_clock``)
so triage and replays order events as they happened; but a clock that far off breaks
things rigwatch does not see (TLS certificates, Kerberos and munge credentials, log
correlation by hand, a scheduler's time limits), so past the operator's limit it is a
finding of its own.
"""

from __future__ import annotations

from probes.analysis.findings import Finding
from probes.analysis.limits import DetectorLimits
from probes.triage import Code, OnsetClock, Severity, Step
from probes.wire.events import ClockOffset

ACTION_CLOCK = ("Fix time sync on the host (chronyc tracking / timedatectl status; restart "
                "chronyd or ntpd); munge, Kerberos and TLS fail on skewed clocks. rigwatch "
                "orders this host's events on corrected time meanwhile")


def skew_words(offset_s: float) -> str:
    """``10 min 2 s behind`` / ``45 s ahead``: an offset as the operator says it."""
    way = "ahead" if offset_s > 0 else "behind"
    s = abs(offset_s)
    if s >= 3600:
        return f"{s / 3600:.1f} h {way}"
    if s >= 60:
        return f"{int(s // 60)} min {int(s % 60)} s {way}"
    return f"{s:.1f} s {way}"


def clock_skewed(clock: ClockOffset | None, limits: DetectorLimits) -> bool:
    """Whether the host's clock is further off than ``limits.clock_skew_s``."""
    return clock is not None and abs(clock.offset_s) > limits.clock_skew_s


def clock_findings(host: str, clock: ClockOffset | None,
                   limits: DetectorLimits) -> list[Finding]:
    """``clock-skew`` when the host's clock is further off than ``limits.clock_skew_s``."""
    if clock is None or not clock_skewed(clock, limits):
        return []
    return [Finding(Step.GPU, Code.CLOCK_SKEW, Severity.WARNING,
                    f"clock {skew_words(clock.offset_s)} the console's "
                    f"({clock.offset_s:+.0f} s; its times are corrected)", host,
                    ts=clock.ts, action=ACTION_CLOCK, clock=OnsetClock.CONSOLE,
                    extra={"offset_s": clock.offset_s})]
