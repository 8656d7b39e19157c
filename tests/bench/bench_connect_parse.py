"""A collector's per-host start-up parsing at 1024 hosts, before/after, in one process (issue 38,
item 5; session 10).

Two things a collector does once per host while the fleet connects, each timed the old way
and the new way alternating, ``--passes`` passes over ``--hosts`` hosts (CPU, ``process_time``):

* ``known_hosts``: what the connection is checked against, from a fleet-sized file (a line
  per host): asyncssh's own ``read_known_hosts(path)`` (what it did for every connection given
  the path) against ``known_hosts_once.known_hosts(path)`` (read, compared, parsed once);
* ``hello``: the host's hello through the collector's reader (``MessageReader.feed``), with a
  hello's PCIe links and NIC ports built and shared field by field (the reference copy,
  ``tests/wire/hello_links_before_s10``) against looked up by their typed values.

    python tests/bench/bench_connect_parse.py [--hosts 1024] [--passes 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import asyncssh

from probes.transport import known_hosts_once
from probes.wire import decode_fields
from probes.wire.protocol import MessageReader
from tests.bench.bench_start_decode import _lines
from tests.wire.hello_links_before_s10 import (
    decode_link_before,
    decode_nic_port_before,
)


def _known_hosts_file(folder: Path, hosts: int) -> str:
    key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    path = folder / "known_hosts"
    path.write_text("".join(f"[10.0.{i >> 8}.{i & 255}]:22 {key}\n" for i in range(hosts)))
    return str(path)


def _per_host(fn: Callable[[int], object], hosts: int) -> float:
    t = time.process_time()
    for i in range(hosts):
        fn(i)
    return (time.process_time() - t) / hosts * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    n = args.hosts
    hellos = [h for h, _ in _lines(n)]
    got: dict[str, list[float]] = {k: [] for k in (
        "known_hosts_asyncssh_us", "known_hosts_once_us", "hello_before_us", "hello_us")}
    new_link, new_port = decode_fields._decode_link, decode_fields._decode_nic_port
    with tempfile.TemporaryDirectory() as d:
        path = _known_hosts_file(Path(d), n)
        for p in range(args.passes):
            for way in ((0, 1) if p % 2 == 0 else (1, 0)):
                if way == 0:
                    got["known_hosts_asyncssh_us"].append(_per_host(
                        lambda _i: asyncssh.read_known_hosts(path), n))
                    decode_fields._decode_link = decode_link_before
                    decode_fields._decode_nic_port = decode_nic_port_before
                    got["hello_before_us"].append(_per_host(
                        lambda i: MessageReader().feed(hellos[i]), n))
                    decode_fields._decode_link, decode_fields._decode_nic_port = new_link, new_port
                else:
                    known_hosts_once._PARSED.clear()
                    got["known_hosts_once_us"].append(_per_host(
                        lambda _i: known_hosts_once.known_hosts(path), n))
                    got["hello_us"].append(_per_host(
                        lambda i: MessageReader().feed(hellos[i]), n))
    out: dict[str, object] = {k: round(statistics.median(v), 1) for k, v in got.items()}
    out["passes"] = {k: [round(x, 1) for x in v] for k, v in got.items()}
    out["hosts"] = n
    out["load1"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
