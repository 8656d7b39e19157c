"""The job's log read on the bastion (``snapshot --slurm-job``): as a regular file of the job's
user, never through a link, never blocking, in bounded bytes (issue #35 item 2; security
review 2026-12-06 S1 and S9).

Each case runs in a child Python with a deadline and an address-space limit: before the
fix a FIFO blocked ``open`` for ever and ``/dev/zero`` was read until memory ran out, and a
test must fail, not hang the suite.  Files belong to this test's uid: no root needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

ME = os.getuid()
SECRET = "ROOTONLY-SECRET-1234567890"
NCCL = ("[rank0]:[E1103 23:14:03.342459398 ProcessGroupNCCL.cpp:1182] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, NumelIn=1048576, "
        "NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
CHILD = """
import json, resource, sys, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from probes.config.slurm import SlurmJob
from probes.outputs.job_log import job_log_events
from probes.rules.logrules.live import LiveLogScanner
path, uid = sys.argv[1], int(sys.argv[2])
job = SlurmJob("5", "train", "RUNNING", "alice", ("vm",), "vm", path, path, user_id=uid)
tracemalloc.start()
events, notes = job_log_events(job)
peak = tracemalloc.get_traced_memory()[1]
scanner = LiveLogScanner()
for ev in events:
    scanner.add(ev.source, ev.line, ev.ts)
codes = sorted({str(h.finding.code) for h in scanner.scan()})
print(json.dumps({"codes": codes, "notes": notes, "peak": peak}))
"""


def read_on_bastion(path: Path, uid: int = ME) -> tuple[dict, str, float]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(uid)], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout), out.stdout + out.stderr, took


def test_the_jobs_own_regular_file_is_read(tmp_path: Path) -> None:
    log = tmp_path / "train-5.out"
    log.write_text(NCCL + "\n")
    got, _, _ = read_on_bastion(log)
    assert got["codes"] == ["nccl-timeout"] and got["notes"] == []


@pytest.mark.parametrize("kind", ["symlink", "fifo", "dev-zero", "other-owner"])
def test_what_is_not_the_jobs_regular_file_is_one_line_at_once(tmp_path: Path,
                                                               kind: str) -> None:
    secret = tmp_path / "rootsecret.txt"
    secret.write_text(f"AWS_SECRET_ACCESS_KEY={SECRET}\n{NCCL} {SECRET}\n")
    secret.chmod(0o600)
    path, uid = tmp_path / "train-5.out", ME
    if kind == "symlink":
        path.symlink_to(secret)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    else:
        path, uid = secret, ME + 1
    got, text, took = read_on_bastion(path, uid)
    said = {"symlink": "is a symbolic link", "fifo": "is a FIFO",
            "dev-zero": "is a character device", "other-owner": f"belongs to uid {ME}"}[kind]
    assert took < 30 and SECRET not in text and got["codes"] == []
    (note,) = got["notes"]  # StdOut and StdErr are the same file: one line
    assert note.startswith(f"{path}: {said}") and "owned by the job's user" in note, note


def test_a_50_mb_line_costs_a_line(tmp_path: Path) -> None:
    """Only the log's end is read (as the agent's look-back): a 50 MB line is never held
    whole, and the failure written after it is found."""
    log = tmp_path / "train-5.out"
    with log.open("wb") as f:
        f.write(NCCL.encode() + b"\n" + b"7" * (50 * 1024 * 1024) + b"\n")
        f.write(NCCL.encode() + b"\n")
    got, _, took = read_on_bastion(log)
    assert got["codes"] == ["nccl-timeout"] and took < 30
    assert got["peak"] < 16 * 1024 * 1024, got["peak"]


def test_a_refused_job_log_is_a_warning_that_never_hides_the_kernel_logs_state() -> None:
    """The agent's ``logsource`` for a job file: the console warns that the NCCL and model
    steps are blind to that log, keeps the kernel log's own state, and never calls the
    refusal what broke the run."""
    from probes.analysis.incident import first_failure
    from probes.config.fleet import HostSpec
    from probes.fleet_state import FleetState
    from probes.transport.session import OnceResult, keep_log_source
    from probes.triage import Severity, Step
    from probes.wire.samples import LogSourceState, LogSourceStatus

    kernel = LogSourceState(1.0, "kernel", LogSourceStatus.OK, "journalctl")
    detail = ("/home/alice/job.out: is a symbolic link, not a regular file (read only as a "
              "regular file of the job's user)")
    job = LogSourceState(2.0, "job:/home/alice/job.out", LogSourceStatus.DENIED, None, detail)
    fleet = FleetState([HostSpec("h")])
    for item in (kernel, job):
        fleet.apply("h", item, now=2.0)
    host = fleet.hosts["h"]
    assert host.logs.source == kernel and host.kernel_log_summary() == "read via journalctl"
    (f,) = host.findings()
    assert (f.step, f.code, f.severity) == (Step.NCCL, "job-log-refused", Severity.WARNING)
    assert detail in f.summary and f.source == job.source
    assert first_failure(host.findings()) is None
    fleet.apply("h", LogSourceState(3.0, job.source, LogSourceStatus.OK, "file:x"), now=3.0)
    assert host.findings() == []
    once = OnceResult(HostSpec("h"))
    for item in (kernel, job, LogSourceState(4.0, job.source, LogSourceStatus.OK)):
        keep_log_source(once, item)
    assert once.log_source == kernel and [s.ts for s in once.job_logs] == [4.0]
