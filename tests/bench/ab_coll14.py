"""Variants for ``bench_collector_ab.py`` and ``bench_client_pair.py`` (``collector:SET@
tests/bench/ab_coll14.py``), measurement only: a collector's per-chunk steps before
session 14 (``tests/transport/coll_before_s14.py``) against the product.  ``RW_PAIR_SET``
picks one for a whole run (``before``: the old steps and the 40-ms gap; ``before_steps``:
the old steps on the product's gap; ``after``; ``after_steps``: the new steps on the 40-ms
gap, to compare with ``before``); without it the steps alternate (the session's ``feed``
is made at a connection's start: in one collector only the quick check, the push and the
keepalive swap, so ``bench_client_pair`` is the one for all of it).

    python tests/bench/bench_client_pair.py --hosts 128 \\
        --a collector:before@tests/bench/ab_coll14.py --b collector:after@tests/bench/ab_coll14.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.transport.coll_before_s14 import install


def _after() -> Callable[[], None]:
    return lambda: None


def _gap40() -> Callable[[], None]:
    """The collector's loop with session 12's 40-ms gap (whole runs: installed before the
    loop is made)."""
    from probes.transport import coalesce
    saved = coalesce.run

    def run(main: Any, gap_s: float = 0.04) -> Any:
        return saved(main, gap_s)
    coalesce.run = run

    def undo() -> None:
        coalesce.run = saved
    return undo


def _both(*installs: Callable[[], Callable[[], None]]) -> Callable[[], Callable[[], None]]:
    def install_all() -> Callable[[], None]:
        undos = [i() for i in installs]

        def undo() -> None:
            for u in reversed(undos):
                u()
        return undo
    return install_all


_SETS = {"before": [("before", _both(install, _gap40))],
         "before_steps": [("before_steps", install)], "after": [("after", _after)],
         "after_steps": [("after_steps", _gap40)],
         "both": [("before_steps", install), ("after", _after)]}
VARIANTS = _SETS[os.environ.get("RW_PAIR_SET", "both")]
