"""The agent's kernel-log source: journalctl, else dmesg, else a syslog file, read-only.

The agent runs as a real subprocess with PATH holding fake ``journalctl`` and ``dmesg``
scripts, and with ``--log-root`` pointing its /var/log and /proc look-ups into tmp_path.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from probes.agent import kernel_log, logs
from probes.transport.bootstrap import bootstrap_argv, shipped_source
from probes.wire.protocol import MessageReader
from probes.wire.samples import LogEvent, LogSourceState, LogSourceStatus
from tests.agent.test_agent import by_type
from tests.conftest import AGENT_SOURCE

T_ISO = calendar.timegm((2025, 12, 2, 3, 14, 7, 0, 0, 0)) + 0.5

FAKE_JOURNALCTL = r'''
import json, os, sys, time
mode = os.environ.get("FAKE_JOURNAL", "entries")
def put(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
if mode == "hint":
    sys.stderr.write("Hint: You are currently not seeing messages from other users and the "
                     "system.\n      Users in groups 'adm', 'systemd-journal' can see all "
                     "messages.\n      Pass -q to turn off this notice.\n")
    sys.stderr.flush()
    time.sleep(60)
    sys.exit(0)
put({"MESSAGE": "argv: " + " ".join(sys.argv[1:]), "__REALTIME_TIMESTAMP": "1764645247500000",
     "_BOOT_ID": "b007b007", "__CURSOR": "s=abc;i=1", "_TRANSPORT": "kernel"})
if mode == "dies":
    sys.stdout.flush()
    time.sleep(0.8)
    sys.stderr.write("Failed to iterate through journal: Bad message\n")
    sys.exit(1)
put({"MESSAGE": list(b"NVRM: Xid (PCI:0000:18:00): 79, \xff GPU has fallen off the bus."),
     "__REALTIME_TIMESTAMP": "1764645248000000", "_BOOT_ID": "b007b007",
     "__CURSOR": "s=abc;i=2"})
sys.stdout.write('{"MESSAGE": "half a li\n')
put({"MESSAGE": None, "__REALTIME_TIMESTAMP": "1764645249000000", "__CURSOR": "s=abc;i=3"})
put({"MESSAGE": "last one", "__REALTIME_TIMESTAMP": "1764645250000000", "_BOOT_ID": "b007b007",
     "__CURSOR": "s=abc;i=4"})
sys.stdout.flush()
time.sleep(60)
'''

FAKE_DMESG = r'''
import os, sys, time
mode = os.environ.get("FAKE_DMESG", "lines")
if mode == "denied":
    sys.stderr.write("dmesg: read kernel buffer failed: Operation not permitted\n")
    sys.exit(1)
print("argv: " + " ".join(sys.argv[1:]))
print("[    5.123456] NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.")
sys.stdout.flush()
time.sleep(60)
'''


def _exe(path: Path, body: str) -> None:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    """A bin directory (fakes are added per test) and a log root with boot id and uptime."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    root = tmp_path / "root"
    (root / "proc" / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "random" / "boot_id").write_text("1234-boot\n")
    (root / "proc" / "uptime").write_text("1000.00 9000.00\n")
    return {"bin": bindir, "root": root, "tmp": tmp_path}


def _journal(host: dict[str, Path]) -> None:
    _exe(host["bin"] / "journalctl", FAKE_JOURNALCTL)
    journal = host["root"] / "var" / "log" / "journal" / "0123abcd"
    journal.mkdir(parents=True)
    (journal / "system.journal").write_bytes(b"")


def _dmesg(host: dict[str, Path]) -> None:
    _exe(host["bin"] / "dmesg", FAKE_DMESG)


def _env(host: dict[str, Path], **extra: str) -> dict[str, str]:
    return {"PATH": str(host["bin"]), "FAKE_MARK": extra.pop("mark", "none"), **extra}


def _run(host: dict[str, Path], args: list[str], count: int = 4, **env: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-I", "-", "--interval", "0.2", "--count", str(count),
         "--log-root", str(host["root"]), *args],
        input=AGENT_SOURCE, capture_output=True, env=_env(host, **env), timeout=30,
        cwd=host["tmp"], check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr == b""
    return [json.loads(x) for x in proc.stdout.decode().splitlines()]


