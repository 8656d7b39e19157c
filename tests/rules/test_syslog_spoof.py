"""Kernel lines only from the kernel (review finding 6).

When the agent falls back to a syslog file (/var/log/kern.log, messages, syslog), a line is
a kernel line only when its syslog program field is ``kernel``.  Before the fix the agent
searched ``\\skernel:\\s`` anywhere in the line, so ``logger -t alice 'kernel: NVRM: Xid …'``
became a CRITICAL Xid 79 ("Reboot the node") on the console.  The lines below are shaped
after what rsyslog writes for ``logger`` (RFC 3164 traditional, the ISO-timestamp
RSYSLOG_FileFormat, and RFC 5424); each runs end to end: real agent → wire → fleet state.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from probes.agent.kernel_log import SYSLOG_FILE_NOTE, from_kernel
from probes.analysis.incident import TriageRecord, review
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.triage import Code, Step
from probes.wire.protocol import MessageReader
from probes.wire.samples import LogSourceState
from tests.conftest import AGENT_SOURCE

XID = "NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus."
FORGED = [
    f"Dec  3 16:59:28 gpu-a01 alice: kernel: {XID}",  # logger -t alice 'kernel: NVRM: …'
    f"Dec  3 16:59:28 gpu-a01 alice: build done kernel: {XID}",
    f"Dec  3 16:59:28 gpu-a01 alice[4242]: kernel: {XID}",
    f"2025-12-02T03:14:07.500000+00:00 gpu-a01 alice: kernel: {XID}",
    f"<13>1 2025-12-02T03:14:07.5Z gpu-a01 alice - - - kernel: {XID}",
    f"Dec  3 16:59:28 gpu-a01 kernelx: {XID}",
    f"kernel: {XID}",
]
REAL = [
    f"Dec  3 16:59:29 gpu-a01 kernel: {XID}",
    f"2025-12-02T03:14:08.500000+00:00 gpu-a01 kernel: [ 5.1] {XID}",
    f"<4>1 2025-12-02T03:14:09.5Z gpu-a01 kernel - - - {XID}",
]


@pytest.mark.parametrize("line", FORGED)
def test_kernel_inside_another_programs_message_is_not_the_kernel(line: str) -> None:
    assert not from_kernel(line)


@pytest.mark.parametrize("line", REAL)
def test_the_kernels_own_lines_are(line: str) -> None:
    assert from_kernel(line)


def _agent_on(tmp_path: Path, name: str, lines: list[str]) -> list[bytes]:
    root = tmp_path / "root"
    (root / "var" / "log").mkdir(parents=True)
    (root / "var" / "log" / name).write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [sys.executable, "-I", "-", "--interval", "0.1", "--count", "3", "--kernel-log",
         "file", "--log-root", str(root), "--hostname", "gpu-a01"],
        input=AGENT_SOURCE, capture_output=True, timeout=30, cwd=tmp_path, env={"PATH": ""},
        check=False)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode()
    return proc.stdout.splitlines(keepends=True)


def _fleet(raw: list[bytes]) -> FleetState:
    fleet = FleetState([HostSpec("gpu-a01")])
    reader = MessageReader()
    for msg in reader.feed(b"".join(raw)):
        fleet.apply("gpu-a01", msg, now=0.0)
    fleet.scan_logs()  # the owner's write before a read (the app's tick)
    assert reader.stats.garbled == 0
    return fleet


@pytest.mark.parametrize("name", ["syslog", "messages", "kern.log"])
def test_forged_kernel_lines_give_no_finding_end_to_end(tmp_path: Path, name: str) -> None:
    raw = _agent_on(tmp_path, name, FORGED)
    kernel = [json.loads(x) for x in raw if b'"source": "kernel"' in x and b'"event"' in x]
    assert kernel == []
    host = _fleet(raw).hosts["gpu-a01"]
    assert not [f for f in host.findings() if f.code == Code.XID]


def test_a_real_kernel_xid_still_is_a_finding(tmp_path: Path) -> None:
    raw = _agent_on(tmp_path, "syslog", [*FORGED, REAL[0]])
    host = _fleet(raw).hosts["gpu-a01"]
    (xid,) = [f for f in host.findings() if f.code == Code.XID]
    assert xid.count == 1 and xid.step is Step.SYSLOG


def test_the_console_says_the_syslog_file_is_writable_by_local_users(tmp_path: Path) -> None:
    from tui.views.triage_view import host_view

    raw = _agent_on(tmp_path, "syslog", REAL[:1])
    fleet = _fleet(raw)
    host = fleet.hosts["gpu-a01"]
    assert isinstance(host.logs.source, LogSourceState)
    assert (host.logs.source.via, host.logs.source.note) == ("file:/var/log/syslog",
                                                           SYSLOG_FILE_NOTE)
    assert "local users can write to" in host.kernel_log_summary()
    steps = review(host.findings(), [host_view(host)], TriageRecord())
    (syslog,) = [s for s in steps if s.step is Step.SYSLOG]
    assert any("file:/var/log/syslog" in c and "local users can write to" in c
               for c in syslog.checked)


def _logger_lines(fmt: str, *calls: tuple[str, str]) -> list[str]:
    """What util-linux ``logger`` really sends (to a UDP socket on 127.0.0.1), PRI removed
    for RFC 3164 as rsyslog's traditional file format writes it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    port = str(sock.getsockname()[1])
    out = []
    with sock:
        for tag, msg in calls:
            subprocess.run(["logger", fmt, "-d", "-n", "127.0.0.1", "-P", port, "-t", tag, msg],
                           check=True, timeout=10)
            line = sock.recv(65536).decode()
            out.append(re.sub(r"^<\d+>", "", line) if fmt == "--rfc3164" else line)
    return out


