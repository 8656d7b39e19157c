"""Child of ``test_collector_gc.py``: a collector process (``collector_worker.main``) whose
``serve`` reports the garbage collector's state instead of running sessions, and whose
job read reports whether the collector was off meanwhile."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from typing import Any

from probes.transport import collector_worker


def main() -> None:
    events: list[dict[str, Any]] = []
    unframe = collector_worker.unframe

    def unframed(body: bytes) -> object:
        events.append({"at": "job read", "gc_enabled": gc.isenabled()})
        return unframe(body)

    async def serve(*_a: Any, **_kw: Any) -> None:
        events.append({"at": "serve", "gc_enabled": gc.isenabled(),
                       "thresholds": list(gc.get_threshold()),
                       "frozen": gc.get_freeze_count()})
        print(json.dumps(events), flush=True)
        await asyncio.sleep(0)

    collector_worker.unframe = unframed
    if sys.argv[1] == "before":  # negative control: main as it was (no tune_collection)
        collector_worker.tune_collection = lambda: None
        collector_worker.gc = _NoDisable()  # type: ignore[assignment]
    collector_worker.serve = serve
    sys.argv = ["collector_worker"]
    collector_worker.main()


class _NoDisable:
    """``gc`` as ``main`` used it before: nothing turned off."""

    def __getattr__(self, name: str) -> Any:
        return (lambda: None) if name == "disable" else getattr(gc, name)


if __name__ == "__main__":
    main()
