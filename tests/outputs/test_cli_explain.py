"""``rigwatch explain`` as a user runs it: stdin, several files, exit codes, the text report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.support.explain_expect import fixture_input
from tests.support.paths import TEST_DATA
from tui.cli import main

FIX = FIXTURES


def _run(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tui.cli", "explain", *args], input=stdin,
                          capture_output=True, timeout=60)


def test_stdin_with_crlf_and_a_fence_gives_the_same_answer() -> None:
    raw = fixture_input(FIX / "kernel/02-dmesg-T-xid79-new-format-broken-bracket.txt")
    pasted = b"```\r\n" + raw.replace(b"\n", b"\r\n") + b"\r\n```\r\n"
    done = _run(["--json", "-"], pasted)
    assert done.returncode == 0 and done.stderr == b""
    doc = json.loads(done.stdout)
    assert doc["inputs"][0]["path"] == "-" and doc["inputs"][0]["kind"] == "log"
    codes = {(f["code"], f.get("xid")) for f in doc["findings"]}
    assert codes == {("xid", 79), ("gpu-fallen-off-bus", None)}
    assert all(f["severity"] == "critical" for f in doc["findings"])


def test_several_files_are_reported_in_triage_order(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for name in ("nccl/02-watchdog-reduce-scatter-base.txt",
                 "kernel/04-syslog-with-kernel-ts-xid13-old.txt",
                 "topo/04-8xgpu-mlx4-old-format-no-numa.txt"):
        p = tmp_path / Path(name).name
        p.write_bytes(fixture_input(FIX / name))
        paths.append(str(p))
    assert main(["explain", "--json", *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [i["kind"] for i in doc["inputs"]] == ["log", "log", "topo"]
    steps = [f["step"] for f in doc["findings"]]
    assert steps == sorted(steps, key=["gpu", "syslog", "nccl", "model"].index)
    assert steps[0] == "gpu" and steps[-1] == "nccl"
    assert main(["explain", *paths]) == 0
    text = capsys.readouterr().out
    order = [text.index(h) for h in ("1. GPU state", "2. System log", "3. NCCL", "4. Model code")]
    assert order == sorted(order)
    # the first failure opens and closes the report: the critical watchdog timeout (a far
    # NIC is how the host is built, and the old Xid 13 only a warning), never the layout
    assert text.startswith("First failure: nccl-timeout rank 1 (")
    assert "Start with nccl-timeout rank 1 (" in text and "Start with topology" not in text


def test_unreadable_inputs_exit_2_with_one_line_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    done = _run(["--json", str(missing)])
    assert done.returncode == 2 and done.stdout == b""
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and str(missing) in err
    done = _run([str(tmp_path)])
    assert done.returncode == 2 and "is a directory" in done.stderr.decode()
    done = _run(["--kind", "nvidia-smi-xml", "-"])
    assert done.returncode == 2 and "unknown --kind" in done.stderr.decode()
    done = _run(["-", "-"])
    assert done.returncode == 2 and "only once" in done.stderr.decode()


def test_empty_and_binary_inputs_are_unknown_or_log_never_a_crash(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(256)) * 40)
    done = _run(["--json", str(empty), str(noise)])
    assert done.returncode == 0, done.stderr
    kinds = [i["kind"] for i in json.loads(done.stdout)["inputs"]]
    assert kinds[0] == "unknown" and kinds[1] in ("log", "unknown")


def test_kind_override_parses_as_told(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "topo.txt"
    p.write_bytes(fixture_input(FIX / "topo/08-h100-8x-nv18.txt"))
    assert main(["explain", "--json", "--kind", "log", str(p)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"][0]["kind"] == "log" and doc["inputs"][0]["parsed"]["lines"] > 5


HEALTHY = sorted((TEST_DATA / "healthy").glob("*.txt"))


@pytest.mark.parametrize("sample", HEALTHY, ids=lambda p: p.stem)
def test_healthy_logs_give_nothing_above_info(sample: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A normal boot dmesg, NCCL init INFO and training progress are not incidents."""
    assert main(["explain", "--json", str(sample)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"][0]["kind"] == "log"
    loud = [f for f in doc["findings"] if f["severity"] != "info"]
    assert loud == []


def test_there_are_healthy_samples() -> None:
    assert {p.stem for p in HEALTHY} >= {"boot-dmesg-h100", "nccl-init-info", "training-progress"}


def test_escape_sequences_in_a_pasted_log_never_reach_the_terminal(tmp_path: Path) -> None:
    """Issue 18: a job or kernel log is written by anyone on the host; explain shows it."""
    log = tmp_path / "kern.log"
    log.write_bytes(
        b"boot \x1b]0;TITLE\x07 ok\n\tindented \xe2\x80\xae line\n"
        b"[  12.5] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus. "
        b"\x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J \xc2\x9b31m\n")
    for args in (["--json", str(log)], [str(log)]):
        done = _run(args)
        assert done.returncode == 0, done.stderr
        for bad in (b"\x1b", b"\x07", b"\xc2\x9b", b"\xe2\x80\xae"):
            assert bad not in done.stdout, (args, bad)
    doc = json.loads(_run(["--json", str(log)]).stdout)
    xid = next(f for f in doc["findings"] if f["code"] == "xid")
    assert xid["line"] == 3 and xid["xid"] == 79
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in xid["evidence"]  # evidence kept, readable


def test_a_file_name_with_escapes_is_shown_as_text(tmp_path: Path) -> None:
    """``explain logs/*`` over files a host user named: the name reaches the report too."""
    log = tmp_path / "job\x1b]0;TITLE\x07.log"
    log.write_bytes(b"[  12.5] NVRM: Xid (PCI:0000:18:00): 79, pid=0, "
                    b"GPU has fallen off the bus.\n")
    done = _run([str(log)])
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout and b"\x07" not in done.stdout
    assert b"job\\x1b]0;TITLE\\x07.log" in done.stdout
