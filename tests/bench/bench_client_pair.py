"""Two SSH clients of N stand-in hosts each, running AT ONCE, their CPU read in the same windows.

``bench_collector_ab`` swaps code inside one collector; it cannot swap what is fixed at a
session's start (the channel's class, the connection's options) nor compare a collector with
the floor (``bench_fleet``'s bare asyncssh client) in the same seconds: the floor's figure
came from other windows, minutes apart, on a VM whose load moves ±10-15 %.  Here both
clients run side by side against one ``standin_server.py`` (2N hosts, N each), and every
``--slice`` seconds the bench reads both processes' CPU (``/proc/PID/task/*/schedstat``).
Each host sends one sample a second from its start, so both clients get the same host-samples
per window (N a second), at evenly spread points of the second (the server's ``--spread``:
else each client's phases are those of its connects, and a client whose hosts tick together
wakes less often: 0.78 in an A/A null run without it); each window's ratio B/A is one
pair.  ``--a X --b X`` is the null check (the ratios' median should be ~1).

A client is one of:

* ``floor``: ``bench_fleet``'s floor (``SSHClientSession``, split + ``orjson.loads``);
* ``floor+coN``: the floor on a loop coalescing its wakes, a gap of N ms
  (``probes.transport.coalesce``);
* ``push``: the product's ``PushProcess`` channel (``create_session(PushProcess)``, the
  source written to its stdin and drained, ``push_to`` a sink doing the floor's work), plus
  any of ``+ka`` (the product's keepalive options and ``lazy_keepalive``), ``+stall`` (a
  ``_StallWatch`` around the read), ``+stderr`` (``StderrTail`` on the channel's stderr),
  ``+trim`` (``trim_after_login``);
* ``session``: the product's own sessions (``SessionFleet``, ``SshTransport``, stall
  watch, keepalive: all of it) with a reader doing the floor's work (no decode, no relay);
* ``collector:SET``: a real collector process (``collector_worker``: sessions, readers,
  relay, its frames read and dropped here) under ``bench_collector_ab``'s wrapper with
  ``tests/bench/ab_pair_s12.py``'s set ``SET`` installed (``base``: the product as is;
  ``floorlike``: the floor's handler in ``PushProcess.data_received``);
  ``collector:SET@FILE`` takes the set from another variants file (``ab_coll14.py``).

    python tests/bench/bench_client_pair.py --hosts 128 --a floor --b collector:floorlike
        [--slice 5] [--windows 12]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_collector_ab import WRAPPER, cpu_ns  # noqa: E402
from tests.bench.bench_fleet import Child, write_fleet  # noqa: E402
from tests.support.sshd import free_port, keygen  # noqa: E402

HERE = Path(__file__).resolve().parent


# ---- a floor-like client (child process) ----------------------------------------------------

async def client_child(args: argparse.Namespace) -> None:
    import asyncssh
    import orjson

    from probes.config.inventory import load_inventory
    from probes.transport.bootstrap import bootstrap_command, shipped_source
    from probes.transport.session import _StallWatch
    from probes.transport.ssh import CIPHERS
    from probes.transport.ssh_keepalive import lazy_keepalive
    from probes.transport.ssh_push import PushProcess
    from probes.transport.ssh_trim import trim_after_login
    from probes.transport.stderr_tail import StderrTail

    specs = list(load_inventory(Path(args.inventory)).hosts)[args.first::2][:args.hosts]
    base, *extras = args.client.split("+")
    opts = set(extras)
    known = {p: asyncssh.read_known_hosts(str(p)) for p in {s.ssh.known_hosts for s in specs}}
    gate = asyncio.Semaphore(32)
    keep: list[Any] = []

    class Floor:
        """The floor's line handler (split, ``orjson.loads``)."""

        def __init__(self) -> None:
            self.buf = b""

        def feed(self, data: bytes) -> None:
            *done, self.buf = (self.buf + data).split(b"\n")
            for ln in done:
                orjson.loads(ln)

    class Reader(asyncssh.SSHClientSession[bytes]):
        def __init__(self) -> None:
            self.floor = Floor()

        def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
            self.floor.feed(data)

    if base == "session":
        from probes.transport.sessions import SessionFleet
        from probes.wire.protocol import MessageReader

        class FloorReader(MessageReader):
            _floor_buf = b""

            def feed(self, chunk: bytes) -> list[Any]:
                *done, self._floor_buf = (self._floor_buf + chunk).split(b"\n")
                for ln in done:
                    orjson.loads(ln)
                return []

        fleet = SessionFleet(specs, new_reader=lambda _h: FloorReader())
        keep.append(asyncio.create_task(fleet.run(lambda _h, _i: None)))
        await asyncio.Event().wait()

    for o in opts:
        if o.startswith("co"):  # the running loop's selector wrapped (the product's own)
            from probes.transport.coalesce import CoalescingSelector
            loop: Any = asyncio.get_running_loop()
            loop._selector = CoalescingSelector(loop._selector, int(o[2:]) / 1e3)

    async def one(spec: Any) -> None:
        o = spec.ssh
        kw: dict[str, Any] = {}
        if "ka" in opts:
            kw = {"keepalive_interval": o.keepalive_interval_s,
                  "keepalive_count_max": o.keepalive_count_max}
        async with gate:
            conn = await asyncssh.connect(
                o.address, o.port, username=o.user, client_keys=[o.identity],
                known_hosts=known[o.known_hosts], config=None, encryption_algs=CIPHERS, **kw)
        if "ka" in opts:
            lazy_keepalive(conn)
        if "trim" in opts:
            trim_after_login(conn)
        keep.append(conn)
        agent_args = spec.agent_args()
        src = shipped_source(agent_args)
        cmd = bootstrap_command(spec.python or "python3", agent_args, len(src))
        if base == "floor":
            chan, _ = await conn.create_session(Reader, cmd, encoding=None)
            chan.write(src)
            return
        _chan, proc = await conn.create_session(PushProcess, cmd, encoding=None)
        assert isinstance(proc, PushProcess)
        if "stderr" in opts:
            tail = StderrTail()
            tail.follow(proc.stderr, (asyncssh.Error, OSError))
            keep.append(tail)
        proc.stdin.write(src)
        await proc.stdin.drain()
        floor = Floor()
        if "stall" in opts:
            with _StallWatch(spec.interval_s * 15) as watch:
                def sink(chunk: bytes) -> None:
                    watch.fed()
                    floor.feed(chunk)
                await proc.push_to(sink)
        else:
            await proc.push_to(floor.feed)

    tasks = [asyncio.create_task(one(s)) for s in specs]
    keep.extend(tasks)
    await asyncio.Event().wait()


