"""A real terminal for end-to-end tests: one detached tmux session on its own server socket,
read back with ``capture-pane``, and the ``rigwatch`` this environment installed."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

RIGWATCH = Path(sys.executable).with_name("rigwatch")
"""The console as installed beside this interpreter (``pip install -e .``)."""


class Tmux:
    """One detached tmux session on its own server socket."""

    def __init__(self, width: int, height: int) -> None:
        self.socket = f"rw-{uuid.uuid4().hex[:8]}"
        self.width, self.height = width, height

    def cmd(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, check=True, timeout=10).stdout

    def start(self, command: str) -> None:
        # the test runner leaves COLUMNS=80/LINES=24 in the process environment (not in
        # os.environ), and the app would believe them over the pane's real size
        self.cmd("new-session", "-d", "-x", str(self.width), "-y", str(self.height),
                 "-s", "t", f"unset COLUMNS LINES; {command}")

    def screen(self) -> str:
        return self.cmd("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        self.cmd("send-keys", "-t", "t", *keys)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", "t"],
                              capture_output=True, timeout=10).returncode == 0

    def wait_for(self, ok: Callable[[str], bool], timeout: float) -> tuple[str, float]:
        """Poll the screen until ``ok``; returns (screen, seconds waited)."""
        t0 = time.monotonic()
        screen = ""
        while time.monotonic() - t0 < timeout:
            screen = self.screen()
            if ok(screen):
                return screen, time.monotonic() - t0
            time.sleep(0.05)
        raise AssertionError(f"screen never matched within {timeout} s:\n{screen}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=10)
