"""The real console against N stand-in hosts over real asyncssh, and the floor, in one run.

Three processes besides this one, each measured from ``/proc`` (user+sys of the process
and its descendants, so a console that shards work over collector processes is counted
whole; RSS likewise summed):

1. ``standin_server.py``: N fake hosts on a few loopback ports, each streaming lines the
   agent's own simulator printed with the options the console sends (the wire format it
   negotiates), re-stamped, at 1 Hz.  Host keys are in a known_hosts the console checks
   strictly; the console logs in with its own key.
2. The console: ``rigwatch --inventory inv.yaml --no-record`` through ``tui.cli.main`` (with
   ``--record blocks|rows`` it records as by default, and the recorder's writer thread CPU
   over the window is reported; ``rows`` is the layout before issue 25), with
   ``App.run`` swapped for a headless ``run_test`` at 160x48 that drives keys (the backend,
   the fleet state and the app are the real ones).  Measured: seconds from spawning it until
   every host has a sample in its fleet state; CPU over a steady-state window with no keys;
   RSS at the window's end; then key-to-repaint latency (``bench_ui``'s method: a ``Key``
   sent as the driver does, until the first compositor refresh that shows it) on the fleet
   screen (sort, wall) and on one host's screen (panels).
3. The floor: a bare asyncssh client (one connection and exec session per host, the same
   bootstrap command and source, ``orjson.loads`` of every line) against the same server,
   over a window of the same length, after the console has exited.

Host-samples are the sample lines the server sent in each window; ``ratio_to_floor`` is the
console's CPU per host-sample over the floor's.  ``fold_us_per_hs`` is the console's fold
alone (``RigwatchApp.fold`` of a host sample, thread CPU, over the whole run);
``fold_floor_us_per_hs`` the floor of a Python fold measured in the same run (a typed
decode of the same ticks and a per-field column append); ``dropped_samples`` what the
collectors' relays skipped because the console fell behind (issue 38 item 4).
``--precompile`` compiles the console's modules to bytecode first, as an installed console
has them: where ``PYTHONDONTWRITEBYTECODE`` is set (this dev VM) a checkout never gets any,
and every console and collector start compiles its ~200 modules again, on the UI's critical
path (``bytecode`` in the output says whether they were there).  ``--timeline`` adds a
timeline of the console's start-up (``startup_timeline``).
``--load K`` runs K busy-loop processes beside everything (issue 38: start-up must still
complete on a loaded machine).  With ``RIGWATCH_BENCH_PROFILE=FILE`` the console's UI
thread runs under cProfile for the whole run and its stats are dumped to FILE (pstats);
``RIGWATCH_BENCH_START_PROFILE=FILE`` profiles it from the app's mount until every host
streams (the connect storm alone); ``startup_timeline.PROFILE_ENV`` profiles a collector.
``start_cpu_s`` is each process's CPU until every host streamed (the UI process, at its
mount too; its collectors; the stand-in server meanwhile), ``floor_start_cpu_s`` the
floor's; with ``--timeline`` the floor's own steps are in ``floor_timeline``.

    python tests/bench/bench_fleet.py --hosts N [--seconds S] [--json] [--quick] [--load K]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench import startup_timeline as timeline  # noqa: E402
from tests.support.sshd import free_port, keygen  # noqa: E402

HERE = Path(__file__).resolve().parent
SIZE = (160, 48)
TICK = os.sysconf("SC_CLK_TCK")


# ---- /proc -------------------------------------------------------------------------------

def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def tree_cpu(pid: int) -> float:
    """CPU seconds (user+sys, and of reaped children) of ``pid`` and its descendants."""
    total = 0
    for p in tree(pid):
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in f[11:15])
    return total / TICK


def own_cpu(pid: int) -> float:
    """CPU seconds (user+sys) of ``pid`` alone: the UI process when collectors run beside."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in f[11:13]) / TICK


def tree_rss_mb(pid: int) -> float:
    total = 0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


# ---- the console (child process) ---------------------------------------------------------

