"""``bench_ingest.template`` built once a process: the simulator's wire bytes for host ``k``.

The equivalence tests (history, judges, the console's fold) replay the same simulated hosts
over and over, 300 to 1500 s each; building a template runs the agent's simulator and
compact encoder a tick at a time, and was a tenth of ``test_history_s12``'s template test
(CI time, issue 38 s14).  A template of ``seconds`` ticks is the first ``seconds`` ticks of
a longer one (the simulator and the encoder go tick by tick and never look ahead:
``tests/house/test_templates_cached.py`` holds every cached answer to a fresh build), so the
longest built is kept per host and sliced.  The bytes are immutable; each call gets its own
lists, so a test that edits its ticks edits no other test's.
"""

from __future__ import annotations

from tests.bench import bench_ingest
from tests.bench.bench_ingest import TEMPLATES, Template

__all__ = ["TEMPLATES", "template"]

_HELD: dict[int, tuple[Template, Template]] = {}
"""The longest template built so far, per host ``k``."""


def template(k: int, seconds: int) -> tuple[Template, Template]:
    """``bench_ingest.template(k, seconds)``, from the longest one built for ``k``."""
    held = _HELD.get(k)
    if held is None or len(held[0][1]) < seconds:
        held = _HELD[k] = bench_ingest.template(k, seconds)
    (hello, lines), (hello2, lines2) = held
    return (hello, lines[:seconds]), (hello2, lines2[:seconds])
