"""One incident told again by a later scan: counted, and the ranks it names gathered.

A log scan folds the lines it sees into one finding per kind; a job whose ranks time out
over a minute is seen by several scans, each naming the ranks of its own lines.  The
collective's waiting set is the union of all of them: the rank missing from it is the one
that never joined, so it must not depend on how the lines were batched.
"""

from __future__ import annotations

from dataclasses import replace

from probes.analysis.findings import Finding

MAX_TIMEOUTS_KEPT = 4096
"""Per-rank timeout records kept on one finding (a 4,096-rank job's, one each)."""


def merged_repeat(kept: Finding, again: Finding) -> Finding:
    """``kept`` (the first report) told again by ``again``: its count summed and, where
    both name ranks, their union; the first report's time, evidence and summary stay."""
    extra = dict(kept.extra)
    ranks = _ints(kept.extra.get("ranks")) | _ints(again.extra.get("ranks"))
    for f in (kept, again):
        rank = f.extra.get("rank")
        if isinstance(rank, int) and not isinstance(rank, bool):
            ranks.add(rank)
    if ranks and (ranks != _ints(kept.extra.get("ranks")) or "ranks" in kept.extra):
        extra["ranks"] = sorted(ranks)
    told = again.extra.get("timeouts")
    if isinstance(told, list) and told:
        mine = kept.extra.get("timeouts")
        both = (list(mine) if isinstance(mine, list) else []) + told
        extra["timeouts"] = both[:MAX_TIMEOUTS_KEPT]
    done = again.extra.get("last_completed")
    if isinstance(done, dict) and done:
        mine_done = kept.extra.get("last_completed")
        extra["last_completed"] = {**(mine_done if isinstance(mine_done, dict) else {}),
                                   **done}
    return replace(kept, count=kept.count + again.count, extra=extra)


def _ints(value: object) -> set[int]:
    if isinstance(value, list | tuple):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()