async def _drive(app: Any, args: argparse.Namespace) -> None:
    from tests.bench.bench_ui import Repaints, fleet_keys, host_keys, instrument, press
    from tui.messages import HostChosen
    from tui.screens.host import HostScreen

    paints = Repaints()
    instrument(app, paints)
    loop = asyncio.get_running_loop()
    async with app.run_test(size=SIZE) as pilot:
        timeline.mark("mounted")
        mounted_cpu = time.process_time()  # the UI's import and first screen, in CPU s
        if os.environ.get("RIGWATCH_BENCH_START_PROFILE"):
            import cProfile

            _START_PROFILE.append(cProfile.Profile())
            _START_PROFILE[0].enable()
        while any(h.last is None for h in app.fleet.hosts.values()):
            await asyncio.sleep(0.02)
        if _START_PROFILE:
            _START_PROFILE[0].disable()
            _START_PROFILE[0].dump_stats(os.environ["RIGWATCH_BENCH_START_PROFILE"])
        print(json.dumps({"event": "streaming", "t": time.monotonic(),
                          "ui_cpu_mounted_s": round(mounted_cpu, 2),
                          "hosts": sum(h.last is not None for h in app.fleet.hosts.values())}),
              flush=True)
        # Until told "keys": answer "count" with the samples the fleet state has taken in
        # (the sum of each host's newest seq; bench_peer's hosts are real agents).
        while (cmd := (await loop.run_in_executor(None, sys.stdin.readline)).strip()) != "keys":
            if not cmd:
                return
            if cmd == "recorder":
                print(json.dumps(recorder_event()), flush=True)
                continue
            print(json.dumps({"event": "count", "seq_sum": sum(
                h.last.seq + 1 for h in app.fleet.hosts.values() if h.last is not None)}),
                flush=True)
        lat: dict[str, list[float]] = {"fleet": [], "host": []}

        async def keys(screen: str, steps: list[tuple[str, Callable[[], bool]]]) -> None:
            for i in range(args.presses):
                await asyncio.sleep(args.gap)
                key, shown = steps[i % len(steps)]
                lat[screen].append(1000 * await press(app, paints, key, shown))

        await keys("fleet", fleet_keys(app))
        app.post_message(HostChosen(next(iter(app.fleet.hosts))))
        while not isinstance(app.screen, HostScreen):
            await asyncio.sleep(0.01)
        await pilot.pause(0.3)
        await keys("host", host_keys(app))
        print(json.dumps({"event": "keys", "latency_ms": lat, **fold_event(app)}), flush=True)
        await app.action_quit()


_FOLD = {"s": 0.0, "n": 0}
"""Thread CPU the console spent folding host samples, and how many (``count_folds``)."""


def count_folds() -> None:
    """Time ``RigwatchApp.fold`` of every host sample (thread CPU: the UI loop's own)."""
    from probes.wire.samples import HostSample
    from tui.app import RigwatchApp

    fold = RigwatchApp.fold

    def timed(self: Any, host: str, item: Any) -> None:
        if not isinstance(item, HostSample):
            fold(self, host, item)
            return
        timeline.mark("fold", host)
        t = time.thread_time()
        fold(self, host, item)
        _FOLD["s"] += time.thread_time() - t
        _FOLD["n"] += 1

    RigwatchApp.fold = timed  # type: ignore[method-assign]


def fold_event(app: Any) -> dict[str, Any]:
    """The fold's cost per host sample and the relays' skipped samples, for the parent."""
    return {"fold_us_per_hs": round(1e6 * _FOLD["s"] / max(_FOLD["n"], 1), 1),
            "folded": _FOLD["n"],
            "dropped_samples": sum(h.reach.relay_dropped for h in app.fleet.hosts.values())}


_RECORDERS: list[Any] = []
"""The console's recorders (``--record``), to read their writer's CPU from."""
_WRITER_GC = {"s": 0.0, "n": 0, "t0": 0.0}
"""Garbage collections run on the recorder's writer thread: their CPU counts as the
writer's (whichever thread crosses the threshold collects for the whole process)."""


