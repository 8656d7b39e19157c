"""End to end in a real terminal: tmux runs ``rigwatch --demo``, keys go in, the screen is read."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest

from probes.config.fleet import demo_fleet
from tests.conftest import REPO
from tests.support.tmux import RIGWATCH, Tmux

pytestmark = pytest.mark.tmux

HOSTS = [s.name for s in demo_fleet()]


@pytest.fixture(params=[(80, 24), (200, 50)], ids=["80x24", "200x50"])
def term(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it)")
    if not RIGWATCH.exists():
        pytest.skip(f"{RIGWATCH} missing: install the package first")
    t = Tmux(*request.param)
    yield t
    t.kill()


def test_demo_fleet_in_a_real_terminal(term: Tmux) -> None:
    env = f"cd {REPO} && TERM=xterm-256color COLORTERM=truecolor TEXTUAL_ANIMATIONS=none"
    t0 = time.monotonic()
    term.start(f"{env} {RIGWATCH} --demo")
    screen, _ = term.wait_for(lambda s: all(h in s for h in HOSTS), timeout=10.0)
    first_paint = time.monotonic() - t0
    assert "demo fleet" in screen
    print(f"\n{term.width}x{term.height}: demo fleet on screen after {first_paint:.2f} s")
    # Startup speed is a bench figure (bench_ui's startup_s), not a timed assertion: the
    # wait above only bounds a hang.

    # The cursor starts on the first host; Down moves to the second, Enter opens it.
    term.keys("Down")
    time.sleep(0.3)
    term.keys("Enter")
    # the bound only catches a hang: on a loaded 2-core machine the host screen's first
    # draw (eight GPU rows, charts, a history of an hour) has taken over 5 s
    # (its first frame, before the host's state is drawn, says "waiting for the agent's hello")
    screen, _ = term.wait_for(lambda s: "gpu-a02" in s and "H100" in s and "gpu-a01" not in s,
                              timeout=20.0)
    term.keys("?")
    term.wait_for(lambda s: "Enter" in s and "quit" in s.lower(), timeout=5.0)
    term.keys("Escape")
    time.sleep(0.3)
    term.keys("Escape")
    term.wait_for(lambda s: all(h in s for h in HOSTS), timeout=5.0)

    # Triage: the four steps in their fixed order, a step picked by number, a mark.
    term.keys("t")
    screen, _ = term.wait_for(lambda s: "Model code" in s and "Next:" in s, timeout=5.0)
    # numbered as in the step list: a banner or toast may name a step too
    order = [screen.index(w) for w in ("1 GPU state", "2 System log", "3 NCCL", "4 Model code")]
    assert order == sorted(order)
    assert "First failure:" in screen or "Earliest warning:" in screen
    term.keys("2")
    term.wait_for(lambda s: "▶ 2 System log" in s and "checked: kernel log" in s, timeout=5.0)
    term.keys("c")
    term.wait_for(lambda s: "2 System log  ✓ clear" in s, timeout=5.0)
    term.keys("Escape")
    term.wait_for(lambda s: all(h in s for h in HOSTS), timeout=5.0)
    term.keys("q")
    deadline = time.monotonic() + 5.0
    while term.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not term.alive(), "rigwatch did not quit on q"


def test_host_panels_in_a_real_terminal() -> None:
    """Open the throttling host, toggle panels by number, read their titles and the reason."""
    if shutil.which("tmux") is None or not RIGWATCH.exists():
        pytest.skip("tmux or the installed rigwatch is missing")
    term = Tmux(140, 45)
    try:
        env = f"cd {REPO} && TERM=xterm-256color TEXTUAL_ANIMATIONS=none"
        # at 600× the throttle scenario's GPU passes 85 °C within two seconds
        term.start(f"{env} {RIGWATCH} --demo --no-record --speed 600")
        term.wait_for(lambda s: all(h in s for h in HOSTS), timeout=10.0)
        term.keys(":")
        term.wait_for(lambda s: "host NAME" in s, timeout=5.0)
        term.keys("host gpu-a03", "Enter")
        term.wait_for(lambda s: "GPU memory growth" in s, timeout=10.0)
        term.keys("1")  # hide memory growth: thermals move up
        screen, _ = term.wait_for(lambda s: "GPU memory growth" not in s and "Thermals and "
                                  "power" in s and "SW thermal slowdown" in s, timeout=15.0)
        assert "THROTTLED" in screen
        term.keys("3")
        term.wait_for(lambda s: "PCIe topology" in s, timeout=5.0)
        term.keys("4")
        term.wait_for(lambda s: "nvme0n1" in s, timeout=5.0)
        term.keys("q")
    finally:
        term.kill()
