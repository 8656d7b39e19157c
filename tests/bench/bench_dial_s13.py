"""A collector's dials at start-up, with and without the literal-address path (#38 item 5).

A banner server in a child process; this process dials ``--hosts`` connections, ``--gate``
at a time (the sessions' connect gate), to 127.0.0.1 through ``probes.transport.dial`` and
closes each; its CPU (all threads: asyncio's resolver runs on worker threads) per dial.
``base`` sends every host to ``getaddrinfo`` as before; ``new`` is the code as it is.
Runs alternate in one process.

    python tests/bench/bench_dial_s13.py [--hosts 1024] [--runs 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from probes.transport import dial

SERVER = r"""
import asyncio, sys
async def banner(r, w):
    w.write(b"SSH-2.0-bench\r\n")
    try:
        await r.read()
    except OSError:
        pass
    finally:
        w.close()
async def main():
    s = await asyncio.start_server(banner, "127.0.0.1", 0, backlog=4096)
    print(s.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


async def _storm(port: int, hosts: int, gate: int) -> float:
    sem = asyncio.Semaphore(gate)

    async def one() -> None:
        async with sem:
            sock = await dial.dial("127.0.0.1", port, 10.0)
            sock.close()

    c = time.process_time()
    await asyncio.gather(*(one() for _ in range(hosts)))
    return (time.process_time() - c) / hosts * 1e6


def _unresolved(_host: str, _port: int) -> list[dial.AddrInfo] | None:
    return None  # every host to getaddrinfo, as before


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--gate", type=int, default=32)
    ap.add_argument("--runs", type=int, default=6)
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    literal = dial.literal_address
    out: dict[str, list[float]] = {"base": [], "new": []}
    try:
        for _ in range(args.runs):
            for variant in ("base", "new"):
                dial.__dict__["literal_address"] = _unresolved if variant == "base" else literal
                out[variant].append(round(asyncio.run(_storm(port, args.hosts, args.gate)), 1))
    finally:
        dial.__dict__["literal_address"] = literal
        server.kill()
    lower = sum(n < b for b, n in zip(out["base"], out["new"], strict=True))
    print(json.dumps({"bench": "dial_s13", "hosts": args.hosts, "us_per_dial": out,
                      "new_lower": f"{lower} of {args.runs}", "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