def _writer_gc(phase: str, _info: dict[str, Any]) -> None:
    if threading.current_thread().name != "rigwatch-recorder":
        return
    if phase == "start":
        _WRITER_GC["t0"] = time.thread_time()
    else:
        _WRITER_GC["s"] += time.thread_time() - _WRITER_GC["t0"]
        _WRITER_GC["n"] += 1


def recorder_event() -> dict[str, Any]:
    """The recorders' writer CPU, items and file bytes so far, and the time."""
    return {"event": "recorder", "t": time.monotonic(),
            "writer_cpu_s": sum(r.writer_cpu_s for r in _RECORDERS),
            "writer_gc_s": _WRITER_GC["s"], "writer_gcs": _WRITER_GC["n"],
            "items": sum(r.status.items_written for r in _RECORDERS),
            "bytes": sum(r.status.bytes for r in _RECORDERS),
            "states": [r.status.state for r in _RECORDERS]}


def track_recorders(layout: str) -> None:
    """Keep every Recorder the console makes; ``rows``: with its block packer off, so it
    writes every sample whole as before issue 25 (the baseline in the same run)."""
    from probes.store import recording

    init = recording.Recorder.__init__

    def tracked(self: Any, *a: Any, **kw: Any) -> None:
        init(self, *a, **kw)
        if layout == "rows":
            self._packer.add = lambda *_a: False
        _RECORDERS.append(self)

    recording.Recorder.__init__ = tracked  # type: ignore[method-assign]
    gc.callbacks.append(_writer_gc)


_START_PROFILE: list[Any] = []
"""With ``RIGWATCH_BENCH_START_PROFILE=FILE``: cProfile of the UI thread from the app's
mount until every host streams, dumped to FILE (pstats): the connect storm's UI work."""


def console_child(args: argparse.Namespace) -> int:
    """Run the real console's entry point with a headless, key-driving ``App.run``."""
    timeline.mark("child")
    timeline.console_hooks()
    from tui import cli

    def run(self: Any, *a: object, **kw: object) -> None:
        asyncio.run(_drive(self, args))

    tune = cli.tune_for_streaming

    def patched() -> None:
        # Just before ``app.run``: the console imports its UI (Textual) where it would
        # (after it has started its collectors), not before ``cli.main`` as an import here
        # at the top would.
        from tui.app import RigwatchApp

        timeline.mark("tui_imported")
        RigwatchApp.run = run  # type: ignore[method-assign]
        count_folds()
        tune()

    cli.tune_for_streaming = patched  # type: ignore[attr-defined]
    extra = [] if args.collectors is None else ["--collectors", str(args.collectors)]
    if args.record == "off":
        extra.append("--no-record")
    else:
        track_recorders(args.record)
    profile = os.environ.get("RIGWATCH_BENCH_PROFILE")
    if not profile:
        return cli.main(["--inventory", args.inventory, *extra])
    # cProfile of the UI thread over the whole run (start-up, window, keys), dumped for
    # pstats: where the UI process's time goes at this fleet size (about twice as slow).
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    try:
        return cli.main(["--inventory", args.inventory, *extra])
    finally:
        prof.disable()
        prof.dump_stats(profile)


# ---- the floor (child process) -----------------------------------------------------------

