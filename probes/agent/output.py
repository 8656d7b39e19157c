"""The agent's output: one JSON object per line on stdout, and probe errors rate-limited."""

from __future__ import annotations

import json
import os
import threading
import time

from .commands import exit_now

AGENT_VERSION = "0.1.0"
PROTOCOL_VERSION = 1


class Writer(object):
    """Writes one JSON object per line; exits the process when stdout is gone."""

    def __init__(self, stream):
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, obj):
        line = json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n"
        with self._lock:
            try:
                self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                exit_now(0)


def watch_stdin_eof():
    """Exit when the console closes our stdin, so no orphan stays on the host."""

    def run():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        exit_now(0)

    t = threading.Thread(target=run, name="stdin-eof", daemon=True)
    t.start()


class ProbeErrors(object):
    """Sends ``error`` messages; the same message repeats at most once a minute."""

    def __init__(self, writer):
        self.w = writer
        self._seen = {}

    def report(self, probe, message):
        key = (probe, message)
        now = time.monotonic()
        if now - self._seen.get(key, -1e9) < 60.0:
            return
        self._seen[key] = now
        self.w.send({"type": "error", "v": PROTOCOL_VERSION, "ts": time.time(), "probe": probe,
                     "message": message[:2000]})
