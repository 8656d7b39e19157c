"""Waiting for processes to go: the checks that a killed console leaves no collector, relay
or agent behind."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable


def survivors(pids: list[int], alive: Callable[[int], bool], within_s: float) -> list[int]:
    """The ``pids`` still ``alive`` once all are gone or ``within_s`` has passed."""
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def kill_each(pids: list[int], kill: Callable[[int], None]) -> None:
    """``kill`` every pid (``os.kill`` or ``os.killpg`` with SIGKILL), gone ones skipped."""
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            kill(p)
