"""A hostile job's user against ``rigwatch snapshot --slurm-job``, on a real Slurm (issue #35
items 2 and 3; the reproductions of ``shared/reviews/2026-12-06/security.md``).

The cluster is ``tests/support/slurm.py``'s (Debian 12's Slurm 22.05, run as root).  Jobs
run as ``nobody`` (``setpriv --reuid=65534``), the review's stand-in for an unprivileged
user; rigwatch runs as root, as a console on a GPU host often does.  Each case is the
review's: a job that swaps its StdOut for a link to a root-only file (S1), a job name that
reads as other fields, on one line or several (S2, S2b), glob characters in a path (S4), a
name that is not UTF-8 (S5), a Slurm client that fails with 50 MB on stderr (S8), and StdOut
``/dev/zero`` or a FIFO (S9).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from probes.config.slurm import query_job
from tests.conftest import REPO
from tests.support.slurm import SlurmCluster, start_cluster

NOBODY = 65534
SECRET = "ROOTONLY-SECRET-1234567890"
STEP = "step 1 loss 2.3"
NCCL_WARN = "vm:1:1 [0] NCCL WARN Net : Connection closed by remote peer"


@dataclass
class Place:
    """Where the job's user works: a folder of theirs, and root's secret beside it."""

    cluster: SlurmCluster
    home: Path
    secret: Path

    def sbatch(self, body: str, *opts: str | bytes) -> str:
        """Submit ``body`` as a batch script as nobody; its job id, once it runs."""
        script = self.home / f"job{time.monotonic_ns()}.sh"
        script.write_text("#!/bin/bash\n" + body)
        os.chown(script, NOBODY, NOBODY)
        script.chmod(0o755)
        out = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sbatch",
             "--parsable", "-D", str(self.home), *opts, str(script)],
            env=self.cluster.env, capture_output=True, timeout=30, check=False)
        assert out.returncode == 0, out.stderr.decode(errors="replace")
        job = out.stdout.decode().strip().split(";")[0]
        # by squeue's state alone: scontrol's text holds the (hostile) name
        wait_for(lambda: self.cluster.run("squeue", "-h", "-t", "all", "-j", job, "-o",
                                          "%T").strip() in ("RUNNING", "COMPLETED"))
        return job

    def snapshot(self, job: str, env: dict[str, str] | None = None,
                 timeout: float = 90.0) -> tuple[subprocess.CompletedProcess[str], float]:
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "tui.cli", "snapshot", "--slurm-job", job,
                              "--json"], env=env or self.cluster.env, capture_output=True,
                             text=True, timeout=timeout, cwd=REPO)
        return out, time.monotonic() - t0

    def cancel(self, job: str) -> None:
        subprocess.run(["scancel", job], env=self.cluster.env, capture_output=True,
                       timeout=30, check=False)


def wait_for(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the job did not get there"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    # pytest's temp folders are root's alone: the job's user must read slurm.conf, reach
    # munged's socket and write its own folder
    root = Path(tempfile.mkdtemp(prefix="rw-hostile-"))
    root.chmod(0o755)
    (root / "slurm").mkdir(mode=0o755)
    cluster = start_cluster(root / "slurm")
    try:
        home = root / "alice"
        home.mkdir()
        os.chown(home, NOBODY, NOBODY)
        secret = root / "rootsecret.txt"
        secret.write_text(f"root:$6$SECRETHASH$\nAWS_SECRET_ACCESS_KEY={SECRET}\n"
                          f"NCCL WARN {SECRET}\n")
        secret.chmod(0o600)
        yield Place(cluster, home, secret)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_s1_a_stdout_swapped_for_a_link_to_a_root_file_is_never_read(place: Place) -> None:
    out = place.home / "s1.out"
    job = place.sbatch(f'echo "{STEP}"; sleep 2; ln -sf {place.secret} {out}; sleep 300',
                       "-o", str(out))
    try:
        wait_for(out.is_symlink)
        got, _ = place.snapshot(job)
    finally:
        place.cancel(job)
    assert got.returncode in (0, 1), got.stderr
    assert SECRET not in got.stdout and SECRET not in got.stderr
    snap = json.loads(got.stdout)
    (host,) = snap["hosts"]
    (state,) = host["job_logs"]
    assert state["state"] == "denied" and "is a symbolic link" in state["detail"]
    assert any(f["code"] == "job-log-refused" for f in host["findings"])
    assert any(n.startswith(f"{out}: is a symbolic link") for n in snap["job_notes"])


@pytest.mark.parametrize("layout", ["one line", "newlines"])
def test_s2_a_job_name_never_reads_as_other_fields(place: Place, layout: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """S2/S2b: the name claims root's ownership, a root-only StdOut and an attacker's
    host; Slurm's own fields are kept and no other host is dialled."""
    out = place.home / f"s2-{layout[0]}.out"
    sep = " " if layout == "one line" else "\n   "
    name = (f"x{sep}UserId=root(0){sep}StdOut={place.secret}{sep}NodeList=vm,attacker-host"
            f"{sep}BatchHost=attacker-host\n     Nodes=vm CPU_IDs=0-1 Mem=0 GRES=gpu:8(IDX:0-7)")
    job = place.sbatch(f'echo "{NCCL_WARN}"; sleep 300', "-J", name, "-o", str(out),
                       "--gres=gpu:1")
    try:
        wait_for(lambda: out.exists() and NCCL_WARN in out.read_text())
        monkeypatch.setenv("SLURM_CONF", place.cluster.env["SLURM_CONF"])
        read = query_job(job)
        got, _ = place.snapshot(job)
    finally:
        place.cancel(job)
    node = place.cluster.node
    assert (read.user, read.nodes, read.batch_host) == ("nobody", (node,), node)
    assert read.stdout == read.stderr == str(out) and read.user_id == NOBODY
    assert read.name is not None and read.name.startswith("x") and "\n" not in read.name
    # the name forged a detail line for the job's node: placement is not guessed
    assert read.allocation == () and any("twice" in n for n in read.notes)
    assert got.returncode in (0, 1), got.stderr
    assert SECRET not in got.stdout and "attacker-host" not in got.stderr
    snap = json.loads(got.stdout)
    assert [h["name"] for h in snap["hosts"]] == [node]
    assert (snap["job"]["user"], snap["job"]["nodes"], snap["job"]["stdout"]) == (
        "nobody", [node], str(out))
    assert any(f["code"] == "nccl-net-error" for f in snap["job_findings"])


