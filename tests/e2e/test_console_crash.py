"""``kill -9`` of the console in a real terminal loses at most the last flush interval, and a
restart on the same inventory resumes the same recording."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from probes.store.recording import RecordingReader
from tests.conftest import REPO
from tests.support.tmux import RIGWATCH, Tmux

pytestmark = pytest.mark.tmux

INVENTORY = """\
hosts:
  - name: soak-01
    transport: local
    interval: 0.5
    simulate: [healthy]
"""


def _recordings(data: Path) -> list[Path]:
    return sorted((data / "rigwatch" / "recordings").glob("*.sqlite3"))


def _last_ts(path: Path) -> float:
    with RecordingReader(path) as r:
        span = r.span()
    return span[1] if span else 0.0


def test_kill_9_loses_at_most_a_second_and_the_restart_resumes(tmp_path: Path) -> None:
    if shutil.which("tmux") is None or not RIGWATCH.exists():
        pytest.skip("tmux or the installed rigwatch is missing")
    data = Path(os.environ["XDG_DATA_HOME"])
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    env = f"cd {REPO} && TERM=xterm-256color TEXTUAL_ANIMATIONS=none XDG_DATA_HOME={data}"
    term = Tmux(100, 30)
    try:
        term.start(f"{env} exec {RIGWATCH} --inventory {inv}")
        term.wait_for(lambda s: "soak-01" in s and "● rec" in s, timeout=15.0)
        time.sleep(4.0)
        pid = int(term.cmd("list-panes", "-t", "t", "-F", "#{pane_pid}").split()[0])
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        (path,) = _recordings(data)
        lost = killed_at - _last_ts(path)
        print(f"\nkill -9: the recording ends {lost:.2f} s before the kill")
        # one flush interval (1 s) plus one sample interval (0.5 s) of slack
        assert lost <= 1.5
        with RecordingReader(path) as r:
            before = r.count()
        assert before >= 8
    finally:
        term.kill()
    term = Tmux(100, 30)
    try:
        term.start(f"{env} exec {RIGWATCH} --inventory {inv}")
        term.wait_for(lambda s: "soak-01" in s and "● rec" in s, timeout=15.0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _last_ts(path) < killed_at + 1:
            time.sleep(0.2)
        assert _recordings(data) == [path], "the restart appends to the same recording"
        with RecordingReader(path) as r:
            assert r.count() > before
    finally:
        term.kill()