@pytest.mark.skipif(shutil.which("logger") is None, reason="util-linux logger is not installed")
@pytest.mark.parametrize("fmt", ["--rfc3164", "--rfc5424"])
def test_real_logger_lines_from_another_program_give_no_finding(tmp_path: Path, fmt: str) -> None:
    forged = _logger_lines(fmt, ("alice", f"kernel: {XID}"), ("alice", f"build done kernel: {XID}"))
    assert all("alice" in x and f"kernel: {XID}" in x for x in forged)
    raw = _agent_on(tmp_path, "syslog", forged)
    assert not [f for f in _fleet(raw).hosts["gpu-a01"].findings() if f.code == Code.XID]
    # What no syslog file can tell apart, and why the console says the source is forgeable:
    # a local user who names the program "kernel" writes the kernel's own line shape.
    (same,) = _logger_lines(fmt, ("kernel", XID))
    assert from_kernel(same)


async def test_the_note_reaches_the_triage_screen(tmp_path: Path) -> None:
    """The real path: agent (local transport) → session → fleet → the triage screen's
    system-log step, which says how the kernel log was read and that it is forgeable."""
    from probes.sources.agents import AgentFleetBackend
    from tests.support.tui_fakes import wait_until
    from tui.app import make_app
    from tui.console_options import ConsoleOptions
    from tui.screens.triage import TriageScreen
    from widgets.step_detail import StepDetail

    root = tmp_path / "root"
    (root / "var" / "log").mkdir(parents=True)
    (root / "var" / "log" / "syslog").write_text("\n".join([*FORGED, REAL[0]]) + "\n")
    spec = HostSpec("gpu-a01", interval_s=0.5,
                    extra_args=("--kernel-log", "file", "--log-root", str(root)))
    app = make_app(AgentFleetBackend([spec]), ConsoleOptions(demo=False))
    app.reports_dir = tmp_path / "reports"
    async with app.run_test(size=(160, 48)) as pilot:
        host = app.fleet.hosts["gpu-a01"]
        await wait_until(pilot, lambda: host.logs.source is not None, timeout_s=20)
        await wait_until(pilot, lambda: any(f.code == Code.XID for f in host.findings()),
                         timeout_s=10)
        (xid,) = [f for f in host.findings() if f.code == Code.XID]
        assert xid.count == 1  # the real kernel line only
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await pilot.press("2")
        app.refresh_view()
        shown = lambda: str(app.screen.query_one(StepDetail).render())  # noqa: E731
        await wait_until(pilot, lambda: "local users can write to" in shown(), timeout_s=10)
        assert "file:/var/log/syslog" in shown()
        await pilot.press("q")  # the backend stops its agent inside the loop
