"""A simulated InfiniBand fabric: Debian's ``ibsim`` with ``infiniband-diags`` and ``opensm``.

``ibsim -s NETFILE`` simulates the switches and HCAs a net file describes (ibnetdiscover's
own format); ``ibsim-run CMD`` runs a libibumad tool against it (``LD_PRELOAD`` of
``libumad2sim``).  ``opensm --once`` under it assigns LIDs, so ``perfquery`` reads the
ports' counters, and ibsim's console sets counters (``PerformanceSet``) and takes links
down (``Unlink``).  Each simulator gets its own socket name (``IBSIM_SOCKNAME``), so tests
run side by side; every process started here is stopped by its pid.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

TOOLS = ("ibsim", "ibsim-run", "ibnetdiscover", "opensm", "perfquery")
PERFQUERY = {"SymbolErrorCounter": "symbol_error", "LinkErrorRecoveryCounter":
             "link_error_recovery", "LinkDownedCounter": "link_downed",
             "PortRcvErrors": "port_rcv_errors", "PortRcvRemotePhysicalErrors":
             "port_rcv_remote_physical_errors", "PortXmitDiscards": "port_xmit_discards",
             "LocalLinkIntegrityErrors": "local_link_integrity_errors",
             "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
             "PortXmitData": "port_xmit_data", "PortRcvData": "port_rcv_data",
             "PortXmitWait": "port_xmit_wait"}
"""``perfquery``'s PortCounters names -> the sysfs counter files the kernel shows them as."""


def need_ibsim() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (apt-get install ibsim-utils "
                    "infiniband-diags opensm)")


class Fabric:
    """A running simulator: run tools against it, send it console commands."""

    def __init__(self, workdir: Path, proc: subprocess.Popen[bytes], sock: str) -> None:
        self.workdir = workdir
        self.proc = proc
        self.env = {**os.environ, "IBSIM_SOCKNAME": sock, "OSM_CACHE_DIR": str(workdir)}

    def run(self, *argv: str, timeout: float = 20.0) -> str:
        """A tool under ``ibsim-run``; its output (stdout)."""
        done = subprocess.run(["ibsim-run", *argv], env=self.env, capture_output=True,
                              timeout=timeout, check=False, cwd=self.workdir)
        return done.stdout.decode("utf-8", "replace")

    def console(self, command: str) -> None:
        """One line on ibsim's console (``PerformanceSet …``, ``Unlink …``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        time.sleep(0.3)  # the console applies it between the MADs it serves

    def counters(self, lid: int, port: int = 1) -> dict[str, int] | None:
        """A port's PortCounters by LID as sysfs names them; None when it is unreachable."""
        out = self.run("perfquery", str(lid), str(port))
        found = {PERFQUERY[m.group(1)]: int(m.group(2)) for m in
                 re.finditer(r"^(\w+):\.+(\d+)$", out, re.MULTILINE) if m.group(1) in PERFQUERY}
        return found or None


@contextmanager
def ibsim_fabric(workdir: Path, net: str) -> Iterator[Fabric]:
    """Start ``ibsim -s`` on ``net`` (ibnetdiscover's format), assign LIDs with opensm."""
    need_ibsim()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "net").write_text(net)
    sock = f"rwsim{uuid.uuid4().hex[:10]}"
    proc = subprocess.Popen(["ibsim", "-s", str(workdir / "net")], cwd=workdir,
                            env={**os.environ, "IBSIM_SOCKNAME": sock},
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        fabric = Fabric(workdir, proc, sock)
        deadline = time.monotonic() + 10.0
        while "Switch" not in fabric.run("ibnetdiscover", timeout=10.0):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ibsim did not come up")
            time.sleep(0.2)
        fabric.run("opensm", "-f", str(workdir / "opensm.log"), "--once", timeout=60.0)
        yield fabric
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