async def floor_child_async(args: argparse.Namespace) -> None:
    import asyncssh
    import orjson

    from probes.config.inventory import load_inventory
    from probes.transport.bootstrap import bootstrap_command, shipped_source

    timeline.mark("floor_imported")
    specs = list(load_inventory(Path(args.inventory)).hosts)
    lines = 0
    streaming: set[str] = set()

    class Reader(asyncssh.SSHClientSession[bytes]):
        def __init__(self, name: str) -> None:
            self.name, self.buf = name, b""

        def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
            nonlocal lines
            *done, self.buf = (self.buf + data).split(b"\n")
            for ln in done:
                orjson.loads(ln)
                lines += 1
            if done and self.name not in streaming:
                streaming.add(self.name)
                timeline.mark("floor_first", self.name)

    gate = asyncio.Semaphore(64)
    conns: list[Any] = []
    # Parsed once, as a minimal client would (asyncssh given the path parses it per
    # connection: with a fleet-sized file that is the floor's own O(N^2)).
    known = {p: asyncssh.read_known_hosts(p) for p in {s.ssh.known_hosts for s in specs}}

    async def one(spec: Any) -> None:
        o = spec.ssh
        async with gate:
            timeline.mark("floor_start", spec.name)
            conn = await asyncssh.connect(
                o.address, o.port, username=o.user, client_keys=[o.identity],
                known_hosts=known[o.known_hosts], config=None,
                encryption_algs=["aes256-gcm@openssh.com", "aes128-gcm@openssh.com"])
        timeline.mark("floor_login", spec.name)
        conns.append(conn)
        agent_args = spec.agent_args()
        src = shipped_source(agent_args)
        chan, _ = await conn.create_session(lambda: Reader(spec.name), bootstrap_command(
            spec.python or "python3", agent_args, len(src)), encoding=None)
        chan.write(src)

    await asyncio.gather(*(one(s) for s in specs))
    while len(streaming) < len(specs):
        await asyncio.sleep(0.02)
    print(json.dumps({"event": "streaming", "t": time.monotonic(), "hosts": len(streaming)}),
          flush=True)
    await asyncio.Event().wait()


# ---- the bench ---------------------------------------------------------------------------

class Child:
    """A child process speaking JSON lines on stdout; stdin lines tell it to go on."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.spawned = time.monotonic()
        self.label = " ".join(argv[1:3])
        self.buf = b""
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, cwd=REPO)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read(self, timeout: float) -> dict[str, Any]:
        """The next JSON line (lines that are not JSON objects are passed over).

        Raises:
            TimeoutError: none within ``timeout`` s (a console that never streams).
            RuntimeError: the child exited.
        """
        out: IO[bytes] | None = self.proc.stdout
        assert out is not None
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if line.startswith(b"{"):
                    got: dict[str, Any] = json.loads(line)
                    return got
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                raise TimeoutError(f"{self.label}: nothing within {timeout} s")
            chunk = os.read(out.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"{self.label} exited ({self.proc.wait()})")
            self.buf += chunk

    def say(self, line: str = "go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def write_fleet(root: Path, hosts: int, ports: list[int], host_key: Path,
                client: Path, known_hosts_lines: int = 0) -> Path:
    """known_hosts for every port and an inventory spreading the hosts over the ports.

    ``known_hosts_lines``: the file padded to that many lines with other hosts' entries, as
    a real fleet's file holds a line per host (the stand-in hosts share 8 ports, so 8 lines
    would do); each connection is checked against the whole file."""
    pub = Path(f"{host_key}.pub").read_text().split()
    known = root / "known_hosts"
    other = Path(f"{client}.pub").read_text().split()  # any key parses as any other
    pad = [f"[10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}]:22 {other[0]} {other[1]}\n"
           for i in range(max(0, known_hosts_lines - len(ports)))]
    known.write_text("".join([*pad, *(f"[127.0.0.1]:{p} {pub[0]} {pub[1]}\n"
                                      for p in ports)]))
    groups = {f"port{k}": {"address": "127.0.0.1", "port": p,
                           "hosts": [f"h{i:04d}" for i in range(k, hosts, len(ports))]}
              for k, p in enumerate(ports)}
    inv = {"defaults": {"user": "root", "identity": str(client), "known_hosts": str(known),
                        "host_key_checking": "strict", "interval": 1},
           "groups": groups}
    path = root / "inventory.yaml"
    path.write_text(json.dumps(inv, indent=1))  # JSON is YAML
    return path


def window(pid: int, server: Child, seconds: float) -> dict[str, float]:
    """CPU of ``pid``'s tree and samples the server sent over ``seconds``; RSS at the end."""
    server.say("stat")
    sent0 = server.read(10)["sent"]
    cpu0, own0, t0 = tree_cpu(pid), own_cpu(pid), time.monotonic()
    rss = [tree_rss_mb(pid)]
    while time.monotonic() - t0 < seconds:
        time.sleep(min(1.0, seconds - (time.monotonic() - t0)))
        rss.append(tree_rss_mb(pid))
    cpu, own, wall = tree_cpu(pid) - cpu0, own_cpu(pid) - own0, time.monotonic() - t0
    server.say("stat")
    samples = server.read(10)["sent"] - sent0
    return {"cpu_pct": round(100 * cpu / wall, 2), "own_cpu_pct": round(100 * own / wall, 2),
            "host_samples": samples,
            "samples_per_s": round(samples / wall, 1),
            "cpu_us_per_sample": round(1e6 * cpu / max(samples, 1), 1),
            "rss_mb": round(rss[-1], 1), "rss_mb_start": round(rss[0], 1)}