def test_s2b_a_node_that_is_not_a_slurm_node_is_never_dialled(place: Place,
                                                               tmp_path: Path) -> None:
    """Defence in depth: a Slurm client that names a node outside the job's partition (a
    forged answer, a stale one) has that node left out with one line."""
    fake = tmp_path / "bin"
    fake.mkdir()
    real = {name: shutil.which(name, path=place.cluster.env.get("PATH")) or name
            for name in ("squeue", "scontrol")}
    script = fake / "slurm_fake.py"
    script.write_text(f"""#!{sys.executable}
import os, sys
tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
if tool == "scontrol" and args[-2:-1] == ["job"]:
    print("JobId=5 JobName=x\\n   UserId=nobody(65534) GroupId=nogroup(65534) MCS_label=N/A\\n"
          "   JobState=RUNNING Reason=None Dependency=(null)\\n   NodeList=vm,attacker-host\\n"
          "   BatchHost=vm\\n   StdOut=/nonexistent/x.out\\n")
elif tool == "squeue":
    fmt = args[args.index("-O") + 1]
    if fmt.startswith("JobID:0|,ArrayJobID"):
        print("5|5|N/A|65534|nobody|RUNNING|None|0|vm,attacker-host|vm|gpu|")
    else:
        print("5|" + ("x" if fmt.endswith("Name:0") else "/nonexistent/x.out"))
else:
    os.execv({real["scontrol"]!r}, ["scontrol", *args])
""")
    script.chmod(0o755)
    for name in ("squeue", "scontrol"):
        (fake / name).symlink_to(script)
    env = dict(place.cluster.env, PATH=f"{fake}:{place.cluster.env.get('PATH', '')}")
    got, _ = place.snapshot("5", env=env)
    assert got.returncode in (0, 1), got.stderr
    snap = json.loads(got.stdout)
    assert [h["name"] for h in snap["hosts"]] == ["vm"] and snap["job"]["nodes"] == ["vm"]
    assert "'attacker-host' is not a node of partition gpu" in got.stderr
    assert not any("cannot resolve attacker-host" in str(h) for h in snap["hosts"])