# ---- the bench -------------------------------------------------------------------------------

class Client:
    """One client process; a collector's frames are read (and dropped) as a console would."""

    def __init__(self, what: str, first: int, n: int, inv: Path, specs: list[Any],
                 env: dict[str, str]) -> None:
        import subprocess
        self.what = what
        self.collector = what.startswith("collector:")
        self.buf = b""
        if self.collector:
            from probes.sources.collectors import FLUSH_S
            from probes.transport.collector_wire import CollectorJob, frame
            from probes.transport.sessions import MAX_CONCURRENT_CONNECTS
            pair_set, _, variants = what.split(":", 1)[1].partition("@")
            cenv = dict(env, RW_AB_VARIANTS=str(Path(variants).resolve() if variants
                                                else HERE / "ab_pair_s12.py"),
                        RW_PAIR_SET=pair_set)
            self.proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(os.getpid())],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         env=cenv, cwd=REPO)
            job = CollectorJob(tuple(specs[first::2][:n]), MAX_CONCURRENT_CONNECTS,
                               FLUSH_S, "collector 1")
            assert self.proc.stdin is not None
            self.proc.stdin.write(frame(job))
            self.proc.stdin.flush()
        else:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--client-child", what, "--inventory", str(inv),
                 "--first", str(first), "--hosts", str(n)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO)

    def drain(self) -> None:
        """Read what the collector wrote (its frames are dropped: nothing here counts them)."""
        out = self.proc.stdout
        assert out is not None
        while select.select([out], [], [], 0)[0]:
            if not os.read(out.fileno(), 1 << 20):
                raise RuntimeError(f"{self.what} exited ({self.proc.wait()})")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def pump(clients: list[Client], seconds: float) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(0.05, left))
        for c in clients:
            c.drain()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from probes.config.inventory import load_inventory
    from probes.transport.bootstrap import bootstrap_argv
    root = Path(tempfile.mkdtemp(prefix="rw-pair-"))
    client, host_key = root / "client", root / "host_ed25519"
    keygen(client)
    keygen(host_key)
    ports = [free_port() for _ in range(args.ports)]
    inv = write_fleet(root, 2 * args.hosts, ports, host_key, client)
    specs = list(load_inventory(inv).hosts)
    argv = bootstrap_argv("python3", specs[0].agent_args())
    agent_args = argv[argv.index("--stdin-eof-exit") + 1:]
    server = Child([sys.executable, str(HERE / "standin_server.py"), "--ports",
                    ",".join(map(str, ports)), "--host-key", str(host_key), "--client-pub",
                    f"{client}.pub", "--templates", "16", "--count", "120",
                    "--args-json", json.dumps(agent_args),
                    *(["--spread"] if args.spread else [])])
    env = dict(os.environ, HOME=str(root), PYTHONPATH=str(REPO))
    pairs: list[tuple[float, float, float]] = []
    clients: list[Client] = []
    try:
        server.read(300)
        # the hosts dealt alternately: each client has as many on each port
        clients = [Client(args.a, 0, args.hosts, inv, specs, env),
                   Client(args.b, 1, args.hosts, inv, specs, env)]
        t0 = time.monotonic()
        while True:
            server.say("stat")
            if server.read(10)["streamed_sessions"] >= 2 * args.hosts:
                break
            if time.monotonic() - t0 > args.start_timeout:
                raise TimeoutError("not every host streams")
            pump(clients, 0.5)
        pump(clients, args.settle)
        pids = [c.proc.pid for c in clients]
        for _ in range(args.windows):
            c0, w0 = [cpu_ns(p) for p in pids], time.monotonic()
            pump(clients, args.slice)
            c1, w1 = [cpu_ns(p) for p in pids], time.monotonic()
            hs = args.hosts * (w1 - w0)
            pairs.append(((c1[0] - c0[0]) / 1e3 / hs, (c1[1] - c0[1]) / 1e3 / hs, w1 - w0))
    finally:
        for c in clients:
            c.stop()
        server.stop()
    ratios = [b / a for a, b, _ in pairs]
    return {"bench": "client_pair", "a": args.a, "b": args.b, "hosts_each": args.hosts,
            "slice_s": args.slice, "load1": round(os.getloadavg()[0], 2),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "a_us_per_hs": round(statistics.mean(a for a, _, _ in pairs), 1),
            "b_us_per_hs": round(statistics.mean(b for _, b, _ in pairs), 1),
            "median_ratio_b_a": round(statistics.median(ratios), 3),
            "b_lower_in": f"{sum(r < 1 for r in ratios)} of {len(ratios)}",
            "windows": [[round(a, 1), round(b, 1)] for a, b, _ in pairs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", default="floor")
    ap.add_argument("--b", default="collector:floorlike")
    ap.add_argument("--hosts", type=int, default=128, help="hosts per client")
    ap.add_argument("--slice", type=float, default=5.0)
    ap.add_argument("--windows", type=int, default=12)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--ports", type=int, default=8)
    ap.add_argument("--no-spread", dest="spread", action="store_false",
                    help="hosts tick from their start (clustered as they connected), not at "
                         "evenly spread points of the second")
    ap.add_argument("--start-timeout", type=float, default=180)
    ap.add_argument("--client-child", dest="client", help=argparse.SUPPRESS)
    ap.add_argument("--inventory", help=argparse.SUPPRESS)
    ap.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        asyncio.run(client_child(args))
        return
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
