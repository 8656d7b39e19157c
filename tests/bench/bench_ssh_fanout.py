"""SSH fan-out: N hosts over a real loopback sshd, streaming vs exec-per-poll, in one run.

Measures the time until every host streams, and the console's CPU (user+sys of this
process) per host-sample for (a) rigwatch's streaming agents and (b) the pattern other
tools use: one exec of the agent with ``--once`` per host per interval over kept
connections.  Both decode what arrives into typed samples with the same reader, so the
comparison is of the transport patterns, not of parsing.  Host-side CPU (sshd, shells,
agents: everything but this process) is the machine's busy time over the window minus
the console's own; sshd and the console share this machine, so close the other work
before trusting it.

    python tests/bench/bench_ssh_fanout.py [--quick] [--hosts 32,64] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import asyncssh  # noqa: E402

from probes.config.fleet import HostSpec, SshOptions  # noqa: E402
from probes.sources.agents import AgentFleetBackend  # noqa: E402
from probes.transport.bootstrap import shipped_source  # noqa: E402
from probes.wire.events import SessionItem  # noqa: E402
from probes.wire.protocol import MessageReader  # noqa: E402
from probes.wire.samples import HostSample  # noqa: E402
from tests.support.sshd import keygen, make_sshd  # noqa: E402

HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat), all cores."""
    vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(vals) - vals[3] - vals[4]) / os.sysconf("SC_CLK_TCK")


def specs(n: int, port: int, key: Path, known: Path, interval: float) -> list[HostSpec]:
    ssh = SshOptions(address="127.0.0.1", port=port, user="root", identity=str(key),
                     known_hosts=str(known), keepalive_interval_s=5.0)
    return [HostSpec(name=f"h{i:03d}", transport="ssh", python=HOST_PYTHON, interval_s=interval,
                     simulate=("healthy",), seed=i, ssh=ssh) for i in range(n)]


async def streaming(hosts: list[HostSpec], seconds: float) -> dict[str, float]:
    samples = 0
    first: dict[str, float] = {}
    t0 = time.monotonic()

    def emit(host: str, item: SessionItem) -> None:
        nonlocal samples
        if type(item).__name__ == "HostSample":
            samples += 1
            first.setdefault(host, time.monotonic() - t0)

    task = asyncio.create_task(AgentFleetBackend(hosts).run(emit))
    while len(first) < len(hosts) and time.monotonic() - t0 < 60:
        await asyncio.sleep(0.02)
    all_streaming = time.monotonic() - t0
    cpu0, busy0, n0 = self_cpu(), machine_busy(), samples
    await asyncio.sleep(seconds)
    cpu, n = self_cpu() - cpu0, samples - n0
    host_cpu = machine_busy() - busy0 - cpu
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return {"all_streaming_s": round(all_streaming, 3), "host_samples": n,
            "console_cpu_ms_per_sample": round(1000 * cpu / max(n, 1), 4),
            "host_cpu_ms_per_sample": round(1000 * host_cpu / max(n, 1), 4)}


async def exec_per_poll(hosts: list[HostSpec], seconds: float) -> dict[str, float]:
    """One connection per host (kept), one exec of ``agent --once`` per interval."""
    o = hosts[0].ssh
    conns = await asyncio.gather(*(asyncssh.connect(
        "127.0.0.1", o.port, username="root", client_keys=[o.identity],
        known_hosts=o.known_hosts, config=None) for _ in hosts))
    source = shipped_source(hosts[0].agent_args(once=True))
    samples = 0

    async def poll(spec: HostSpec, conn: asyncssh.SSHClientConnection) -> None:
        nonlocal samples
        # The classic pattern: ``python3 - < agent.py`` per poll (stdin EOF ends the source).
        cmd = shlex.join([HOST_PYTHON, "-u", "-", *spec.agent_args(once=True)])
        while True:
            start = time.monotonic()
            result = await conn.run(cmd, input=source, encoding=None, timeout=30)
            # decoded as streaming's are: both patterns end with typed samples
            reader = MessageReader()
            samples += sum(isinstance(m, HostSample) for m in reader.feed(result.stdout or b""))
            await asyncio.sleep(max(0.0, spec.interval_s - (time.monotonic() - start)))

    cpu0, busy0 = self_cpu(), machine_busy()
    tasks = [asyncio.create_task(poll(s, c)) for s, c in zip(hosts, conns, strict=True)]
    await asyncio.sleep(seconds)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    cpu = self_cpu() - cpu0
    host_cpu = machine_busy() - busy0 - cpu
    for c in conns:
        c.close()
    return {"host_samples": samples,
            "console_cpu_ms_per_sample": round(1000 * cpu / max(samples, 1), 4),
            "host_cpu_ms_per_sample": round(1000 * host_cpu / max(samples, 1), 4)}


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--hosts", default="32,64", help="fleet sizes, comma-separated")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--interval", type=float, default=1.0)
    args = p.parse_args()
    sizes = [int(x) for x in args.hosts.split(",")]
    if args.quick:
        sizes, args.seconds = [4], 3.0
    root = Path(tempfile.mkdtemp(prefix="rw-bench-"))
    key = root / "client"
    keygen(key)
    known = root / "known_hosts"
    sshd = make_sshd(root / "sshd", key, known)
    results: dict[str, Any] = {}
    try:
        for n in sizes:
            hosts = specs(n, sshd.port, key, known, args.interval)
            stream = await streaming(hosts, args.seconds)
            polled = await exec_per_poll(hosts, args.seconds)
            results[f"hosts_{n}"] = {
                "hosts": n, "streaming": stream, "exec_per_poll": polled,
                "console_ratio": round(polled["console_cpu_ms_per_sample"] / max(
                    stream["console_cpu_ms_per_sample"], 1e-6), 1),
                "host_ratio": round(polled["host_cpu_ms_per_sample"] / max(
                    stream["host_cpu_ms_per_sample"], 1e-6), 1)}
    finally:
        sshd.stop()
    out = {"bench": "ssh-fanout", "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
           "machine": platform.machine(), "seconds": args.seconds,
           "interval_s": args.interval, "quick": args.quick, "results": results}
    print(json.dumps(out))
    print("ssh fan-out: " + "; ".join(
        f"{r['hosts']} hosts streaming after {r['streaming']['all_streaming_s']} s, console "
        f"{r['streaming']['console_cpu_ms_per_sample']} ms CPU per host-sample streaming vs "
        f"{r['exec_per_poll']['console_cpu_ms_per_sample']} ms exec-per-poll "
        f"({r['console_ratio']}x; host side {r['host_ratio']}x)" for r in results.values()))


if __name__ == "__main__":
    asyncio.run(main())
