"""End to end, in a real terminal: replaying a hostile recording (security review 2026-12-06,
R1 and R4).

tmux runs ``rigwatch replay`` on a real recording whose host names were given markup, an
OSC 0 title, an OSC 52 clipboard write, a screen clear and a bidi override: with tmux's
``set-clipboard on`` and ``allow-rename on``, the review saw the title set and seven
clipboard writes.  Then on a recording whose blocks are zlib bombs, where the review saw
a replay that never drew and ignored ``q``.  Here the title and paste buffers stay
untouched, the names show as text, and ``q`` ends each replay within seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support import hostile_recording as hostile
from tests.support.tmux import RIGWATCH, Tmux

pytestmark = pytest.mark.tmux


def _quit_within(term: Tmux, seconds: float) -> float:
    started = time.monotonic()
    term.keys("q")
    while term.alive():
        if time.monotonic() - started > seconds:
            raise AssertionError(f"q did not end the replay within {seconds} s:\n"
                                 f"{term.screen()}")
        time.sleep(0.05)
    return time.monotonic() - started


def test_replaying_hostile_recordings_in_a_real_terminal(tmp_path: Path) -> None:
    if shutil.which("tmux") is None or not RIGWATCH.exists():
        pytest.skip("tmux or the installed rigwatch is missing")
    base = hostile.base_recording(tmp_path / "base.sqlite3")
    names = hostile.hostile_names(base, tmp_path / "names.sqlite3")
    bombs = hostile.bomb_blocks(base, tmp_path / "bombs.sqlite3", with_header=True)
    env = f"cd {REPO} && TERM=xterm-256color TEXTUAL_ANIMATIONS=none"

    term = Tmux(140, 40)
    try:
        term.start(f"{env} exec {RIGWATCH} replay {names} --speed 10")
        term.cmd("set-option", "-g", "set-clipboard", "on")
        term.cmd("set-option", "-g", "allow-rename", "on")
        title_before = term.cmd("display", "-p", "-t", "t", "#{pane_title}").strip()
        screen, _ = term.wait_for(lambda s: "gpu-h01" in s and "PWNED-TITLE" in s,
                                  timeout=20.0)
        assert "\\x1b]0;PWNED-TITLE\\x07" in screen and "<U+202E>" in screen
        term.keys("Enter")  # the host's screen draws the name again
        time.sleep(1.5)
        assert term.alive()
        title_after = term.cmd("display", "-p", "-t", "t", "#{pane_title}").strip()
        assert "PWNED" not in title_after and title_after == title_before
        buffers = subprocess.run(["tmux", "-L", term.socket, "list-buffers"],
                                 capture_output=True, text=True, timeout=10).stdout
        assert buffers.strip() == "", f"OSC 52 reached the clipboard: {buffers!r}"
        quit_names = _quit_within(term, 10.0)
    finally:
        term.kill()

    term = Tmux(140, 40)
    try:
        term.start(f"{env} exec {RIGWATCH} replay {bombs} --speed 600")
        screen, _ = term.wait_for(lambda s: "unreadable row" in s, timeout=20.0)
        quit_bombs = _quit_within(term, 10.0)
    finally:
        term.kill()
    print(f"\nhostile replays: title {title_after!r}, no buffers; q quit in "
          f"{quit_names:.1f} s (names) and {quit_bombs:.1f} s (zlib bombs)")
