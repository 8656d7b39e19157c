"""Decode once (issue 38 item 2): what a collector's relayed entry costs the console, per
host-sample, and what moving the fold into the collectors would change.

The agent's own simulator makes 16 hosts' v2 streams (``bench_ingest.template``); host *i*
replays template *i mod 16*.  Every simulated second each host's bytes go through the real
collector side (``Relay.new_reader`` readers, ``Relay._take``, ``frame``), then through the
real console side (``unframe``, ``check_batch``, ``CollectorBackend._fold``).  Measured,
CPU (``process_time``) per host-sample, median of ``--passes`` passes over the same frames:

* ``console_us``: unframe + check + ``_fold`` with an emit that keeps nothing: the console's
  cost to turn relayed entries into samples (``decode_us``: ``_fold`` alone), the whole run;
  ``steady_console_us`` the same after the first quarter of the run (every host's first
  ``static`` message is in it: a connect storm, not the steady stream);
* ``text_console_us`` / ``text_steady_console_us``: the same, in the same process, of
  frames a collector made as before issue 38 item 2 (``TextRelayReader``: every tick as
  its text), the passes alternating with the figures above;
* ``collector_us``: the collector's readers and relay for the same ticks, framed;
* ``frame_bytes``: bytes per host-sample on the pipe;
* ``fold_us``: ``FleetState.apply`` of the samples (the fold that would move into the
  collectors), after a warm-up of ``--warm`` seconds;
* ``delta_us``: the least a console that draws deltas pays instead: each host's fleet row
  (``HostState.row``) per host-sample, pickled in a frame and unpickled (``delta_bytes``);
  ``row_us`` the row's build and ``delta_pack_us`` its pickling, which the collectors would
  then pay for every host every tick (the console builds the rows it shows).

Run from a checkout, it measures that checkout's code (the same script from a worktree of
another commit measures that one: the relay's format is whatever the code sends).

``--agent`` replays what the agent itself prints instead (16 hosts recorded from the shipped
agent's simulator with the console's agent options, as ``standin_server`` serves them: the
hello, ``static`` and ``fabric`` messages, a tick with PCIe chains every 30th second, each
host at its own offset), and adds, in the same process, alternating with the figures above:

* ``before_*``: the same, with the wire decoded as before session 6 (a tick with PCIe chains
  refused by the v2 fast path, so the collector relays its text and the console's reader
  decodes it on the checked path; a ``fabric`` line on the checked path: ``ChainsChecked``);
* ``text_kinds`` / ``before_text_kinds``: what reaches the console's ``MessageReader`` as
  text, by kind (hello, static, fabric, a tick with chains, another tick, ...): lines, µs
  each, and µs per host-sample (a pass of its own: the per-line clock costs a little).

    python tests/bench/bench_relay_decode.py [--hosts 256] [--seconds 60] [--passes 3] [--agent]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import pickle
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.sources import collectors
from probes.sources.collectors import CollectorBackend, FoldSlices, _Shard
from probes.transport.bootstrap import bootstrap_argv
from probes.transport.collector_wire import CollectorJob, check_batch, frame, unframe
from probes.transport.relay import Relay, RelayReader
from probes.wire import compact, protocol, structs
from probes.wire.events import Connected
from probes.wire.protocol import MessageReader
from probes.wire.samples import AgentMessage, HostSample
from tests.bench.bench_ingest import T0, TEMPLATES, template
from tests.bench.standin_server import format_args, record, restamp
from tui.gc_policy import tune_for_streaming


class TextRelayReader(RelayReader):
    """The collector's reader as it was before issue 38 item 2: every chunk relayed as it
    came, ticks as their text (the console decodes them again)."""

    def feed(self, chunk: bytes) -> list[AgentMessage]:
        self._relay.add(self._index, bytes(chunk))
        items = MessageReader.feed(self, chunk)
        self.mine = {id(m): m for m in items}
        return items


class _NoChains:
    """The v2 tick decoder as before session 6 for the fast path: chains refused."""

    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder

    def decode(self, line: bytes) -> Any:
        s = self._decoder.decode(line)
        if s.pcie is not None:
            raise structs.Refused("pcie")
        return s


def _no_fabric(line: bytes) -> Any:
    raise structs.Refused("the checked path, as before session 6")


class ChainsChecked:
    """Within it, the wire decodes as before session 6: a tick with PCIe chains takes the
    checked path on both sides (the collector relays its text; the console's reader parses
    it), and so does a ``fabric`` line (no ``fabric_fast``)."""

    def __enter__(self) -> None:
        self.saved = compact._DECODER, protocol.decode_fabric
        compact._DECODER = _NoChains(self.saved[0])  # type: ignore[assignment]
        protocol.decode_fabric = _no_fabric

    def __exit__(self, *exc: object) -> None:
        compact._DECODER, protocol.decode_fabric = self.saved


_KIND = re.compile(rb'\s*\{\s*"type"\s*:\s*"([a-z_]{1,16})"')


def line_kind(line: bytes) -> str:
    """What a line the console decodes as text is: a message type, or a tick's shape."""
    if line[:1] == b"[":
        return "tick with chains" if b'"speed_gts"' in line else "tick"
    m = _KIND.match(line, 0, 64)
    if m is not None and m.group(1) == b"fabric" and b'"nvlink"' in line:
        return "fabric with NVLinks"
    return m.group(1).decode() if m else "other"


