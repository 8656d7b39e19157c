"""A real OpenSSH sshd on 127.0.0.1 for tests, with its own keys, config and known_hosts.

Nothing outside the given folder is touched except ``/run/sshd`` (sshd's privilege
separation directory, which must exist).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, capture_output=True)


@dataclass
class Sshd:
    """One running sshd; ``known_hosts`` already trusts it."""

    root: Path
    port: int
    client_key: Path
    known_hosts: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host_key(self) -> Path:
        return self.root / "host_ed25519"

    def start(self) -> None:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        config = self.root / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"PidFile {self.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\nPermitRootLogin prohibit-password\nAllowTcpForwarding yes\n"
            "LogLevel ERROR\nMaxStartups 200:30:400\nMaxSessions 200\n"
            f"SetEnv {MARK}={os.getpid()}\n")
        self.proc = subprocess.Popen([SSHD, "-f", str(config), "-D", "-e"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


def make_sshd(root: Path, client_key: Path, known_hosts: Path, port: int | None = None) -> Sshd:
    """Generate a host key, authorise ``client_key``, record the host in ``known_hosts``."""
    root.mkdir(parents=True, exist_ok=True)
    d = Sshd(root, port or free_port(), client_key, known_hosts)
    keygen(d.host_key)
    (root / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
    pub = Path(f"{d.host_key}.pub").read_text().split()
    with known_hosts.open("a") as f:
        f.write(f"[127.0.0.1]:{d.port} {pub[0]} {pub[1]}\n")
    d.start()
    return d


MARK = "RIGWATCH_TEST_SSHD"
"""Set by every sshd started here to the starting process's pid, for all its sessions."""


def agent_pids() -> list[int]:
    """PIDs of agents started by the bootstrap through an sshd this process started.

    Marked by environment, not by ancestry: an agent its session left behind has been
    re-parented, and finding those is the point.  Agents of other processes' sshds (a
    benchmark running beside the tests) are not ours to count.
    """
    out = subprocess.run(["pgrep", "-f", "rigwatch-agent"], capture_output=True, text=True)
    me = os.getpid()
    mark = f"{MARK}={me}".encode()
    pids = []
    for p in out.stdout.split():
        try:
            env = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
        except OSError:  # gone already
            continue
        if int(p) != me and mark in env:
            pids.append(int(p))
    return pids
