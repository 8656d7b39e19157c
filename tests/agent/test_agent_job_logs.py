"""The files a job names, followed by the agent as data the job's user controls (issue #35
item 2; security review 2026-12-06 S1, S4, S9).

The agent runs as a host runs it (``python3 -I -S -`` with the shipped source).  A job's
StdOut/StdErr are ``--job-log`` paths: literal, read only as regular files owned by
``--job-log-owner``, never through a symbolic link, never blocking.  Files here belong to
this test's own uid, so the tests need no root.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.agent.logs import MAX_EVENT_LINE, FileTail
from probes.transport.bootstrap import shipped_source

ME = os.getuid()
SECRET = "ROOTONLY-SECRET-1234567890"


class Agent:
    """A running agent, read line by line while the test changes files under it."""

    def __init__(self, python: str, args: list[str]) -> None:
        argv = ["--interval", "0.1", "--count", "400", *args]
        self.proc = subprocess.Popen([python, "-I", "-S", "-", *argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.proc.stdin.write(shipped_source(argv))
        self.proc.stdin.close()
        self.seen: list[dict] = []
        self._buf = b""

    def until(self, done: Callable[[list[dict]], bool], timeout: float = 20.0) -> list[dict]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            left = deadline - time.monotonic()
            assert left > 0, f"not seen within {timeout} s: {self.seen[-5:]}"
            if not select.select([fd], [], [], min(left, 0.5))[0]:
                continue
            data = os.read(fd, 1 << 20)
            assert data, f"agent ended: {self.proc.stderr.read().decode()[-2000:]}"  # type: ignore[union-attr]
            self._buf += data
            *lines, self._buf = self._buf.split(b"\n")
            self.seen += [json.loads(line) for line in lines if line]
        return self.seen

    def rss_peak_kib(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def events(seen: list[dict]) -> list[str]:
    return [m["line"] for m in seen if m["type"] == "event"]


def samples(seen: list[dict]) -> int:
    return sum(m["type"] == "sample" for m in seen)


def states(seen: list[dict], path: Path) -> list[dict]:
    return [m for m in seen if m["type"] == "logsource" and m["source"] == f"job:{path}"]


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file the job's user must never see through the agent (root's, in the review)."""
    path = tmp_path / "rootsecret.txt"
    path.write_text(f"root:$6$SECRETHASH$\nAWS_SECRET_ACCESS_KEY={SECRET}\nNCCL WARN {SECRET}\n")
    path.chmod(0o600)
    return path


def test_a_log_swapped_for_a_symlink_is_refused_and_its_target_never_read(
        bare_python: str, tmp_path: Path, secret: Path) -> None:
    """S1: the job replaces its StdOut by a link to a secret while the agent follows it."""
    log = tmp_path / "job.out"
    log.write_text("step 1 loss 2.3\n")
    agent = Agent(bare_python, [f"--job-log={log}", f"--job-log-owner={ME}",
                                "--tail-lookback=4096"])
    try:
        agent.until(lambda s: "step 1 loss 2.3" in events(s) and bool(states(s, log)))
        assert states(agent.seen, log)[-1]["state"] == "ok"
        log.unlink()
        log.symlink_to(secret)
        seen = agent.until(lambda s: states(s, log)[-1]["state"] == "denied")
        ticks = samples(seen)
        agent.until(lambda s: samples(s) > ticks + 5)  # and a few ticks more
    finally:
        agent.stop()
    assert not any(SECRET in json.dumps(m) for m in agent.seen)
    refusal = states(seen, log)[-1]
    assert "symbolic link" in refusal["detail"] and str(log) in refusal["detail"]
    assert refusal["via"] is None