def text_kinds(frames: list[bytes], specs: tuple[HostSpec, ...]) -> dict[str, Any]:
    """A console pass over all the frames that clocks each line its readers decode as text,
    by ``line_kind``: lines, µs a line, µs per host-sample of the run."""
    seen: dict[str, list[float]] = {}

    class Clocked(MessageReader):
        def _decode(self, line: bytes | None) -> AgentMessage | None:
            if line is None:
                return super()._decode(line)
            t0 = time.process_time()
            msg = super()._decode(line)
            took = time.process_time() - t0
            s = seen.setdefault(line_kind(line), [0, 0.0])
            s[0] += 1
            s[1] += took
            return msg

    saved = collectors.MessageReader
    collectors.MessageReader = Clocked  # type: ignore[misc]
    try:
        console_pass(frames, specs, skip=0)
    finally:
        collectors.MessageReader = saved  # type: ignore[misc]
    hs = len(specs) * (len(frames) - 1)
    return {k: {"lines": int(n), "us_each": round(1e6 * t / n, 1),
                "us_per_hs": round(1e6 * t / hs, 2)}
            for k, (n, t) in sorted(seen.items(), key=lambda kv: -kv[1][1])}


def agent_feed(hosts: int, seconds: int) -> list[Any]:
    """Each host's (first lines, one chunk a second) as the stand-in serves the agent's own
    recording: template ``k % 16`` from its own offset, re-stamped each second."""
    argv = bootstrap_argv("python3", HostSpec(name="h", expect_gpus=8).agent_args())
    templates = record(format_args(argv[argv.index("--stdin-eof-exit") + 1:]), TEMPLATES,
                       seconds)
    feed = []
    for k in range(hosts):
        t = templates[k % TEMPLATES]
        first = b"".join(restamp(line, None, T0) for line in t.preamble)
        chunks = []
        for sec in range(seconds):
            group = t.samples[(k + sec) % len(t.samples)]
            chunks.append(restamp(group[0], sec, T0 + sec)
                          + b"".join(restamp(line, None, T0 + sec) for line in group[1:]))
        feed.append((first, chunks))
    return feed