def fold_floor_us(agent_args: list[str], rounds: int = 20) -> float | None:
    """The floor of a Python fold (issue 38): each v2 tick the stand-in hosts send decoded
    once into typed rows (the console's own ``SampleRow``) and every GPU's moving numbers
    appended to a per-GPU, per-field column; µs per host-sample, best of three."""
    import msgspec

    from probes.wire.compact import SampleRow
    from tests.bench.standin_server import format_args, record

    template = record(format_args(agent_args), 1, 60)[0]
    ticks = [sample[0] for sample in template.samples if sample[0].startswith(b"[")]
    if not ticks:
        return None  # not the v2 wire: no typed tick to decode
    decode = msgspec.json.Decoder(SampleRow).decode
    astuple = msgspec.structs.astuple
    best = float("inf")
    for _ in range(3):
        columns: dict[tuple[int, int], list[object]] = {}
        start = time.thread_time()
        for _ in range(rounds):
            for line in ticks:
                for i, gpu in enumerate(decode(line).gpus):
                    for k, v in enumerate(astuple(gpu)[:10]):
                        col = columns.get((i, k))
                        if col is None:
                            col = columns[(i, k)] = []
                        col.append(v)
        best = min(best, time.thread_time() - start)
    return round(1e6 * best / (rounds * len(ticks)), 1)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))] if s else float("nan")


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="rw-fleet-"))
    client, host_key = root / "client", root / "host_ed25519"
    keygen(client)
    keygen(host_key)
    ports = [free_port() for _ in range(args.ports)]
    inv = write_fleet(root, args.hosts, ports, host_key, client, args.known_hosts_lines)
    from probes.config.inventory import load_inventory
    from probes.transport.bootstrap import bootstrap_argv
    # Exactly what the console's exec request will carry after the bootstrap's own words
    # (``--wire 2`` or whatever the bootstrap adds): the recordings are made with it.
    argv = bootstrap_argv("python3", next(iter(load_inventory(inv).hosts)).agent_args())
    agent_args = argv[argv.index("--stdin-eof-exit") + 1:]
    py = sys.executable
    env = dict(os.environ, HOME=str(root), XDG_CONFIG_HOME=str(root / "config"),
               XDG_DATA_HOME=str(root / "data"), XDG_STATE_HOME=str(root / "state"))
    server = Child([py, str(HERE / "standin_server.py"), "--ports", ",".join(map(str, ports)),
                    "--host-key", str(host_key), "--client-pub", f"{client}.pub",
                    "--templates", str(args.templates), "--count", str(args.count),
                    "--args-json", json.dumps(agent_args)])
    out: dict[str, Any] = {"bench": "fleet", "hosts": args.hosts, "date": time.strftime(
        "%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.machine(),
        "cores": os.cpu_count(), "python": sys.version.split()[0], "ports": len(ports),
        "collectors": args.collectors,
        "seconds": args.seconds, "agent_args": agent_args, "quick": args.quick}
    children: list[Child] = [server]
    load = [subprocess.Popen([py, "-c", "while True: pass"]) for _ in range(args.load)]
    out["load"] = args.load
    if args.precompile:
        import compileall

        for package in ("probes", "tui", "widgets", "themes"):
            compileall.compile_dir(REPO / package, quiet=1)
    out["bytecode"] = any((REPO / "tui" / "__pycache__").glob("app.*.pyc"))
    try:
        server.read(300)  # {"ready": true} once the recordings are made and ports listen
        me = [py, str(Path(__file__).resolve()), "--inventory", str(inv),
              "--presses", str(args.presses), "--gap", str(args.gap)]
        if args.collectors is not None:
            me += ["--collectors", str(args.collectors)]
        if args.timeline:
            (root / "timeline").mkdir()
            env[timeline.ENV] = str(root / "timeline")
        console = Child([*me, "--console-child", "--record", args.record], env)
        children.append(console)
        server_cpu0 = tree_cpu(server.pid)
        ev = console.read(args.start_timeout)
        out["all_streaming_s"] = round(ev["t"] - console.spawned, 2)
        # CPU seconds each side spent until all streamed (less noisy than the wall time):
        # the UI process, its collectors, the stand-in server over the same span.
        ui0, whole0 = own_cpu(console.pid), tree_cpu(console.pid)
        out["start_cpu_s"] = {"ui": round(ui0, 2), "ui_mounted": ev["ui_cpu_mounted_s"],
                              "collectors": round(whole0 - ui0, 2),
                              "server": round(tree_cpu(server.pid) - server_cpu0, 2)}
        out["hosts_streaming"] = ev["hosts"]
        if args.timeline:
            out["timeline"] = timeline.summary(root / "timeline", console.spawned)
        time.sleep(args.settle)
        if args.record != "off":
            console.say("recorder")
            r0 = console.read(30)
        out["console"] = window(console.pid, server, args.seconds)
        if args.record != "off":
            console.say("recorder")
            r1 = console.read(30)
            wall, cpu, items = r1["t"] - r0["t"], r1["writer_cpu_s"] - r0["writer_cpu_s"], \
                r1["items"] - r0["items"]
            out["recorder"] = {
                "layout": args.record, "states": r1["states"], "items_per_s":
                round(items / wall, 1), "writer_core_pct": round(100 * cpu / wall, 2),
                "writer_us_per_item": round(1e6 * cpu / max(items, 1), 1),
                "writer_gc_us_per_item": round(
                    1e6 * (r1["writer_gc_s"] - r0["writer_gc_s"]) / max(items, 1), 1),
                "writer_gcs": r1["writer_gcs"] - r0["writer_gcs"],
                "file_bytes_at_end": r1["bytes"]}
        console.say("keys")
        got = console.read(120)
        lat = got["latency_ms"]
        out.update({k: got[k] for k in ("fold_us_per_hs", "folded", "dropped_samples")})
        out["fold_floor_us_per_hs"] = fold_floor_us(agent_args)
        console.proc.wait(timeout=30)
        out["keys"] = {s: {"presses": len(v), "p50_ms": round(statistics.median(v), 1),
                           "p95_ms": round(pct(v, 0.95), 1), "max_ms": round(max(v), 1)}
                       for s, v in lat.items() if v}
        floor_env = None
        if args.timeline:
            (root / "floor_timeline").mkdir()
            floor_env = dict(os.environ, **{timeline.ENV: str(root / "floor_timeline")})
        server_cpu0 = tree_cpu(server.pid)
        floor = Child([*me, "--floor-child"], floor_env)
        children.append(floor)
        ev = floor.read(args.start_timeout)
        out["floor_all_streaming_s"] = round(ev["t"] - floor.spawned, 2)
        out["floor_start_cpu_s"] = {"floor": round(tree_cpu(floor.pid), 2),
                                    "server": round(tree_cpu(server.pid) - server_cpu0, 2)}
        if args.timeline:
            out["floor_timeline"] = timeline.summary(root / "floor_timeline", floor.spawned)
        out["floor_hosts_streaming"] = ev["hosts"]
        time.sleep(args.settle)
        out["floor"] = window(floor.pid, server, args.seconds)
        server.say("stat")
        out["server"] = server.read(10)
    finally:
        for c in reversed(children):
            c.stop()
        for proc in load:
            proc.kill()
            proc.wait()
    c, f = out["console"], out["floor"]
    out.update({
        "console_cpu_pct": c["cpu_pct"], "ui_process_cpu_pct": c["own_cpu_pct"],
        "ui_cpu_pct": c["own_cpu_pct"],
        "rss_mb": c["rss_mb"], "floor_cpu_pct": f["cpu_pct"],
        "ratio_to_floor": round(c["cpu_us_per_sample"] / max(f["cpu_us_per_sample"], 1e-3), 2),
        "fold_ratio_to_floor": None if not out.get("fold_floor_us_per_hs") else round(
            out["fold_us_per_hs"] / out["fold_floor_us_per_hs"], 1),
        # The worse screen's p95: the target holds on each screen.
        "key_p95_ms": max(k["p95_ms"] for k in out["keys"].values())})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None, help="each measured window")
    p.add_argument("--json", action="store_true",
                   help="print the JSON object only (else a summary line follows it)")
    p.add_argument("--quick", action="store_true", help="64 hosts, a few seconds")
    p.add_argument("--ports", type=int, default=8)
    p.add_argument("--templates", type=int, default=None)
    p.add_argument("--count", type=int, default=None, help="samples per template")
    p.add_argument("--presses", type=int, default=None, help="keys per screen")
    p.add_argument("--gap", type=float, default=None, help="seconds between keys")
    p.add_argument("--settle", type=float, default=None)
    p.add_argument("--start-timeout", type=float, default=None,
                   help="seconds the console may take until every host streams")
    p.add_argument("--collectors", type=int, default=None,
                   help="the console's --collectors (default: its automatic count)")
    p.add_argument("--record", choices=("off", "rows", "blocks"), default="off",
                   help="the console records (blocks: as it does by default; rows: every "
                        "sample whole, as before issue 25); its writer's CPU is reported")
    p.add_argument("--load", type=int, default=0,
                   help="busy-loop processes to run beside the bench (a loaded machine)")
    p.add_argument("--known-hosts-lines", type=int, default=0,
                   help="pad known_hosts to this many lines (a real fleet's file: one a host)")
    p.add_argument("--precompile", action="store_true",
                   help="compile the console's modules first, as an installed console has them")
    p.add_argument("--timeline", action="store_true",
                   help="the console's start-up as a timeline of its steps (startup_timeline)")
    p.add_argument("--inventory", help=argparse.SUPPRESS)
    p.add_argument("--console-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--floor-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.console_child:
        return console_child(args)
    if args.floor_child:
        asyncio.run(floor_child_async(args))
        return 0
    q = args.quick
    args.hosts = args.hosts or 64 if q else args.hosts or 256
    args.seconds = args.seconds or (2.0 if q else 20.0)
    args.templates = args.templates or (4 if q else 16)
    args.count = args.count or (30 if q else 120)
    args.presses = args.presses or (4 if q else 20)
    args.gap = args.gap if args.gap is not None else (0.1 if q else 0.5)
    args.settle = args.settle if args.settle is not None else (0.5 if q else 5.0)
    args.start_timeout = args.start_timeout or (60.0 if q else 600.0)
    args.ports = min(args.ports, args.hosts)
    out = run_bench(args)
    print(json.dumps(out))
    if not args.json:
        print(f"fleet: {out['hosts']} hosts streaming after {out['all_streaming_s']} s "
              f"(floor {out['floor_all_streaming_s']} s); console {out['console_cpu_pct']} % "
              f"of a core (UI process {out['ui_process_cpu_pct']} %), {out['rss_mb']} MB; "
              f"floor {out['floor_cpu_pct']} %; "
              f"{out['ratio_to_floor']}x the floor per host-sample; key p95 "
              f"{out['key_p95_ms']} ms; fold {out['fold_us_per_hs']} us a host-sample "
              f"(floor {out['fold_floor_us_per_hs']} us, {out['fold_ratio_to_floor']}x); "
              f"{out['dropped_samples']} samples skipped; load {out['load']}" + (
                  "" if "recorder" not in out else
                  f"; recorder ({out['recorder']['layout']}) writer "
                  f"{out['recorder']['writer_core_pct']} % of a core, "
                  f"{out['recorder']['writer_us_per_item']} us per item (garbage collections "
                  f"on the writer {out['recorder']['writer_gc_us_per_item']} us)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
