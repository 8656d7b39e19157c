"""End to end, in a real terminal: hostile hosts cannot reach the operator's terminal or stop
the console.

tmux runs the real console on three hosts: a real agent following a job log that receives
markup, an OSC 0 title and an OSC 52 clipboard write; a fake agent whose hello and samples
carry markup, escapes, bidi and zero-width characters and ``10**400``, and which sends one
100,000-deep JSON line; and a healthy simulated host.  The console must stay up, leave the
pane title and tmux's paste buffers (where OSC 52 lands with ``set-clipboard on``) untouched,
ignore a click on the toasts, and keep the healthy host streaming.  Then the security review's
E1 line (``Tried to allocate`` and 8,000 digits) into the followed log: keys are answered
within half a second, after it and after the lines that follow it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.tmux import RIGWATCH, Tmux

pytestmark = pytest.mark.tmux

HOSTILE = ("[@click=app.quit]ZZZZ[/] \x1b]0;PWNED-TITLE\x07 \x1b]52;c;cHduZWQ=\x07 "
           "\x1b[2J\x1b[H \u202eevil\u202c \u200b [link=https://e.example]l[/link] [/]")
"""Markup that would quit on a click or crash the parser, a title and a clipboard write, a
screen clear, a bidi override and a zero-width space."""

FAKE_AGENT = '''#!/usr/bin/python3
"""A hostile agent: speaks protocol v1 with poisoned strings and absurd numbers."""
import json, os, sys, threading, time

HELLO, SAMPLE, EVENT = {lines}


def watch_stdin():
    while sys.stdin.buffer.read(65536):
        pass
    os._exit(0)


def emit(line):
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()


threading.Thread(target=watch_stdin, daemon=True).start()
hello = json.loads(HELLO)
hello["ts"] = time.time()
emit(json.dumps(hello))
seq = 0
while True:
    sample = json.loads(SAMPLE)
    sample["ts"], sample["seq"] = time.time(), seq
    emit(json.dumps(sample))
    if seq == 3:
        emit("[" * 100000)
    if seq % 4 == 1:
        event = json.loads(EVENT)
        event["ts"] = time.time()
        emit(json.dumps(event))
    seq += 1
    time.sleep(0.5)
'''


def _hostile_lines() -> list[str]:
    """The simulator's hello and first sample, poisoned field by field."""
    out = subprocess.run([sys.executable, "-m", "probes.agent", "--simulate", "healthy",
                          "--count", "1", "--fast"], capture_output=True, text=True,
                         check=True, timeout=60, cwd=REPO).stdout.splitlines()
    hello = json.loads(next(line for line in out if '"hello"' in line))
    sample = json.loads(next(line for line in out if '"sample"' in line))
    host = hello["host"]
    for key in ("hostname", "kernel", "os", "driver_version", "cpu_model"):
        host[key] = HOSTILE
    host["mem_total_bytes"] = 10**400
    for gpu in hello["gpus"]:
        gpu["name"] = HOSTILE
        gpu["serial"] = HOSTILE
    for gpu in sample["gpus"]:
        gpu["clock_reasons"] = [HOSTILE]
        gpu["temp_c"] = float("inf")
        for proc in gpu.get("processes", []):
            proc["name"] = proc["user"] = HOSTILE
    event = {"type": "event", "v": 1, "ts": 0.0, "source": "job:/x/" + HOSTILE,
             "line": HOSTILE}
    return [json.dumps(m) for m in (hello, sample, event)]


JOB_LOG_LINES = (
    "step 100 loss 2.3 \x1b]0;PWNED-TITLE\x07 ok\n"
    "x \x1b]52;c;ZWNobyBwd25lZA==\x07\n"
    "Traceback (most recent call last):\n"
    '  File "/home/alice/train.py", line 42, in [@click=app.quit]ZZZZZZZZZZZZZZZZZZZZ[/]\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a "
    "total capacity of 79.11 GiB\n"
    "Traceback (most recent call last):\n"
    '  File "/home/alice/train.py", line 43, in [/]\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 1 has a "
    "total capacity of 79.11 GiB\n"
)


def _inventory(tmp_path: Path) -> Path:
    agent = tmp_path / "hostile-agent"
    agent.write_text(FAKE_AGENT.replace("{lines}", repr(tuple(_hostile_lines()))))
    agent.chmod(0o755)
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "job.log").write_text("")
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"""\
hosts:
  - name: evil01
    transport: local
    python: {agent}
  - name: joblog01
    transport: local
    interval: 0.5
    logs: ["{tmp_path}/train/*.log"]
  - name: healthy01
    transport: local
    interval: 0.5
    simulate: [healthy]
""")
    return inv


def _streaming(screen: str, hosts: tuple[str, ...]) -> bool:
    """Whether each of ``hosts`` has a fleet row that says streaming."""
    rows = [line.split() for line in screen.splitlines()]
    return all(any(r[:2] == [h, "streaming"] for r in rows) for h in hosts)


def _click(term: Tmux, col: int, row: int) -> None:
    """An SGR mouse press and release at 1-based (col, row)."""
    for end in ("M", "m"):
        term.cmd("send-keys", "-t", "t", "-l", f"\x1b[<0;{col};{row}{end}")


def _click_every_toast(term: Tmux) -> int:
    """Click on each screen cell that shows the would-be link text; returns how many."""
    clicks = 0
    for row, line in enumerate(term.screen().splitlines(), start=1):
        col = line.find("ZZZZ")
        if col >= 0:
            _click(term, col + 2, row)
            clicks += 1
    return clicks