def collector_frames(feed: list[Any], specs: tuple[HostSpec, ...], seconds: int,
                     text: bool = False) -> tuple[list[bytes], float]:
    """One frame per simulated second, made by the collector's readers and relay (``text``:
    as before issue 38 item 2); and the CPU seconds that took."""
    r, w = os.pipe()
    # each host's bytes its own objects, as a transport delivers them (a frame pickles an
    # object once however often it holds it)
    chunks = [[bytes(bytearray(c)) for c in feed[k % len(feed)][1][:seconds]]
              for k in range(len(specs))]

    async def run() -> tuple[list[bytes], float]:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        readers = [TextRelayReader(k, relay) if text else relay.new_reader(s.name)
                   for k, s in enumerate(specs)]
        for k, s in enumerate(specs):
            relay.emit(s.name, Connected(T0))
            readers[k].feed(feed[k % len(feed)][0])
        frames = [frame(relay._take())]
        t0 = time.process_time()
        for t in range(seconds):
            for k, reader in enumerate(readers):
                reader.feed(chunks[k][t])
            frames.append(frame(relay._take()))
        took = time.process_time() - t0
        if relay._flush is not None:
            relay._flush.cancel()
        return frames, took

    try:
        return asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)


def console_pass(frames: list[bytes], specs: tuple[HostSpec, ...], skip: int = 1,
                 keep: list[tuple[str, HostSample]] | None = None) -> tuple[float, float]:
    """The console's CPU seconds for the frames after the first ``skip`` (unframe + check +
    fold, and ``_fold`` alone), with fresh readers."""
    shard = _Shard(1, CollectorJob(specs, 4, 0.05))
    slices = FoldSlices(budget_s=3600.0)

    def emit(host: str, item: object) -> None:
        if keep is not None and isinstance(item, HostSample):
            keep.append((host, item))

    async def run() -> tuple[float, float]:
        for data in frames[:skip]:
            first = check_batch(unframe(data[4:]), len(specs))
            await CollectorBackend._fold(shard, first, emit, slices)
        whole = fold = 0.0
        for data in frames[skip:]:
            t0 = time.process_time()
            batch = check_batch(unframe(data[4:]), len(specs))
            t1 = time.process_time()
            await CollectorBackend._fold(shard, batch, emit, slices)
            t2 = time.process_time()
            whole += t2 - t0
            fold += t2 - t1
        return whole, fold

    return asyncio.run(run())


