"""#19's "done" in a real terminal: what the operator sees is what the core knows.

tmux runs the installed ``rigwatch`` as a person would.  With ``NO_COLOR=1`` every host
panel opens without a crash; with an inventory holding one unreachable host (a closed
port on 127.0.0.1) next to a simulated one, triage's first failure names that host and the
alert hook runs once for it, however many retries fail.
"""

from __future__ import annotations

import re
import shutil
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.tmux import RIGWATCH, Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None or not RIGWATCH.exists(),
                                reason="tmux or the installed rigwatch is missing")


def _closed_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_color_opens_every_host_panel(tmp_path: Path) -> None:
    term = Tmux(100, 30)
    try:
        term.start(f"cd {REPO} && HOME={tmp_path} NO_COLOR=1 TEXTUAL_ANIMATIONS=none "
                   f"{RIGWATCH} --demo --no-record; echo EXITED $?; sleep 30")
        term.wait_for(lambda s: "gpu-b04" in s, timeout=10.0)
        term.keys(":")
        term.wait_for(lambda s: "host NAME" in s, timeout=5.0)
        term.keys("host gpu-b02", "Enter")
        screen, _ = term.wait_for(lambda s: "LOST" in s and "GPUs 7/8" in s, timeout=15.0)
        assert "GPU6" in screen
        term.keys("Escape", ":")  # the leaking host: its memory panel draws the chart
        term.wait_for(lambda s: "host NAME" in s, timeout=5.0)
        term.keys("host gpu-a02", "Enter")
        term.wait_for(lambda s: "gpu-a02" in s and "LEAK" in s, timeout=40.0)
        term.keys("1", "2")  # the two default panels off: each panel below is drawn alone
        for key in "123456":
            term.keys(key)
            time.sleep(0.7)  # drawn: a crash (the memory chart's, once) ends the app
            term.keys("Home")
            time.sleep(0.3)
            assert "EXITED" not in term.screen(), term.screen()
            term.keys(key)
        term.keys("q")
        screen, _ = term.wait_for(lambda s: "EXITED" in s, timeout=8.0)
        assert "EXITED 0" in screen and "Traceback" not in screen, screen
    finally:
        term.kill()


def test_an_unreachable_host_is_the_first_failure_and_pages_once(tmp_path: Path) -> None:
    port = _closed_port()
    pages = tmp_path / "pages.log"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$RIGWATCH_HOST $RIGWATCH_CODE" >> {pages}\n')
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "settings.yaml").write_text(
        f"alerts:\n  min_severity: warning\n  hook: [{hook}]\n")
    (tmp_path / "inventory.yaml").write_text(
        "defaults:\n  interval: 1\n  expect_gpus: 8\nhosts:\n"
        "  - name: gpu-ok\n    transport: local\n    simulate: [healthy]\n"
        f"  - name: x-down\n    address: 127.0.0.1\n    port: {port}\n    user: root\n")
    term = Tmux(100, 30)
    try:
        term.start(f"cd {tmp_path} && HOME={tmp_path} TEXTUAL_ANIMATIONS=none {RIGWATCH} "
                   f"--inventory inventory.yaml --settings settings.yaml --no-record")
        term.wait_for(lambda s: "x-down" in s and "unreachable" in s, timeout=15.0)
        term.keys("t")
        screen, _ = term.wait_for(lambda s: "First failure:" in s and "x-down" in s,
                                  timeout=10.0)
        first = next(line for line in screen.splitlines() if "First failure:" in line)
        assert "x-down" in first and "unreachable" in first, screen
        assert "Do now:" in screen
        # the page, however long a loaded machine takes to run the hook (a fixed 8 s was
        # not always enough), then two retries after it (a host never seen backs off 1,
        # 2, 4, 8 s), each followed by two ticks of the alert check: none may page again
        _wait(lambda: "x-down host-unreachable" in _read(pages), 30.0, "the page")
        term.keys("Escape", "Down")  # the fleet, cursor on x-down: its retry countdown
        last = _retries(term, 2, timeout=60.0)
        term.wait_for(lambda s: (_retry_in(s) or 99) <= last - 2, timeout=30.0)
        term.keys("q")
        term.wait_for(lambda s: "x-down" not in s, timeout=10.0)
    finally:
        term.kill()
    lines = _read(pages).splitlines()
    assert [line for line in lines if line.startswith("x-down")] == [
        "x-down host-unreachable"], lines


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _wait(ok: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.1)


def _retries(term: Tmux, count: int, timeout: float) -> int:
    """Wait until the selected host's retry countdown has started over ``count`` times (a
    retry failed and a new, longer wait began); the countdown it started at last."""
    deadline = time.monotonic() + timeout
    seen, shown = 0, _retry_in(term.screen())
    while seen < count:
        if time.monotonic() > deadline:
            pytest.fail(f"{seen} of {count} retries within {timeout:.0f} s")
        time.sleep(0.05)
        now = _retry_in(term.screen())
        if now is not None and shown is not None and now > shown:
            seen += 1
        shown = now if now is not None else shown
    assert shown is not None
    return shown


def _retry_in(screen: str) -> int | None:
    """The selected host's ``next retry in N s``, if the detail line shows one."""
    m = re.search(r"next retry in (\d+) s", screen)
    return int(m.group(1)) if m else None
