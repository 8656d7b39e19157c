"""Variants for ``bench_collector_ab.py`` (measurement only): the coalescing loop's gap
(``coalesce.GAP_S``, 40 ms, the product) against longer ones, swapped in one collector.

    RW_AB_GAPS=40,80 python tests/bench/bench_collector_ab.py --variants tests/bench/ab_gap_s14.py
        [--spread]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab_coalesce_s12 import _gap, _product

_MS = [int(ms) for ms in os.environ.get("RW_AB_GAPS", "40,60,80,120").split(",")]
VARIANTS = [(f"g{ms}", _product if k == 0 else _gap(ms / 1000)) for k, ms in enumerate(_MS)]
"""The first is the product's loop as it is; ``RW_AB_GAPS`` (ms, comma-separated) picks them."""