OOM_FLOOD_LINE = "CUDA out of memory. Tried to allocate " + "1" * 8000 + "\n"
"""The security review's E1 line: its rules cost the square of the line, 7 s a scan, and every
one of the next 40 lines scanned it again; the console answered no key for seconds."""
KEY_ANSWER_S = 0.5


def _answer_time(term: Tmux, span_s: float = 5.0) -> float:
    """The longest a ``:`` took to open the command line (its placeholder shows) or an Escape
    to close it, over ``span_s``: long enough for the agent to send what was just written and
    for a tick to scan it."""
    worst, start = 0.0, time.monotonic()
    while time.monotonic() - start < span_s:
        term.keys(":")
        _, waited = term.wait_for(lambda s: "theme light" in s, timeout=30.0)
        worst = max(worst, waited)
        term.keys("Escape")
        _, waited = term.wait_for(lambda s: "theme light" not in s, timeout=30.0)
        worst = max(worst, waited)
    return worst


def _shown(term: Tmux, marker: str, key: str = "End", timeout: float = 30.0) -> None:
    """Press ``key`` until the screen shows ``marker`` (the host screen's last panel: the
    newest log lines)."""
    deadline = time.monotonic() + timeout
    while marker not in term.screen():
        assert time.monotonic() < deadline, f"{marker} never shown:\n{term.screen()}"
        term.keys(key)
        time.sleep(0.2)


def _log_lines_answer_keys(term: Tmux, log: Path) -> tuple[float, float]:
    """E1 end to end, on joblog01's screen: keys while the 8 KB digit OOM line comes in and is
    scanned, then while ordinary lines come in (each once rescanned the OOM line)."""
    term.keys(":")
    term.wait_for(lambda s: "theme light" in s, timeout=10.0)
    term.keys("host joblog01", "Enter")
    term.wait_for(lambda s: "GPU  State" in s, timeout=10.0)
    term.keys("6")  # the host panel: its end is the newest log lines
    _shown(term, "job:")
    answers = []
    for lines, marker in ((OOM_FLOOD_LINE, "e1-marker-one"),
                          ("".join(f"step {i} loss 2.2\n" for i in range(3)), "e1-marker-two")):
        with log.open("a") as out:
            out.write(lines + marker + "\n")
        answers.append(_answer_time(term))
        assert answers[-1] < KEY_ANSWER_S, f"a key took {answers[-1]:.2f} s after {marker}"
        _shown(term, marker)  # the lines did come in (and were scanned) meanwhile
    return answers[0], answers[1]


def test_hostile_hosts_in_a_real_terminal(tmp_path: Path) -> None:
    if shutil.which("tmux") is None or not RIGWATCH.exists():
        pytest.skip("tmux or the installed rigwatch is missing")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("the fake agent's interpreter /usr/bin/python3 is missing")
    inv = _inventory(tmp_path)
    term = Tmux(160, 48)
    env = f"cd {REPO} && TERM=xterm-256color TEXTUAL_ANIMATIONS=none"
    try:
        term.start(f"{env} exec {RIGWATCH} --inventory {inv} --no-record")
        term.cmd("set-option", "-g", "set-clipboard", "on")
        term.cmd("set-option", "-g", "allow-rename", "on")
        title_before = term.cmd("display", "-p", "-t", "t", "#{pane_title}").strip()
        # every row streaming, joblog01's agent following the (empty) log: a line written
        # before its agent opened the log is one it rightly never reads
        term.wait_for(lambda s: _streaming(s, ("evil01", "joblog01", "healthy01")), timeout=30.0)
        with (tmp_path / "train" / "job.log").open("a") as log:
            log.write(JOB_LOG_LINES)
        time.sleep(4.0)  # the deep line, the events and the job log's toasts arrive
        clicks = _click_every_toast(term)
        # every host's screen, the triage screen and back: nothing may raise or run
        for host in ("evil01", "joblog01"):
            term.keys(":")
            time.sleep(0.5)
            term.keys(f"host {host}", "Enter")
            term.wait_for(lambda s: "GPU  State" in s and "Worst" not in s, timeout=10.0)
            for keys in (("1",), ("2",), ("End",), ("6",), ("5",), ("Escape",)):
                term.keys(*keys)
                time.sleep(0.5)
                assert term.alive(), f"the console exited after {keys} on {host}"
        for keys in (("t",), ("2",), ("3",), ("4",), ("Escape",), ("w",), ("w",)):
            term.keys(*keys)
            time.sleep(0.5)
            assert term.alive(), f"the console exited after {keys}"
        clicks += _click_every_toast(term)
        screen, _ = term.wait_for(
            lambda s: "healthy01" in s and "evil01" in s and "joblog01" in s, timeout=10.0)
        assert term.alive(), "a click on a toast ran an action"
        healthy = next(line for line in screen.splitlines() if "healthy01" in line)
        assert "streaming" in healthy, screen
        title_after = term.cmd("display", "-p", "-t", "t", "#{pane_title}").strip()
        assert "PWNED" not in title_after and title_after == title_before
        buffers = subprocess.run(["tmux", "-L", term.socket, "list-buffers"],
                                 capture_output=True, text=True, timeout=10).stdout
        assert buffers.strip() == "", f"OSC 52 reached the clipboard: {buffers!r}"
        after_oom, after_more = _log_lines_answer_keys(term, tmp_path / "train" / "job.log")
        assert term.alive()
        print(f"\nhostile hosts: console up, title {title_after!r}, no buffers, "
              f"{clicks} clicks on would-be links ran nothing; keys answered within "
              f"{after_oom:.2f} s after the 8 KB OOM line, {after_more:.2f} s after the next")
    finally:
        term.kill()