def fold_and_deltas(samples: list[tuple[str, HostSample]], specs: tuple[HostSpec, ...],
                    hosts: int, warm: int) -> dict[str, float]:
    """The fold of the samples into a ``FleetState`` (after ``warm`` seconds of them), and
    the least a delta costs: each folded host's fleet row, framed and unframed per second."""
    fleet = FleetState(list(specs))
    for s in specs:
        fleet.apply(s.name, Connected(T0), T0)
    fold = rows_s = pack = unpack = 0.0
    size = 0
    n = 0
    for at in range(0, len(samples), hosts):
        second = samples[at:at + hosts]
        now = second[0][1].ts
        t0 = time.process_time()
        for host, sample in second:
            fleet.apply(host, sample, now)
        t1 = time.process_time()
        if at < warm * hosts:
            continue
        fold += t1 - t0
        rows = [(k, fleet.hosts[h].row(now)) for k, (h, _) in enumerate(second)]
        t2 = time.process_time()
        rows_s += t2 - t1
        data = frame(rows)
        t3 = time.process_time()
        pickle.loads(data[4:])
        t4 = time.process_time()
        pack += t3 - t2
        unpack += t4 - t3
        size += len(data)
        n += len(second)
    return {"fold_us": round(1e6 * fold / n, 1), "row_us": round(1e6 * rows_s / n, 1),
            "delta_pack_us": round(1e6 * pack / n, 1),
            "delta_us": round(1e6 * unpack / n, 1), "delta_bytes": round(size / n)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    tune_for_streaming()  # the console's collector settings
    feed = agent_feed(args.hosts, args.seconds) if args.agent else \
        [template(k, args.seconds)[1] for k in range(TEMPLATES)]
    specs = tuple(HostSpec(name=f"h{i:04d}", expect_gpus=8) for i in range(args.hosts))
    frames, collector = collector_frames(feed, specs, args.seconds)
    n = args.hosts * args.seconds
    steady = args.seconds // 4
    """The first ``steady`` seconds hold every host's first ``static`` message: the steady
    figures start after them."""
    wholes, folds, steadies = [], [], []
    text_frames, _ = collector_frames(feed, specs, args.seconds, text=True)
    texts, text_steadies = [], []
    before_frames: list[bytes] = []
    befores: list[float] = []
    before_steadies: list[float] = []
    if args.agent:
        with ChainsChecked():
            before_frames, before_collector = collector_frames(feed, specs, args.seconds)
    for _ in range(args.passes):  # this code's relay and the text relay, alternating
        whole, fold = console_pass(frames, specs)
        wholes.append(whole)
        folds.append(fold)
        steadies.append(console_pass(frames, specs, 1 + steady)[0])
        if args.agent:
            with ChainsChecked():
                befores.append(console_pass(before_frames, specs)[0])
                before_steadies.append(console_pass(before_frames, specs, 1 + steady)[0])
        texts.append(console_pass(text_frames, specs)[0])
        text_steadies.append(console_pass(text_frames, specs, 1 + steady)[0])
    del text_frames
    out: dict[str, Any] = {
        "bench": "relay_decode", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()}-core {platform.machine()}, python "
                   f"{platform.python_version()}", "load1": round(os.getloadavg()[0], 2),
        "hosts": args.hosts, "seconds": args.seconds, "passes": args.passes,
        "console_us": round(1e6 * statistics.median(wholes) / n, 2),
        "decode_us": round(1e6 * statistics.median(folds) / n, 2),
        "steady_console_us": round(1e6 * statistics.median(steadies)
                                   / (args.hosts * (args.seconds - steady)), 2),
        "text_console_us": round(1e6 * statistics.median(texts) / n, 2),
        "text_steady_console_us": round(1e6 * statistics.median(text_steadies)
                                        / (args.hosts * (args.seconds - steady)), 2),
        "collector_us": round(1e6 * collector / n, 2),
        "frame_bytes": round(sum(map(len, frames[1:])) / n),
        "relayed_ticks": sum(isinstance(e, tuple) for f in frames[1:]
                             for _, e in unframe(f[4:])),  # type: ignore[attr-defined]
    }
    if args.agent:
        out.update({
            "before_console_us": round(1e6 * statistics.median(befores) / n, 2),
            "before_steady_console_us": round(1e6 * statistics.median(before_steadies)
                                              / (args.hosts * (args.seconds - steady)), 2),
            "before_collector_us": round(1e6 * before_collector / n, 2),
            "before_frame_bytes": round(sum(map(len, before_frames[1:])) / n),
            "pairs": [round(a / b, 3) for a, b in zip(steadies, before_steadies, strict=True)],
            "text_kinds": text_kinds(frames, specs)})
        with ChainsChecked():
            out["before_text_kinds"] = text_kinds(before_frames, specs)
        del before_frames
    if args.fold:
        samples: list[tuple[str, HostSample]] = []
        console_pass(frames, specs, keep=samples)
        del frames
        gc.collect()
        gc.freeze()  # the kept samples are the bench's, not the fold's, to walk
        out.update(fold_and_deltas(samples, specs, args.hosts, min(args.warm, args.seconds // 2)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--warm", type=int, default=30, help="seconds folded before the fold counts")
    p.add_argument("--no-fold", dest="fold", action="store_false",
                   help="the relay's figures alone")
    p.add_argument("--quick", action="store_true", help="32 hosts, 10 seconds")
    p.add_argument("--agent", action="store_true",
                   help="the agent's own lines (chains, fabric), before/after session 6")
    args = p.parse_args()
    if args.quick:
        args.hosts, args.seconds, args.passes, args.warm = 32, 10, 1, 5
    out = run(args)
    print(json.dumps(out))
    print(f"relay decode: console {out['console_us']} µs a host-sample (fold alone "
          f"{out['decode_us']}), collector {out['collector_us']} µs, {out['frame_bytes']} B")
    if args.agent:
        print(f"steady console {out['steady_console_us']} µs a host-sample, before session 6 "
              f"{out['before_steady_console_us']} µs (pairs {out['pairs']})")


if __name__ == "__main__":
    main()
