"""rigwatch against its peer, gpustat-web, over the same OpenSSH sshd, in one run.

For each fleet size, one after the other against one real sshd on 127.0.0.1
(``tests/support/sshd.py``), each console in its own process measured from ``/proc`` (its
whole process tree, user+sys) over the same window length:

* **gpustat-web 0.3.0** (installed into its own venv under the temp directory by pip on
  first use), run through its own ``main()`` (its web page served on 127.0.0.1, not
  0.0.0.0) with ``--interval 1 --exec 'gpustat --json'``: one asyncssh connection per
  host and ``conn.run`` per poll.  Host key checking stays on
  (its ``HOME`` holds the client key and a known_hosts naming the sshd).  The exec'd
  command puts a fake ``gpustat`` first on ``PATH`` on the host side: ``cat`` of one 8-GPU
  document in gpustat 1.1.1's ``--json`` shape (``GPUStatCollection.print_json``:
  ``indent=4``, ``query_time`` in isoformat, per GPU ``index, uuid, name, temperature.gpu,
  fan.speed, utilization.gpu/enc/dec, power.draw, enforced.power.limit, memory.used/total,
  processes``), appending one byte to a counter per call: delivered samples.  gpustat-web
  parses nothing; it keeps the text until a browser asks (none does here).
* **rigwatch**: the real console (``bench_fleet.py``'s headless ``tui.cli.main`` child) with
  an inventory of N hosts at that sshd running the real agent (``simulate: [healthy]``,
  1 Hz); delivered samples are read from its fleet state (each host's newest ``seq``).

Reported per size: console CPU per host-sample for each, the delivered rate per host, and
the ratio gpustat-web / rigwatch.  Not in the test suite (minutes).

    python tests/bench/bench_peer.py [--hosts 32,64] [--seconds 20] [--user NAME]

``--user``: both consoles log in as NAME (an existing account that is not locked: this
sshd runs without PAM and refuses a locked one; e.g. ``useradd -m rwpeer && usermod -p '*'
rwpeer``; the sshd takes the same key for any user).  A session runs its command through
the user's login shell, and bash sources ``~/.bashrc`` when sshd starts it: where the
bench's own user has a heavy one (the lead's VM runs ``pyenv init`` in root's, under a
lock), every poll of gpustat-web paid it and the sessions queued on the lock.  A plain
account measures the consoles, not that.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_fleet import Child, tree_cpu  # noqa: E402
from tests.support.sshd import MARK, free_port, keygen, make_sshd  # noqa: E402

VENV = Path(tempfile.gettempdir()) / "rigwatch-bench-gpustat-web"
"""Outside the checkout (kept between runs): nothing in the repository ignores a venv."""
PEER = "gpustat-web==0.3.0"
HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"


LOOPBACK_MAIN = (
    "import sys\nfrom aiohttp import web\nrun = web.run_app\n"
    "web.run_app = lambda *a, **k: run(*a, **{**k, 'host': '127.0.0.1'})\n"
    "sys.argv[0] = 'gpustat-web'\nfrom gpustat_web.app import main\nmain()\n")
"""gpustat-web's own ``main()``, its web page served on loopback only."""


def peer_python() -> Path:
    """gpustat-web's own interpreter (a venv made and filled by pip on first use)."""
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", PEER], check=True)
    return py


def gpustat_document(host: str = "gpu-node") -> str:
    """One 8-GPU ``gpustat --json`` answer as gpustat 1.1.1 prints it."""
    gpus = []
    for i in range(8):
        procs = [{"username": "train", "command": "python", "full_command": [
            "python", "-m", "torch.distributed.run", "--nproc_per_node=8", "train.py",
            "--config", "configs/llama-70b.yaml"], "gpu_memory_usage": 71234 + i,
            "cpu_percent": 101.3, "cpu_memory_usage": 18_874_368_000, "pid": 41230 + i}]
        gpus.append({"index": i, "uuid": f"GPU-5f1c{i:04x}-1d2e-4c3b-9a8f-0e1d2c3b4a{i:02d}",
                     "name": "NVIDIA H100 80GB HBM3", "temperature.gpu": 61 + i % 5,
                     "fan.speed": None, "utilization.gpu": 97, "utilization.enc": 0,
                     "utilization.dec": 0, "power.draw": 642, "enforced.power.limit": 700,
                     "memory.used": 72015, "memory.total": 81559, "processes": procs})
    doc = {"hostname": host, "driver_version": "550.90.07",
           "query_time": datetime.datetime(2026, 12, 3, 22, 0, 0, 123456).isoformat(),
           "gpus": gpus}
    return json.dumps(doc, indent=4) + "\n"


