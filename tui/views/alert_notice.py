"""The status line's words for a tick's new alerts, in one line of the terminal's width.

At 80 columns "6 hosts with new findings: gpu-b02 GPU6 LOST, gpu-b03 NCCL TIMEOUT and 4
more — t for triage" took two lines (three with a long headline) over the table it
announces.  The longest form that fits is chosen: two hosts named, then one, then the
count alone; a single host's headline is cut with "…" last.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from probes.analysis.findings import Finding
from probes.analysis.headline import SEP, headline

HINT = " — t for triage"
NAMED = 2
"""More hosts than this in one tick are named as "and N more"."""


def alert_text(tops: Sequence[tuple[str, Finding, int]], width: int) -> str:
    """``tops``: (host, its worst new finding, how many it raised), worst first; the text
    fits ``width`` cells when any form of it does."""
    if len(tops) > NAMED:
        def many(named: int) -> str:
            names = ", ".join(f"{host} {headline(top).split(SEP)[0].split(', ')[0]}"
                              for host, top, _ in tops[:named])
            rest = len(tops) - named
            listed = f": {names} and {rest} more" if named else ""
            return f"{len(tops)} hosts with new findings{listed}{HINT}"
        forms = [many(n) for n in range(NAMED, -1, -1)]
    else:
        full = " · ".join(f"{host}: {headline(top)}" + (f" (+{count - 1} more)" if count > 1
                                                        else "")
                          for host, top, count in tops)
        short = " · ".join(f"{host}: {headline(top).split(SEP)[0]}" for host, top, _ in tops)
        forms = [full + HINT, short + HINT, short]
    for text in forms:
        if len(text) <= width:
            return text
    last = forms[-1]
    return last if width < 2 else last[:width - 1] + "…"


def landed_text(direction: int, t: float, found: Sequence[tuple[str, Finding]],
                width: int = 1000) -> str:
    """What ``>``/``<`` say after a jump: where the replay is now and what was recorded
    there (worst first), e.g. ``next finding, 05:00:17Z: gpu-b02 GPU6 LOST · Xid 79``, in
    ``width`` cells (the headline's detail goes first, then it is cut)."""
    where = f"{'next' if direction > 0 else 'previous'} finding, " \
        f"{time.strftime('%H:%M:%SZ', time.gmtime(t))}"
    if not found:
        return where
    host, worst = found[0]
    more = f" (+{len(found) - 1} more then)" if len(found) > 1 else ""
    full = headline(worst)
    for text in (f"{where}: {host} {full}{more}", f"{where}: {host} {full.split(SEP)[0]}{more}"):
        if len(text) <= width:
            return text
    return text[:max(1, width - 1)] + "…"
