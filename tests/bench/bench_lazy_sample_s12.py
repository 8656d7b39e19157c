"""A row sample's ``host`` and ``disks`` built when read (session 12, ``lazy12``), before
and after in one process: **before** is ``CompactStream._sample`` as it was
(tests/wire/compact_sample_before_s12.py, ``HostStats`` and ``DiskStats`` made each tick),
**after** today's.  Two forms, each reusing an earlier bench's machinery:

* ``--objects``: ``bench_sample_objects_s12`` (each relayed tick's row decoded and its
  sample built, freed a round of hosts later), its "now" side set to the old ``_sample`` and
  its "rows only" side to today's: printed as before/after.
* otherwise ``bench_apply_s12``'s two consoles fed the same collector frames, frame by frame,
  which goes first alternating, both today's modules, each side's streams building with its
  own ``_sample``; ``--outside`` as there (the history and detectors stubbed); ``--row-
  history``: the history's ``stage_row`` reading the row's host and disks instead of the
  sample's (what ``probes/history/staged.py`` would need for the saving with the history
  on; the same values: the row's Structs are what the sample's objects are filled from).

    python tests/bench/bench_lazy_sample_s12.py --objects [--hosts 256] [--passes 10]
    python tests/bench/bench_lazy_sample_s12.py [--row-history] [bench_apply_s12's options]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.history import host as history_host
from probes.history import staged
from probes.wire import compact
from tests.bench import bench_apply_s12, bench_sample_objects_s12
from tests.wire.compact_sample_before_s12 import sample_before

BUILD = {"before": sample_before, "after": compact.CompactStream._sample}


def stage_row_from_the_row(s: Any, row: Any, pids: Any, layout: Any, ok_count: float,
                           lens: Any = None) -> Any:
    """``staged.stage_row`` reading ``row.host``/``row.disks`` (the sample's own are built
    from them, value for value)."""
    proxy = _RowView(s, row)
    return real_stage_row(proxy, row, pids, layout, ok_count, lens)  # type: ignore[arg-type]


class _RowView:
    __slots__ = ("disks", "host", "ts")

    def __init__(self, s: Any, row: Any) -> None:
        self.ts, self.host, self.disks = s.ts, row.host, row.disks


real_stage_row = staged.stage_row


def main() -> None:
    argv = sys.argv[1:]
    if "--objects" in argv:
        argv.remove("--objects")
        sys.argv[1:] = argv
        compact.CompactStream._sample = sample_before  # type: ignore[method-assign]
        bench_sample_objects_s12.rows_only = BUILD["after"]  # type: ignore[assignment]
        print("(objects: 'now' is before, 'rows_only' is after)", flush=True)
        bench_sample_objects_s12.main()
        return
    if "--row-history" in argv:
        argv.remove("--row-history")
        history_host.stage_row = stage_row_from_the_row
    sys.argv[1:] = argv
    sides = bench_apply_s12.SIDES
    sides["before"] = sides["after"]  # today's console on both sides
    real_init, real_second = bench_apply_s12.Side.__init__, bench_apply_s12.Side.second

    def init(self: Any, side: str, *a: Any) -> None:
        real_init(self, side, *a)
        self.build = BUILD[side]

    async def second(self: Any, k: int, data: bytes) -> float:
        compact.CompactStream._sample = self.build  # type: ignore[method-assign]
        took: float = await real_second(self, k, data)
        return took

    bench_apply_s12.Side.__init__ = init  # type: ignore[method-assign, assignment]
    bench_apply_s12.Side.second = second  # type: ignore[method-assign]
    bench_apply_s12.main()


if __name__ == "__main__":
    main()