def fake_gpustat(root: Path) -> tuple[Path, Path]:
    """A ``gpustat`` script (cat of the document, one byte per call to the counter), which
    any login user may run (``--user``): the counter is writable by all."""
    fakebin, counter = root / "fakebin", root / "gpustat.calls"
    fakebin.mkdir()
    (root / "gpustat.json").write_text(gpustat_document())
    script = fakebin / "gpustat"
    script.write_text(f"#!/bin/sh\nprintf x >> {counter}\nexec cat {root / 'gpustat.json'}\n")
    script.chmod(0o755)
    counter.write_text("")
    counter.chmod(0o666)
    return fakebin, counter


def session_pids() -> list[int]:
    """Every process a session of this run's sshd started, re-parented or not.

    Marked by the environment the sshd sets (``tests/support/sshd.py``), so a shell left
    running after its console quit is found wherever it was re-parented to.
    """
    me, mark, pids = os.getpid(), f"{MARK}={os.getpid()}".encode(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if mark in env:
            pids.append(int(entry.name))
    return pids


def reap_sessions(limit_s: float = 30.0, grace_s: float = 3.0, own_s: float = 5.0) -> int:
    """Stop what the last console's sessions left running, so the next run starts quiet.

    At 128 hosts gpustat-web left hundreds of the fake ``gpustat`` shells behind (load
    average 147), and the next console's figures measured them, not itself.  SIGTERM
    first, SIGKILL only after ``grace_s``: a shell killed outright can leave a lock behind.
    On the lead's VM each session's bash sources a ``.bashrc`` that runs ``pyenv init``; a
    shell killed during its ``pyenv rehash`` left ``~/.pyenv/shims/.pyenv-shim`` behind, and
    every later session (every test's sshd too) then hung before running its command.

    First ``own_s`` seconds with no signal: a session winding down after its console quit
    (the agent ends on its stdin's EOF, sshd on the connection's close) is not counted.
    What is counted (``left_running``) is what was still there after that and had to be
    stopped.
    """
    t_own = time.monotonic()
    while session_pids() and time.monotonic() - t_own < own_s:
        time.sleep(0.2)
    stopped: set[int] = set()
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        pids = session_pids()
        if not pids:
            break
        sig = signal.SIGTERM if time.monotonic() - t0 < grace_s else signal.SIGKILL
        for pid in pids:
            try:
                os.kill(pid, sig)
                stopped.add(pid)
            except OSError:  # gone already
                pass
        time.sleep(0.2)
    return len(stopped)


def stop_console(proc: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill: gpustat-web once failed to stop within 10 s at 128 hosts."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def calls(counter: Path) -> int:
    return counter.stat().st_size


def run_gpustat_web(n: int, port: int, root: Path, client: Path, known: Path,
                    fakebin: Path, counter: Path, seconds: float,
                    settle: float, user: str = "root") -> dict[str, Any]:
    home = root / f"gw-home-{n}"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_bytes(client.read_bytes())
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    (home / ".ssh" / "known_hosts").write_text(known.read_text())
    # gpustat-web drops a ``user@`` from its hosts: asyncssh logs in as ``getpass``'s user
    env = dict(os.environ, HOME=str(home), USER=user, LOGNAME=user)
    cmd = f"PATH={fakebin}:$PATH gpustat --json"
    argv = [str(peer_python()), "-c", LOOPBACK_MAIN, "--port", str(free_port()),
            "--interval", "1", "--exec", cmd, *[f"127.0.0.1:{port}"] * n]
    counter.write_text("")  # this run's calls only
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=root)
    try:
        t0 = time.monotonic()
        while calls(counter) < n and time.monotonic() - t0 < 120:
            time.sleep(0.05)
        first = time.monotonic() - t0
        time.sleep(settle)
        c0, k0, w0 = tree_cpu(proc.pid), calls(counter), time.monotonic()
        time.sleep(seconds)
        cpu, got, wall = tree_cpu(proc.pid) - c0, calls(counter) - k0, time.monotonic() - w0
    finally:
        stop_console(proc)
        left = reap_sessions()
    return summary(cpu, got, wall, n) | {"first_round_s": round(first, 2),
                                         "left_running": left}


def summary(cpu: float, samples: int, wall: float, n: int) -> dict[str, Any]:
    return {"samples": samples, "hz_per_host": round(samples / wall / n, 3),
            "console_cpu_pct": round(100 * cpu / wall, 2),
            "console_ms_per_sample": round(1000 * cpu / max(samples, 1), 3)}


def run_rigwatch(n: int, port: int, root: Path, client: Path, known: Path,
                 seconds: float, settle: float, user: str = "root") -> dict[str, Any]:
    inv = root / f"rw-{n}.yaml"
    inv.write_text(json.dumps({
        "defaults": {"address": "127.0.0.1", "port": port, "user": user,
                     "identity": str(client), "known_hosts": str(known),
                     "host_key_checking": "strict", "interval": 1, "python": HOST_PYTHON,
                     "simulate": ["healthy"]},
        "hosts": [f"h{i:03d}" for i in range(n)]}))
    env = dict(os.environ, HOME=str(root), XDG_CONFIG_HOME=str(root / "config"),
               XDG_DATA_HOME=str(root / "data"), XDG_STATE_HOME=str(root / "state"))
    console = Child([sys.executable, str(REPO / "tests" / "bench" / "bench_fleet.py"),
                     "--console-child", "--inventory", str(inv), "--presses", "1",
                     "--gap", "0"], env)
    try:
        ev = console.read(180)
        first = ev["t"] - console.spawned
        time.sleep(settle)
        console.say("count")
        s0, c0, w0 = console.read(10)["seq_sum"], tree_cpu(console.pid), time.monotonic()
        time.sleep(seconds)
        cpu = tree_cpu(console.pid) - c0
        console.say("count")
        got, wall = console.read(10)["seq_sum"] - s0, time.monotonic() - w0
    finally:
        console.stop()
        left = reap_sessions()
    return summary(cpu, got, wall, n) | {"all_streaming_s": round(first, 2),
                                         "left_running": left}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", default="32,64")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--settle", type=float, default=3.0)
    p.add_argument("--user", default="root",
                   help="the account both consoles log in as (see the module's docstring)")
    args = p.parse_args()
    peer_python()
    root = Path(tempfile.mkdtemp(prefix="rw-peer-"))
    root.chmod(0o755)  # the fake gpustat and its document, for a ``--user`` session
    client, known = root / "client", root / "known_hosts"
    keygen(client)
    sshd = make_sshd(root / "sshd", client, known)
    fakebin, counter = fake_gpustat(root)
    results: dict[str, Any] = {}
    try:
        for n in (int(x) for x in args.hosts.split(",")):
            print(f"  {n} hosts: gpustat-web", file=sys.stderr)
            gw = run_gpustat_web(n, sshd.port, root, client, known, fakebin, counter,
                                 args.seconds, args.settle, args.user)
            print(f"  {n} hosts: rigwatch", file=sys.stderr)
            rw = run_rigwatch(n, sshd.port, root, client, known, args.seconds, args.settle,
                              args.user)
            results[f"hosts_{n}"] = {
                "hosts": n, "gpustat_web": gw, "rigwatch": rw,
                "console_ratio": round(gw["console_ms_per_sample"]
                                       / max(rw["console_ms_per_sample"], 1e-6), 2)}
    finally:
        sshd.stop()
    out = {"bench": "peer", "peer": PEER, "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                  time.gmtime()),
           "machine": platform.machine(), "cores": os.cpu_count(), "seconds": args.seconds,
           "user": args.user,
           "gpustat_json_bytes": len(gpustat_document()), "results": results}
    print(json.dumps(out))
    print("peer: " + "; ".join(
        f"{r['hosts']} hosts: gpustat-web {r['gpustat_web']['console_ms_per_sample']} ms "
        f"console CPU per host-sample at {r['gpustat_web']['hz_per_host']} Hz/host, rigwatch "
        f"{r['rigwatch']['console_ms_per_sample']} ms at {r['rigwatch']['hz_per_host']} Hz/host "
        f"({r['console_ratio']}x)" for r in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