def _kernel(lines: list[dict]) -> list[dict]:
    return [m for m in lines if m["type"] == "event" and m["source"] == "kernel"]


def _alive_with(marker: str) -> list[str]:
    """Live (not zombie) processes whose environment carries ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if f"FAKE_MARK={marker}".encode() in environ and state != "Z":
            found.append(pid)
    return found


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if not p.is_symlink()}


class TestJournal:
    def test_entries_become_events_with_boot_and_cursor(self, host: dict[str, Path]) -> None:
        _journal(host)
        _dmesg(host)
        lines = _run(host, ["--kernel-log", "auto"])
        assert [m["type"] for m in lines][:2] == ["hello", "logsource"]
        src = by_type(lines, "logsource")
        assert len(src) == 1
        assert (src[0]["state"], src[0]["via"], src[0]["detail"], src[0]["fix"]) == (
            "ok", "journalctl", "", None)
        events = _kernel(lines)
        assert [e["cursor"] for e in events] == ["s=abc;i=1", "s=abc;i=2", "s=abc;i=4"]
        assert {e["boot"] for e in events} == {"b007b007"}
        assert events[0]["ts"] == 1764645247.5 and events[2]["ts"] == 1764645250.0
        argv = events[0]["line"].split()[1:]
        assert argv == ["-k", "-o", "json", "--no-pager", "--follow", "--lines=2000"]
        assert events[1]["line"] == ("NVRM: Xid (PCI:0000:18:00): 79, \ufffd GPU has fallen off "
                                     "the bus.")
        assert events[2]["line"] == "last one"
        errors = by_type(lines, "error")
        assert len(errors) == 1 and errors[0]["probe"] == "kernel-log"
        assert "1 line(s) that are not JSON" in errors[0]["message"]
        assert not any("dmesg" in e["line"] for e in events)  # journal works: no fallback

    def test_lookback_and_cursor_reach_the_command_line(self, host: dict[str, Path]) -> None:
        _journal(host)
        first = _kernel(_run(host, ["--kernel-log", "journal", "--kernel-lookback", "50"]))[0]
        assert first["line"].endswith(" --follow --lines=50")
        again = _kernel(_run(host, ["--kernel-log", "journal",
                                    "--kernel-after-cursor", "s=abc;i=4"]))[0]
        assert again["line"].endswith(" --follow --after-cursor=s=abc;i=4")
        assert "--lines" not in again["line"]

    def test_journal_that_dies_falls_back_to_dmesg(self, host: dict[str, Path]) -> None:
        _journal(host)
        _dmesg(host)
        lines = _run(host, ["--kernel-log", "auto"], count=10, FAKE_JOURNAL="dies")
        kinds = [(m["type"], m.get("via")) for m in lines if m["type"] in ("logsource", "event")]
        assert kinds[0] == ("logsource", "journalctl")
        switch = kinds.index(("logsource", "dmesg"))
        assert kinds[1:switch] == [("event", None)]  # the journal's line came first
        src = by_type(lines, "logsource")[1]
        assert src["state"] == "ok"
        assert src["detail"] == ("journalctl: exited with status 1: Failed to iterate through "
                                 "journal: Bad message")
        after = [e["line"] for e in _kernel(lines)[1:]]
        assert after == ["argv: -w", "[    5.123456] NVRM: Xid (PCI:0000:18:00): 79, pid=1, "
                                     "GPU has fallen off the bus."]


class TestFallbacks:
    def test_everything_refused_is_denied_with_a_fix(self, host: dict[str, Path]) -> None:
        _journal(host)
        _dmesg(host)
        lines = _run(host, ["--kernel-log", "auto"], FAKE_JOURNAL="hint", FAKE_DMESG="denied")
        src = by_type(lines, "logsource")
        assert len(src) == 1
        s = src[0]
        assert (s["state"], s["via"]) == ("denied", None)
        assert s["detail"].startswith("journalctl: Hint: You are currently not seeing messages "
                                      "from other users and the system.; dmesg: dmesg: read "
                                      "kernel buffer failed: Operation not permitted; ")
        assert "none of /var/log/kern.log, /var/log/messages, /var/log/syslog exists" in (
            s["detail"])
        assert "usermod -aG systemd-journal" in s["fix"] and "adm" in s["fix"]
        assert "sysctl kernel.dmesg_restrict=0" in s["fix"]
        assert _kernel(lines) == []

    def test_nothing_there_is_unavailable(self, host: dict[str, Path]) -> None:
        lines = _run(host, ["--kernel-log", "auto"])
        s = by_type(lines, "logsource")[0]
        assert (s["state"], s["via"], s["fix"]) == ("unavailable", None, None)
        assert s["detail"].startswith("journalctl: not installed; dmesg: not installed; ")

    def test_no_journal_files_falls_back_to_dmesg(self, host: dict[str, Path]) -> None:
        _exe(host["bin"] / "journalctl", FAKE_JOURNALCTL)  # installed, but journald kept nothing
        _dmesg(host)
        s = by_type(_run(host, ["--kernel-log", "auto"]), "logsource")[0]
        assert s["via"] == "dmesg"
        assert s["detail"].startswith("journalctl: No journal files were found")

    def test_journal_missing_dmesg_works(self, host: dict[str, Path]) -> None:
        _dmesg(host)
        t0 = time.time()
        lines = _run(host, ["--kernel-log", "auto"])
        s = by_type(lines, "logsource")[0]
        assert (s["state"], s["via"], s["detail"], s["fix"]) == (
            "ok", "dmesg", "journalctl: not installed", None)
        xid = _kernel(lines)[1]
        assert xid["line"].startswith("[    5.123456] NVRM: Xid")  # the mono stamp is kept
        assert xid["boot"] == "1234-boot" and "cursor" not in xid
        assert abs(xid["ts"] - (t0 - 1000.0 + 5.123456)) < 5.0  # boot time + mono seconds

    def test_readable_kern_log_with_lookback(self, host: dict[str, Path]) -> None:
        log = host["root"] / "var" / "log" / "kern.log"
        log.parent.mkdir(parents=True)
        old = [f"Dec  1 00:00:00 gpu-a01 kernel: [    1.0] old line {i:06d} " + "x" * 60
               for i in range(4000)]  # ~380 KiB: more than the 256 KiB look-back
        last = "2025-12-02T03:14:07.500000+00:00 gpu-a01 kernel: NVRM: Xid 79 before start"
        log.write_text("\n".join([*old, last]) + "\n")
        proc = subprocess.Popen(
            [sys.executable, "-I", "-", "--interval", "0.2", "--count", "8",
             "--log-root", str(host["root"]), "--kernel-log", "auto"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env(host))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(AGENT_SOURCE)
        proc.stdin.close()
        got = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [m["type"] for m in got] == ["hello", "logsource"]
        with log.open("a") as f:
            f.write("Dec  2 03:15:00 gpu-a01 kernel: NVRM: after start\n")
        got += [json.loads(x) for x in proc.stdout.read().decode().splitlines()]
        assert proc.wait(timeout=30) == 0
        s = got[1]
        assert (s["state"], s["via"]) == ("ok", "file:/var/log/kern.log")
        assert s["detail"] == "journalctl: not installed; dmesg: not installed"
        lines = [e["line"] for e in _kernel(got)]
        assert lines[-2:] == [last, "Dec  2 03:15:00 gpu-a01 kernel: NVRM: after start"]
        back = lines[:-2]
        assert all(re.fullmatch(r"Dec  1 00:00:00 gpu-a01 kernel: \[    1\.0\] old line \d{6} "
                                r"x{60}", x) for x in back)  # no cut line
        first = int(back[0].split()[9])
        assert 1000 < first < 4000  # started near the end, not at the top
        assert [int(x.split()[9]) for x in back] == list(range(first, 4000))
        assert len(back) * len(old[0]) <= 256 * 1024
        assert _kernel(got)[-2]["ts"] == T_ISO
        assert "boot" not in _kernel(got)[-1]

    def test_messages_file_keeps_only_kernel_lines(self, host: dict[str, Path]) -> None:
        log = host["root"] / "var" / "log" / "messages"
        log.parent.mkdir(parents=True)
        log.write_text("Dec  2 03:14:07 gpu-a01 systemd[1]: Started cron.\n"
                       "Dec  2 03:14:08 gpu-a01 kernel: NVRM: Xid 79\n")
        lines = _run(host, ["--kernel-log", "file"])
        assert by_type(lines, "logsource")[0]["via"] == "file:/var/log/messages"
        assert [e["line"] for e in _kernel(lines)] == [
            "Dec  2 03:14:08 gpu-a01 kernel: NVRM: Xid 79"]

    def test_the_kernels_own_sources_stay_first_and_carry_no_note(
            self, host: dict[str, Path]) -> None:
        """A syslog file is the last resort, and only it says local users can write it."""
        log = host["root"] / "var" / "log" / "syslog"
        log.parent.mkdir(parents=True)
        log.write_text("Dec  2 03:14:08 gpu-a01 kernel: NVRM: Xid 79\n")
        assert by_type(_run(host, ["--kernel-log", "auto"]), "logsource")[0]["note"] == (
            kernel_log.SYSLOG_FILE_NOTE)
        _dmesg(host)
        (src,) = by_type(_run(host, ["--kernel-log", "auto"]), "logsource")
        assert src["via"] == "dmesg" and "note" not in src
        _journal(host)
        (src,) = by_type(_run(host, ["--kernel-log", "auto"]), "logsource")
        assert src["via"] == "journalctl" and "note" not in src

    @pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file")
    def test_unreadable_kern_log_is_denied(self, host: dict[str, Path]) -> None:
        log = host["root"] / "var" / "log" / "kern.log"
        log.parent.mkdir(parents=True)
        log.write_text("x\n")
        log.chmod(0)
        s = by_type(_run(host, ["--kernel-log", "file"]), "logsource")[0]
        assert s["state"] == "denied" and "/var/log/kern.log" in s["fix"]

    def test_fix_names_each_refused_permission(self) -> None:
        klog = kernel_log.KernelLog("auto", lambda m: None, lambda p, m: None)
        klog.refused = [("journalctl", "denied", "x"), ("dmesg", "denied", "y"),
                        ("file:/var/log/kern.log", "denied", "Permission denied")]
        fix = klog.fix()
        assert fix is not None
        user = kernel_log._user_name()
        assert f"usermod -aG systemd-journal {user}" in fix
        assert "sysctl kernel.dmesg_restrict=0" in fix
        assert f"read /var/log/kern.log (usermod -aG adm {user})" in fix
        klog.refused = [("journalctl", "missing", "not installed")]
        assert klog.fix() is None and klog.state() == "unavailable"


class TestModes:
    def test_off_starts_nothing(self, host: dict[str, Path]) -> None:
        _journal(host)
        _dmesg(host)
        mark = uuid.uuid4().hex
        proc = subprocess.Popen(
            [sys.executable, "-I", "-", "--interval", "0.3", "--count", "4",
             "--log-root", str(host["root"]), "--kernel-log", "off"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env(host, mark=mark))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(AGENT_SOURCE)
        proc.stdin.close()
        got = [json.loads(proc.stdout.readline()) for _ in range(3)]
        assert [p for p in _alive_with(mark) if p != str(proc.pid)] == []  # no child at all
        got += [json.loads(x) for x in proc.stdout.read().decode().splitlines()]
        proc.wait(timeout=30)
        s = by_type(got, "logsource")
        assert [(x["state"], x["via"], x["detail"]) for x in s] == [
            ("off", None, "--kernel-log off")]
        assert _kernel(got) == []

    def test_bare_run_is_off_and_once_sends_no_logsource(self, host: dict[str, Path]) -> None:
        _journal(host)
        lines = _run(host, [], count=2)
        assert [(s["state"], s["via"]) for s in by_type(lines, "logsource")] == [("off", None)]
        assert _kernel(lines) == []
        once = _run(host, ["--once"])
        assert [m["type"] for m in once] == ["hello", "sample"]
        asked = _run(host, ["--once", "--kernel-log", "journal"])
        assert [m["type"] for m in asked][:2] == ["hello", "logsource"]
        assert _kernel(asked)[0]["cursor"] == "s=abc;i=1"

    @pytest.mark.parametrize("mode", ["auto", "off"])
    def test_simulated_host_reports_simulated_when_asked(self, mode: str) -> None:
        def run(*extra: str) -> list[dict]:
            proc = subprocess.run([sys.executable, "-I", "-", "--simulate", "xid79:6@30",
                                   "--interval", "30", "--fast", "--count", "3", *extra],
                                  input=AGENT_SOURCE, capture_output=True, check=True,
                                  timeout=30)
            return [json.loads(x) for x in proc.stdout.decode().splitlines()]

        lines = run("--kernel-log", mode)
        assert [m["type"] for m in lines][:2] == ["hello", "logsource"]
        s = lines[1]
        assert (s["state"], s["via"], s["fix"]) == ("simulated", None, None)
        assert any("Xid" in e["line"] for e in _kernel(lines))
        plain = run()  # the console's demo hosts: stream unchanged, no logsource
        assert by_type(plain, "logsource") == []
        assert any("Xid" in e["line"] for e in _kernel(plain))

    def test_console_run_defaults_to_auto_and_child_dies_with_the_agent(
            self, host: dict[str, Path]) -> None:
        """Bootstrapped (--stdin-eof-exit): auto; closing stdin ends the journalctl child."""
        _journal(host)
        mark = uuid.uuid4().hex
        args = ["--interval", "0.2", "--log-root", str(host["root"])]
        source = shipped_source(args)
        proc = subprocess.Popen(
            bootstrap_argv(sys.executable, args, len(source)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env(host, mark=mark))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(source)
        proc.stdin.flush()
        hello, src = json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())
        assert hello["type"] == "hello"
        assert (src["type"], src["state"], src["via"]) == ("logsource", "ok", "journalctl")
        children = [p for p in _alive_with(mark) if p != str(proc.pid)]
        assert children, "the fake journalctl should be running"
        t0 = time.monotonic()
        proc.stdin.close()
        proc.wait(timeout=5)
        assert time.monotonic() - t0 < 3.0
        time.sleep(0.3)
        assert [p for p in _alive_with(mark) if p in children] == []


class TestReadOnly:
    def test_no_file_is_written_anywhere_under_tmp(self, host: dict[str, Path]) -> None:
        _journal(host)
        _dmesg(host)
        log = host["root"] / "var" / "log" / "kern.log"
        log.write_text("Dec  2 03:14:08 gpu-a01 kernel: NVRM: Xid 79\n")
        before = _tree(host["tmp"])
        for mode in ("auto", "dmesg", "file", "off"):
            _run(host, ["--kernel-log", mode], count=2, FAKE_JOURNAL="hint")
        assert _tree(host["tmp"]) == before

    def test_command_lines_are_argument_lists(self) -> None:
        assert kernel_log.journal_argv(2000) == [
            "journalctl", "-k", "-o", "json", "--no-pager", "--follow", "--lines=2000"]
        assert kernel_log.journal_argv(5, "s=1;i=2 $(rm -rf /)")[-1] == (
            "--after-cursor=s=1;i=2 $(rm -rf /)")  # one argument: no shell parses it
        assert kernel_log.dmesg_argv() == ["dmesg", "-w"]

    def test_every_popen_gets_a_list_and_no_shell(
            self, host: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
        _journal(host)
        _dmesg(host)
        calls: list[tuple[object, dict]] = []

        def recorder(argv: object, **kw: object) -> None:
            calls.append((argv, kw))
            raise FileNotFoundError(2, "No such file or directory")

        monkeypatch.setenv("PATH", str(host["bin"]))
        monkeypatch.setattr(logs.subprocess, "Popen", recorder)
        sent: list[dict] = []
        klog = kernel_log.KernelLog("auto", sent.append, lambda p, m: None,
                                   log_root=str(host["root"]))
        klog.start()
        assert [c[0] for c in calls] == [kernel_log.journal_argv(2000), ["dmesg", "-w"]]
        assert all(isinstance(a, list) and not kw.get("shell") for a, kw in calls)
        assert sent[-1]["state"] == "unavailable"


def test_the_console_decodes_the_stream(host: dict[str, Path]) -> None:
    _journal(host)
    lines = _run(host, ["--kernel-log", "auto"])
    reader = MessageReader()
    msgs = reader.feed(("\n".join(json.dumps(m) for m in lines) + "\n").encode())
    assert reader.stats.garbled == reader.stats.unknown_type == 0
    src = [m for m in msgs if isinstance(m, LogSourceState)]
    assert [(s.state, s.via) for s in src] == [(LogSourceStatus.OK, "journalctl")]
    ev = [m for m in msgs if isinstance(m, LogEvent) and m.source == "kernel"]
    assert (ev[0].boot, ev[0].cursor) == ("b007b007", "s=abc;i=1")
