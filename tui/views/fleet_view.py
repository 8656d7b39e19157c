"""How the fleet screen orders and filters its hosts: pure functions over ``FleetRow``s.

Kept out of the widgets (which only render) and out of ``probes`` (which knows nothing of
what an operator chose to look at).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from probes.analysis.judge import GpuVerdict
from probes.fleet_state import FleetRow

SORT_KEYS = ("inventory", "worst", "temp", "mem", "util", "power", "name", "job")
"""What ``s`` steps through; ``inventory`` keeps the file's order."""


def _worst_rank(row: FleetRow) -> tuple[int, int, str]:
    down = 1 if row.status.is_down else 0
    sev = row.worst.rank if row.worst is not None else -1
    return (-down, -sev, row.name)


def sort_rows(rows: Sequence[FleetRow], key: str) -> list[FleetRow]:
    """``rows`` in the chosen order: worst first for the health keys, unknowns last."""
    if key == "inventory":
        return list(rows)
    if key == "name":
        return sorted(rows, key=lambda r: r.name)
    if key == "worst":
        return sorted(rows, key=_worst_rank)
    if key == "job":
        # a job's hosts together (by job id, as numbers), hosts without a job last
        return sorted(rows, key=lambda r: (not r.jobs, [int(j) if j.isdigit() else -1
                                                         for j in r.jobs], r.name))
    attr = {"temp": "max_temp_c", "mem": "mem_used_pct", "util": "mean_util_pct",
            "power": "power_w"}[key]

    def by(row: FleetRow) -> tuple[int, float, str]:
        v = getattr(row, attr)
        return (1, 0.0, row.name) if v is None else (0, -float(v), row.name)

    return sorted(rows, key=by)


def words(row: FleetRow) -> str:
    """What the filter searches: the name, tags, jobs (``job:48211``), status, why it is
    down, its worst finding, and the core's verdict words: ``healthy``, the worst severity,
    each troubled GPU's verdict (``lost``, ``leaking``, ``throttled`` …)."""
    verdicts = {g.verdict.value for g in row.gpus if g.verdict is not GpuVerdict.OK}
    return " ".join([row.name, *row.tags, *(f"job:{j}" for j in row.jobs),
                     row.status.value, row.worst_summary or "",
                     row.headline or "", row.reason or "",
                     row.worst.value if row.worst else "",
                     "down" if row.status.is_down else "",
                     "healthy" if row.healthy else "", *sorted(verdicts)]).lower()


class RowWords:
    """Each row's ``words``, kept while the row is the same object: the console keeps a
    host's row until the host changes (``tui.views.fleet_rows``), and at a thousand hosts
    the words of every row, again for each filter key typed and each 1 Hz redraw while a
    filter is set, were ~6 ms (issue 38, keys)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[FleetRow, str]] = {}

    def __call__(self, row: FleetRow) -> str:
        kept = self._kept.get(row.name)
        if kept is not None and kept[0] is row:
            return kept[1]
        hay = words(row)
        self._kept[row.name] = (row, hay)
        return hay


def matches(row: FleetRow, query: str, words_of: Callable[[FleetRow], str] = words) -> bool:
    """Whether a host passes the filter: every word must appear in its ``words``
    (case-insensitive); ``!word`` excludes.  ``words_of``: ``words`` or a ``RowWords``."""
    hay = words_of(row)
    for word in query.lower().split():
        if word.startswith("!") and len(word) > 1:
            if word[1:] in hay:
                return False
        elif word not in hay:
            return False
    return True


def filter_rows(rows: Sequence[FleetRow], query: str,
                words_of: Callable[[FleetRow], str] = words) -> list[FleetRow]:
    """The rows that match ``query`` (all of them for an empty query)."""
    return [r for r in rows if matches(r, query, words_of)] if query.strip() else list(rows)


def crumb(query: str, sort_key: str, shown: int, total: int) -> str | None:
    """The line that says how the fleet's rows are chosen (as k9s shows its filter), or
    None when they are all there in inventory order."""
    parts = []
    if query:
        parts.append(f'no hosts match "{query}" (of {total})' if not shown
                     else f'filter "{query}": {shown} of {total} hosts')
    if sort_key != "inventory":
        parts.append(f"sorted by {sort_key}")
    if not parts:
        return None
    return " · ".join(parts) + (" · / edits, Esc clears" if query else " · s sorts")
