"""GPU calls on worker threads with a deadline: a hung driver never stops the stream."""

from __future__ import annotations

import threading
import time

GPU_DEADLINE_S = 4.0


class GpuWatchdog(object):
    """Runs GPU collection on worker threads with a deadline, one thread per key (GPU).

    A call that does not return in time is abandoned (a hung driver cannot be
    interrupted); until it returns, no new call is started for that key and that GPU is
    reported ``unresponsive``, while the other GPUs and the rest of the sample go on.
    """

    def __init__(self, deadline):
        self.deadline = deadline
        self._busy = {}

    def call_many(self, calls):
        """[(key, fn)] -> {key: (ok, value_or_message)}; calls run in parallel."""
        results = {}
        started = []
        for key, fn in calls:
            busy = self._busy.get(key)
            if busy is not None and busy.is_alive():
                results[key] = (False, "previous GPU probe call still hung")
                continue
            box = {}
            t = threading.Thread(target=_run_into, args=(fn, box), name="gpu-probe-%s" % key)
            t.daemon = True
            t.start()
            started.append((key, t, box))
        end = time.monotonic() + self.deadline
        for key, t, box in started:
            t.join(max(0.0, end - time.monotonic()))
            if t.is_alive():
                self._busy[key] = t
                results[key] = (False, "GPU probe timed out after %gs" % self.deadline)
                continue
            self._busy.pop(key, None)
            if "error" in box:
                results[key] = (False, box["error"])
            else:
                results[key] = (True, box.get("value"))
        return results

    def call(self, fn, key="all"):
        """Returns (ok, value_or_message)."""
        return self.call_many([(key, fn)])[key]


def _run_into(fn, box):
    try:
        box["value"] = fn()
    except Exception as exc:  # reported as an error line, never fatal
        box["error"] = "%s: %s" % (type(exc).__name__, exc)