@pytest.mark.parametrize("kind", ["symlink", "fifo", "dev-zero", "other-owner"])
def test_what_is_not_the_jobs_regular_file_is_refused_at_once(
        bare_python: str, tmp_path: Path, secret: Path, kind: str) -> None:
    """S9 and the start-up side of S1: nothing blocks, nothing of the file is read."""
    path = tmp_path / "job.out"
    owner = ME
    if kind == "symlink":
        path.symlink_to(secret)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    else:
        path.write_text(f"NCCL WARN {SECRET}\n")
        owner = ME + 1
    t0 = time.monotonic()
    out = subprocess.run([bare_python, "-I", "-S", "-", "--once", f"--job-log={path}",
                          f"--job-log-owner={owner}", "--tail-lookback=65536"],
                         input=shipped_source(["--once"]), capture_output=True, timeout=30)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    seen = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert took < 15 and not events(seen) and SECRET not in out.stdout.decode()
    (state,) = states(seen, path)
    assert state["state"] == "denied"
    said = {"symlink": "is a symbolic link", "fifo": "is a FIFO",
            "dev-zero": "is a character device", "other-owner": f"belongs to uid {ME}"}[kind]
    assert said in state["detail"], state


def test_a_jobs_paths_are_literal_never_globs(bare_python: str, tmp_path: Path) -> None:
    """S4: ``[x]``, ``*`` and ``$(...)`` in a path are its characters: the file itself is
    followed, its neighbours are not, and nothing runs."""
    log = tmp_path / "[x]$(touch PWN)*7.out"
    other = tmp_path / "[x]$(touch PWN)*other.out"
    log.write_text("")
    other.write_text("")
    agent = Agent(bare_python, [f"--job-log={log}", f"--job-log-owner={ME}"])
    try:
        agent.until(lambda s: bool(states(s, log)))
        other.write_text("NCCL WARN from a neighbour\n")
        with log.open("a") as f:
            f.write("NCCL WARN from the job itself\n")
        agent.until(lambda s: "NCCL WARN from the job itself" in events(s))
        agent.until(lambda s: samples(s) > 10)
    finally:
        agent.stop()
    assert events(agent.seen) == ["NCCL WARN from the job itself"]
    assert {m["source"] for m in agent.seen if m["type"] == "event"} == {f"job:{log}"}
    assert not (tmp_path / "PWN").exists() and not Path("PWN").exists()


def test_a_50_mb_line_costs_a_line(bare_python: str, tmp_path: Path) -> None:
    """One 50 MB line without a break, then a normal one: the agent's memory stays that of
    a few blocks and the next line still arrives, cut lines kept to MAX_EVENT_LINE."""
    log = tmp_path / "job.out"
    log.write_text("")
    agent = Agent(bare_python, [f"--job-log={log}", f"--job-log-owner={ME}", "--fast",
                                "--count=100000"])
    try:
        agent.until(lambda s: bool(states(s, log)))
        base = agent.rss_peak_kib()
        with log.open("ab") as f:
            f.write(b"1" * (50 * 1024 * 1024) + b"\nstep 9 loss 1.5\n")
        seen = agent.until(lambda s: "step 9 loss 1.5" in events(s), timeout=60)
        peak = agent.rss_peak_kib()
    finally:
        agent.stop()
    assert all(len(line) <= MAX_EVENT_LINE for line in events(seen))
    print(f"agent peak RSS {base} -> {peak} KiB")
    assert peak - base < 20 * 1024, f"{base} -> {peak} KiB"


def test_a_rotated_log_is_checked_again_before_it_is_read(tmp_path: Path, secret: Path) -> None:
    """The new file at the name after a rotation is read only once it passes the checks:
    a regular file of the job's user is followed from its start; a link is refused."""
    log = tmp_path / "job.out"
    log.write_text("first\n")
    tail = FileTail(str(log), at_end=False, owner=ME, follow=False)
    assert tail.lines() == ["first"] and tail.reading
    log.rename(tmp_path / "job.out.1")
    log.write_text("after rotation\n")
    assert tail.lines() == ["after rotation"]
    log.unlink()
    log.symlink_to(secret)
    assert tail.lines() == [] and not tail.reading
    assert tail.refused == "is a symbolic link, not a regular file"
    log.unlink()
    log.write_text("back\n")
    assert tail.lines() == ["back"] and tail.refused is None