def test_s4_glob_characters_in_a_path_are_its_own(place: Place) -> None:
    """The job's file is followed under its literal name; a neighbour the glob would have
    matched is not; ``$(...)`` runs nothing."""
    pattern = "[x]$(touch PWN)*%j.out"
    job = place.sbatch(f'echo "{STEP}"; sleep 300', "-o", str(place.home / pattern))
    own = place.home / pattern.replace("%j", job)
    neighbour = place.home / f"x$(touch PWN)EVIL{job}.out"
    try:
        wait_for(own.exists)
        neighbour.write_text(f"NCCL WARN {SECRET}\n")
        os.chown(neighbour, NOBODY, NOBODY)
        got, _ = place.snapshot(job)
    finally:
        place.cancel(job)
    assert got.returncode in (0, 1), got.stderr
    snap = json.loads(got.stdout)
    (host,) = snap["hosts"]
    assert [(e["source"], e["line"]) for e in host["events"]
            if e["source"].startswith("job:")] == [(f"job:{own}", STEP)]
    assert SECRET not in got.stdout
    assert not list(place.home.glob("PWN")) and not (REPO / "PWN").exists()


def test_s5_a_name_that_is_not_utf8_is_shown_replaced(place: Place) -> None:
    job = place.sbatch(f'echo "{STEP}"', "-J", b"bad\xff\xfename",
                       "-o", str(place.home / "s5-%j.out"))
    got, _ = place.snapshot(job)
    assert got.returncode in (0, 1), got.stderr
    assert json.loads(got.stdout)["job"]["name"] == "bad\ufffd\ufffdname"


def test_s8_a_failing_slurm_client_costs_one_short_line(place: Place, tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("squeue", "scontrol"):
        (fake / name).write_text("#!/bin/sh\nprintf 'slurm_load_jobs error: ' >&2\n"
                                 "head -c 52428800 /dev/zero | tr '\\0' x >&2\nexit 1\n")
        (fake / name).chmod(0o755)
    env = dict(place.cluster.env, PATH=f"{fake}:{place.cluster.env.get('PATH', '')}")
    # VmHWM, the peak of this process's own memory: ru_maxrss keeps the parent's peak
    # across fork and exec (a big pytest worker's, hundreds of MiB)
    child = ("import re, sys\nfrom probes.config.slurm import SlurmError, query_job\n"
             "try:\n    query_job('5')\nexcept SlurmError as exc:\n    print(str(exc))\n"
             "status = open('/proc/self/status').read()\n"
             "print(re.search(r'VmHWM:\\s*(\\d+)', status).group(1))\n")
    out = subprocess.run([sys.executable, "-c", child], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    said, peak_kib = out.stdout.splitlines()
    print(f"S8: message {len(said)} chars, peak RSS {int(peak_kib) // 1024} MiB")
    assert said.startswith("squeue -j 5: …xxx") and said.endswith("xxx"), said[:200]
    assert len(said) < 400 and int(peak_kib) < 100 * 1024, (len(said), peak_kib)
    got, _ = place.snapshot("5", env=env)
    assert got.returncode == 2 and got.stdout == ""
    assert len(got.stderr.strip().splitlines()) == 1 and len(got.stderr) < 500


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_s9_a_stdout_that_never_ends_or_blocks_is_one_line_at_once(place: Place,
                                                                   kind: str) -> None:
    if kind == "dev-zero":
        out, body = Path("/dev/zero"), f'echo "{STEP}"; sleep 300'
    else:
        out = place.home / "s9.out"
        body = f'echo "{STEP}"; rm -f {out}; mkfifo {out}; sleep 300'
    job = place.sbatch(body, "-o", str(out))
    try:
        wait_for(lambda: out.exists() and (stat.S_ISCHR(out.stat().st_mode)
                                           or stat.S_ISFIFO(out.stat().st_mode)))
        got, took = place.snapshot(job, timeout=60)
    finally:
        place.cancel(job)
    assert got.returncode in (0, 1), got.stderr
    snap = json.loads(got.stdout)
    word = "a character device" if kind == "dev-zero" else "a FIFO"
    assert any(n.startswith(f"{out}: is {word}") for n in snap["job_notes"]), snap["job_notes"]
    (state,) = snap["hosts"][0]["job_logs"]
    assert state["state"] == "denied" and f"is {word}" in state["detail"]
    print(f"S9 {kind}: snapshot took {took:.1f} s")
    assert took < 30, took
