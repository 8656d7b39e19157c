"""Variants for ``bench_collector_ab.py`` and ``bench_client_pair.py`` (``collector:SET@
tests/bench/ab_coll14.py``), measurement only: a collector's per-chunk steps before
session 14 (``tests/transport/coll_before_s14.py``) against the product.  ``RW_PAIR_SET``
picks one for a whole run (``before``, ``after``); without it both alternate (the
session's ``feed`` is made at a connection's start: in one collector only the quick check,
the push and the keepalive swap, so ``bench_client_pair`` is the one for all of it).

    python tests/bench/bench_client_pair.py --hosts 128 \\
        --a collector:before@tests/bench/ab_coll14.py --b collector:after@tests/bench/ab_coll14.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.transport.coll_before_s14 import install


def _after() -> Callable[[], None]:
    return lambda: None


_SETS = {"before": [("before", install)], "after": [("after", _after)],
         "both": [("before", install), ("after", _after)]}
VARIANTS = _SETS[os.environ.get("RW_PAIR_SET", "both")]
