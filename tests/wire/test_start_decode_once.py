"""A host's start-up lines cost less to decode (issue 38 item 5, session 11), and every answer
is the one before, checked against the reference copy (``start_decode_before_s11``):

* ``check_depth`` scans a line's brackets at C speed (a fabric report's ~360): the same
  verdict as the bracket-by-bracket loop on random bracket soup (strings holding brackets,
  escapes, unclosed quotes, nesting around ``MAX_DEPTH``) and on the agent's own lines
  spoiled at random;
* a collector's stream (one that does not build samples) reads its ``static`` summary off
  the message (``CompactStream._take_thin``) instead of running v1's decoder over every GPU:
  the same stream state, attribute by attribute, over the agent's statics spoiled where a
  host could spoil them (indexes, process lists and rows, columns), and the same verdict on
  the ticks after;
* a hello's ``columns`` come from the object its decode parsed and sanitised, not from a
  second parse of the line: the same (shared) object as before over spoiled hellos;
* end to end: hosts' streams (hello, fabric reports, statics, ticks, spoiled and hostile)
  through the collector's reader and relay and the console's fold give the console the
  same items, field by field, the same findings, and both readers the same counts, as the
  reference code patched in.

Each part has its negative control: a perturbed copy makes its comparison fail.  Every
byte from a host stays data: the sanitising is where it was (the checked path, the tree's
clean), and only what is computed from already-checked values moved.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import os
import random
import zlib
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import accumulate
from typing import Any

import msgspec
import orjson
import pytest

from probes.agent.output import compact_columns
from probes.analysis import fabric
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.transport.collector_wire import CollectorJob, RelayedHello, check_batch, frame, unframe
from probes.transport.relay import Relay
from probes.wire import compact, decode_fields, protocol, sanitize
from probes.wire.compact import CompactStream
from probes.wire.events import Connected, SessionItem
from probes.wire.protocol import MessageReader, decode_line
from probes.wire.samples import FabricSample
from probes.wire.sanitize import MAX_DEPTH, TooDeep
from tests.transport.test_relay_rows import (
    _chunks,
    agent_stream,
    console_fold,
    value_differences,
)
from tests.wire.start_decode_before_s11 import (
    check_depth_before,
    columns_before,
    judged_before,
    shallow_enough_before,
    take_before,
)
from tests.wire.test_clean_tree import HOSTILE, _nest, _spoil

T0 = 1_800_000_000.0


# --- check_depth ------------------------------------------------------------------------

def _verdict(check: Callable[[bytes], None], line: bytes) -> str:
    try:
        check(line)
    except TooDeep as exc:
        return f"TooDeep: {exc}"
    return "ok"


def _soup(rng: random.Random) -> bytes:
    """A line of brackets, strings (holding brackets, escaped quotes, backslashes), an
    unclosed quote now and then, nested to around ``MAX_DEPTH``."""
    out: list[bytes] = []
    target = rng.choice((MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 3, 30, 90))
    escapes = rng.random() < 0.4
    level = 0
    for _ in range(rng.randrange(60, 500)):
        r = rng.random()
        if r < 0.45:
            if level < target:
                out.append(rng.choice((b"[", b"{")))
                level += 1
            else:
                out.append(rng.choice((b"]", b"}")))
                level -= 1
        elif r < 0.55:
            out.append(rng.choice((b"]", b"}")))
            level -= 1
        elif r < 0.8:
            inner = b"".join(rng.choice((b"[", b"]", b"{", b"}", b"a", b" ", b":"))
                             for _ in range(rng.randrange(0, 6)))
            if escapes and rng.random() < 0.5:
                inner += rng.choice((b'\\"', b"\\\\", b"\\n", b'\\"[['))
            out.append(b'"' + inner + b'"')
        elif r < 0.82:
            out.append(b'"')  # an unclosed quote: the rest is no string to the regex
        else:
            out.append(rng.choice((b",", b"1", b"null", b":", b" ")))
    if rng.random() < 0.15:  # an unclosed quote before the deepest part
        out.append(b'"' + b"[" * rng.choice((MAX_DEPTH - 1, MAX_DEPTH + 1, MAX_DEPTH + 2)))
    return b"".join(out)


def _agent_like(rng: random.Random, objs: list[Any]) -> bytes:
    obj = _spoil(rng.choice(objs), rng)
    if rng.random() < 0.5:  # brackets inside a string, beside deep nesting
        obj["note"] = rng.choice(("[[[[", "]]]]]]", "{[", '"]"')) * rng.randrange(1, 30)
        obj["deep"] = _nest(rng.choice((MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH)), 1)
    return json.dumps(obj, ensure_ascii=rng.random() < 0.7, separators=(",", ":")).encode(
        "utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def agent_objects() -> list[Any]:
    rng = random.Random(11)
    lines = [*agent_stream(11, 3).splitlines(), _fabric_line(rng, 3, True)]
    return [json.loads(ln) for ln in lines if ln.startswith(b"{")]


@pytest.fixture(scope="module")
def depth_lines(agent_objects: list[Any]) -> list[tuple[bytes, str]]:
    """3000 lines and the loop's verdict on each: computed once for the check and its
    controls (the reference loop is most of the cost)."""
    rng = random.Random(38)
    out = []
    for k in range(3000):
        line = _soup(rng) if k % 3 else _agent_like(rng, agent_objects)
        out.append((line, _verdict(check_depth_before, line)))
    return out


def _depth_differences(check: Callable[[bytes], None],
                       lines: list[tuple[bytes, str]]) -> tuple[int, int]:
    differ = deep = 0
    for line, want in lines:
        deep += want != "ok"
        differ += _verdict(check, line) != want
    return differ, deep


def test_check_depth_answers_as_the_loop_did(depth_lines: list[tuple[bytes, str]]) -> None:
    differ, deep = _depth_differences(sanitize.check_depth, depth_lines)
    assert 300 < deep < 2700  # both verdicts, many times
    assert differ == 0


def _depth_with_strings_counted(line: bytes) -> None:
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return
    steps = array("b", line.translate(sanitize._STEPS, sanitize._NOT_BRACKETS))
    if max(accumulate(steps), default=0) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH}")


def _depth_losing_the_unclosed_rest(line: bytes) -> None:
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return
    outside = b"".join(sanitize._STRINGS.sub(b"", line).split(b'"')[::2]) \
        if b"\\" in line else b"".join(line.split(b'"')[::2])
    steps = array("b", outside.translate(sanitize._STEPS, sanitize._NOT_BRACKETS))
    if max(accumulate(steps), default=0) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH}")


def test_negative_control_a_scan_that_counts_strings_or_drops_a_rest_is_caught(
        depth_lines: list[tuple[bytes, str]]) -> None:
    assert _depth_differences(_depth_with_strings_counted, depth_lines)[0] > 50
    assert _depth_differences(_depth_losing_the_unclosed_rest, depth_lines)[0] > 5


def _tree(rng: random.Random, level: int, target: int, quote: str) -> Any:
    """A tree nested to ``target``: dicts and lists, strings holding brackets (and quotes,
    where ``quote`` is one), numbers and strings at the deepest level."""
    if level >= target:
        return rng.choice(("leaf", "[{", "]]" + quote, 3, 2.5, None, True, "", [], {}))
    kids = [_tree(rng, level + 1, target, quote)] + [  # one path goes all the way down
        rng.choice(("x", "[[[", "}}", "q" + quote, 1, None, [2], {"[": "]"}))
        for _ in range(rng.randrange(0, 3))]
    rng.shuffle(kids)
    if rng.random() < 0.5:
        return kids
    return {rng.choice(("k", "[", "}", quote)) + str(i): v for i, v in enumerate(kids)}


@functools.cache
def _shallow_cases() -> list[tuple[Any, int, bytes, bool]]:
    """2000 trees and the walk's verdict on each, made once for the check and its control
    (nothing reads them but to compare)."""
    rng = random.Random(38)
    out = []
    for _ in range(2000):
        depth = rng.choice((0, 0, 1, 5))
        tree = _tree(rng, depth, rng.choice((MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH,
                                             MAX_DEPTH + 1, MAX_DEPTH + 2, 20)),
                     '"' if rng.random() < 0.15 else "")
        wrapped = {"pad": [[1]] * 70, "t": tree} if rng.random() < 0.5 else tree
        dumped = orjson.dumps(wrapped)
        out.append((wrapped, depth, dumped, shallow_enough_before(wrapped, depth, dumped)))
    return out


def _shallow_differences(fn: Callable[[Any, int, bytes], bool]) -> tuple[int, int]:
    differ = deep = 0
    for wrapped, depth, dumped, want in _shallow_cases():
        deep += not want
        differ += fn(wrapped, depth, dumped) != want
    return differ, deep


def test_the_trees_nesting_is_read_as_the_walk_read_it() -> None:
    differ, deep = _shallow_differences(sanitize._shallow_enough)
    assert 200 < deep < 1800
    assert differ == 0


def test_negative_control_a_nesting_off_by_one_is_caught() -> None:
    def off_by_one(value: Any, depth: int, dumped: bytes) -> bool:
        return (b"\\" not in dumped and sanitize._nesting(
            sanitize._unquoted(dumped)) <= MAX_DEPTH - depth + 1) or \
            shallow_enough_before(value, depth, dumped)

    assert _shallow_differences(off_by_one)[0] > 20


# --- a collector's static summary -------------------------------------------------------

VALUES: tuple[Any, ...] = (None, 0, 1, 7, -1, 0.0, -0.0, 2.9, -0.5, 1023, 1024, 1023.9,
                           True, False, "3", "", 10**20, 1e300, [], {}, [1], {"pid": 1})


def _columns(rng: random.Random) -> dict[str, Any]:
    cols: dict[str, Any] = compact_columns()
    r = rng.random()
    if r < 0.1:  # no index among the static columns: every GPU dropped
        cols["gpu_static"] = [c for c in cols["gpu_static"] if c != "index"]
    elif r < 0.2:  # no processes column
        cols["gpu_static"] = [c for c in cols["gpu_static"] if c != "processes"]
    elif r < 0.25:  # a column named twice: the later wins
        cols["gpu_static"] = cols["gpu_static"] + ["index"]
    elif r < 0.3:
        cols["gpu_static"] = cols["gpu_static"] + [7, None]
    return cols


def _static_obj(rng: random.Random, cols: dict[str, Any], base: dict[str, Any]) -> Any:
    obj = copy.deepcopy(base)
    names = [c for c in cols["gpu_static"] if isinstance(c, str)]
    for row in obj.get("gpus", []):
        if not isinstance(row, list):
            continue
        for _ in range(rng.choice((0, 1, 2, 3))):
            r = rng.random()
            at = rng.randrange(len(row)) if row else 0
            if r < 0.3 and "index" in names and names.index("index") < len(row):
                row[names.index("index")] = rng.choice(VALUES)
            elif r < 0.6 and "processes" in names and names.index("processes") < len(row):
                row[names.index("processes")] = rng.choice((
                    rng.choice(VALUES),
                    [rng.choice(([1, "python", "u"], {"pid": 2}, 3, "x", None, [], {}, True))
                     for _ in range(rng.randrange(0, 5))]))
            elif r < 0.7 and row:
                del row[rng.randrange(len(row)):]  # a short row
            elif r < 0.8:
                row.append(rng.choice(VALUES))
            elif row:
                row[at] = rng.choice(VALUES)
    r = rng.random()
    if r < 0.05:
        obj["gpus"] = rng.choice(VALUES)
    elif r < 0.1 and isinstance(obj.get("gpus"), list):
        obj["gpus"].append(rng.choice(VALUES))
    elif r < 0.15:
        obj["host"] = rng.choice(VALUES)
    elif r < 0.2:
        obj = _spoil(obj, rng)
    return obj


def _state(stream: CompactStream) -> dict[str, Any]:
    out = {k: v for k, v in vars(stream).items()
           if k not in ("_epoch", "_take", "_checked_whole")}  # (a function: the path)
    e = stream._epoch
    out["_epoch"] = (type(e), e.gpus, e._bases, e.listed, e._last_procs, e.findings, e.strays)
    return out


class Thin(MessageReader):
    builds_ticks = False


def _static_lines(seed: int) -> tuple[list[bytes], list[bytes]]:
    """The agent's hello and ``static`` lines, and some ticks, of one simulated host."""
    lines = agent_stream(seed, 40, spoil=False).splitlines()
    return [ln for ln in lines if b'"type":"static"' in ln], \
        [ln for ln in lines if ln.startswith(b"[")]


Answers = tuple[dict[str, Any], list[bytes | str | None]]


def _summary_run(take: Callable[[CompactStream, dict[str, Any]], None], cols: dict[str, Any],
                 raw: bytes, chosen: list[tuple[bytes, bool]]) -> tuple[Answers, CompactStream]:
    """One thin stream given the ``static`` line ``raw`` (parsed afresh) through ``take``,
    then the ticks ``chosen``: its state and each tick's verdict."""
    s = CompactStream(cols, decode_fields._decode_sample, builds=False,
                      parse=protocol._parsed, gpu_index=decode_fields._index)
    s._take = functools.partial(take, s)  # type: ignore[method-assign]
    s.static(protocol._parsed(raw), zlib.crc32(raw), raw)
    verdicts: list[bytes | str | None] = []
    for tick, checked in chosen:
        try:
            row = s.readable(None if checked else tick,
                             functools.partial(protocol._parsed, tick))
            verdicts.append(None if row is None else msgspec.json.encode(row))
        except Exception as exc:
            verdicts.append(f"{type(exc).__name__}: {exc}")
    return (_state(s), verdicts), s


@functools.cache
def _summary_cases() -> list[tuple[dict[str, Any], bytes, list[tuple[bytes, bool]], str, str]]:
    """1500 spoiled ``static`` lines with their ticks, and the reference ``_take``'s
    answers on each: made once for the check and its control."""
    rng = random.Random(38)
    bases = {s: _static_lines(s) for s in range(4)}
    out = []
    for k in range(1500):
        statics, ticks = bases[k % 4]
        cols = _columns(rng)
        line = statics[rng.randrange(len(statics))]
        obj = _static_obj(rng, cols, json.loads(line)) if k % 6 else json.loads(line)
        raw = json.dumps(obj, separators=(",", ":")).encode()
        if not isinstance(protocol._parsed(raw), dict):
            continue
        chosen = [(t, rng.random() < 0.2) for t in rng.sample(ticks, 3)] if k % 2 else []
        answers, old = _summary_run(take_before, cols, raw, chosen)
        out.append((cols, raw, chosen, repr(answers), repr(old._fit)))
    return out


def _summary_differences(take: Callable[[CompactStream, dict[str, Any]], None]) -> tuple[
        int, int]:
    differ = 0
    fits: set[str] = set()
    for cols, raw, chosen, want, fit in _summary_cases():
        answers, _ = _summary_run(take, cols, raw, chosen)
        fits.add(fit)
        differ += repr(answers) != want
    return differ, len(fits)


def test_a_collectors_static_summary_is_what_the_decoder_kept() -> None:
    differ, kinds = _summary_differences(CompactStream._take)
    assert kinds > 30  # summaries of many shapes: GPUs dropped, no processes, counts
    assert differ == 0


def _take_counting_every_entry(self: CompactStream, obj: dict[str, Any]) -> None:
    CompactStream._take_thin(self, obj)
    gpus = obj.get("gpus")
    names = self.cols.get("gpu_static", ())
    for i, row in enumerate(gpus if isinstance(gpus, list) else ()):
        g = dict(zip(names, row, strict=False)) if isinstance(row, list) else {}
        procs = g.get("processes")
        if self._fit[i] is not None and isinstance(procs, list):
            self._fit[i] = len(procs)  # non-objects counted too: the decoder skips them


def test_negative_control_a_summary_that_counts_what_the_decoder_skips_is_caught() -> None:
    assert _summary_differences(_take_counting_every_entry)[0] > 20


def _static_text(rng: random.Random, obj: Any) -> bytes:
    """A ``static`` object as a host could write it: now and then a NaN or an infinity (the
    standard library's parse: not finite), an int beyond 64 bits, a negative zero, text to
    sanitise, non-ASCII text."""
    r = rng.random()
    gpus = obj.get("gpus") if isinstance(obj, dict) else None
    row = gpus[0] if isinstance(gpus, list) and gpus and isinstance(gpus[0], list) else None
    if row and r < 0.35:
        row[rng.randrange(len(row))] = rng.choice((
            float("nan"), float("inf"), 2**70, 2**63 - 1, -0.0, 1e308, "\x1b]0;x\x07",
            "caf\u00e9", "GPU\u202e", [1, "\u0007"]))
    return json.dumps(obj, separators=(",", ":")).encode()


REAL_STATIC_HALF = protocol._static_half
"""The console's one pass as shipped: the reference runs below use it whatever a test
patches."""
Run = tuple[list[Any], str | None, dict[str, Any]]


def _console_run(lines: list[bytes]) -> Run:
    reader = MessageReader()
    msgs = [msg for ln in lines for msg in reader.feed(ln + b"\n")]
    state = None if reader.compact is None else repr(_state(reader.compact))
    return msgs, state, vars(reader.stats).copy()


@functools.cache
def _building_cases() -> list[tuple[list[bytes], Run]]:
    """600 hellos, spoiled ``static`` lines and ticks after, and the console's stream's
    answers on each with the reference ``_take``: made once for the check and its control."""
    rng = random.Random(83)
    base_hello = json.loads(agent_stream(5, 1, spoil=False).splitlines()[0])
    bases = {s: _static_lines(s) for s in range(4)}
    out = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(compact.CompactStream, "_take", take_before)
        m.setattr(protocol, "_static_half", REAL_STATIC_HALF)
        for k in range(600):
            statics, ticks = bases[k % 4]
            cols = _columns(rng)
            hello = json.dumps(dict(base_hello, columns=cols), separators=(",", ":")).encode()
            obj = json.loads(statics[rng.randrange(len(statics))])
            if k % 4:
                obj = _static_obj(rng, cols, obj)
            lines = [hello, _static_text(rng, obj), *rng.sample(ticks, 3)]
            out.append((lines, _console_run(lines)))
    return out


def _building_differences(monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """The console's stream (one that builds) at each spoiled ``static`` line and the ticks
    after: its state and samples, new against the reference ``_take``."""
    cases = _building_cases()
    differ = one_pass = 0
    real = protocol._static_half

    def counted(obj: dict[str, Any]) -> Any:
        nonlocal one_pass
        one_pass += 1
        return real(obj)

    with monkeypatch.context() as m:
        m.setattr(protocol, "_static_half", counted)
        for lines, (b, sb, cb) in cases:
            a, sa, ca = _console_run(lines)
            differ += bool(value_differences(a, b)) or sa != sb or ca != cb
    return differ, one_pass


def test_the_consoles_static_half_is_the_checked_decoders(
        monkeypatch: pytest.MonkeyPatch) -> None:
    differ, one_pass = _building_differences(monkeypatch)
    assert one_pass > 200
    assert differ == 0


def test_negative_control_a_one_pass_that_drops_the_processes_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = protocol._static_half

    def no_processes(obj: dict[str, Any]) -> Any:
        got = real(obj)
        for g in got.gpus:
            g.__dict__["processes"] = ()
        return got

    monkeypatch.setattr(protocol, "_static_half", no_processes)
    assert _building_differences(monkeypatch)[0] > 20


# --- the hello's columns ----------------------------------------------------------------

def _hello_lines() -> list[bytes]:
    rng = random.Random(38)
    base = json.loads(agent_stream(3, 1, spoil=False).splitlines()[0])
    out = []
    for k in range(400):
        obj = copy.deepcopy(base)
        if k % 4 == 1:
            obj = _spoil(obj, rng)
        elif k % 4 == 2:  # hostile text inside the columns
            cols = obj["columns"]
            key = rng.choice(list(cols))
            cols[key] = [*list(cols[key]), rng.choice(HOSTILE)]
            if rng.random() < 0.3:
                cols[rng.choice(HOSTILE)] = [rng.choice(HOSTILE), 1]
            if rng.random() < 0.3:
                cols["topo_text"] = rng.choice(HOSTILE)  # a block key one level down
        elif k % 4 == 3:
            obj["columns"] = rng.choice((None, 1, "x", [rng.choice(HOSTILE)], {}))
        out.append(json.dumps(obj, separators=(",", ":")).encode())
    return out


def _columns_differences() -> tuple[int, int]:
    differ = v2 = 0
    for line in _hello_lines():
        reader = MessageReader()
        got = reader.feed(line + b"\n")
        stream = reader.compact
        if stream is None:
            continue
        v2 += 1
        want = columns_before(line)
        differ += not (stream.columns is want and repr(stream.columns) == repr(want)
                       and got == [decode_line(line)])
    return differ, v2


def test_a_hellos_columns_are_what_the_second_parse_gave() -> None:
    differ, v2 = _columns_differences()
    assert v2 > 300
    assert differ == 0


def test_negative_control_columns_taken_unsanitised_are_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def raw(line: bytes, builds: bool = True) -> tuple[Any, Any]:
        msg, obj = real(line, builds)
        if isinstance(obj, dict):
            obj = dict(obj, columns=protocol._loads(line)[0].get("columns"))
        return msg, obj

    real = protocol._decode_line
    monkeypatch.setattr(protocol, "_decode_line", raw)
    differ, v2 = _columns_differences()
    assert v2 > 300 and differ > 20


# --- end to end: collector, relay, console, findings ------------------------------------

def _fabric_line(rng: random.Random, k: int, clean: bool = False) -> bytes:
    obj: dict[str, Any] = {"type": "fabric", "v": 1, "ts": T0 + k, "interval_s": None,
                           **_fabric_body(k)}
    if clean:
        return json.dumps(obj, separators=(",", ":")).encode()
    r = rng.random()
    if r < 0.2:
        obj = _spoil(obj, rng)
    elif r < 0.3:  # brackets in text; a NaN makes it the standard library's parse
        obj["ports"][0]["hca"] = "mlx5_0" + "[" * rng.randrange(1, 80)
        if rng.random() < 0.6:
            obj["ports"][1]["rx_bytes_s"] = float("nan")
    elif r < 0.4:
        obj["ports"][0]["unknown"] = _nest(rng.choice((MAX_DEPTH - 4, MAX_DEPTH + 2)), 1)
    elif r < 0.5:
        obj["nvlink"][rng.randrange(len(obj["nvlink"]))]["links"][0][1] = rng.choice(VALUES)
    elif r < 0.55:
        obj["ports"][1]["state"] = "DOWN"
    elif r < 0.6:
        obj["ports"][2]["errors"] = {"symbol_error": rng.randrange(0, 50)}
    return json.dumps(obj, separators=(",", ":")).encode()


def _fabric_body(k: int) -> dict[str, Any]:
    ports = [{"hca": f"mlx5_{i}", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
              "rate_gbs": 400.0, "link_layer": "InfiniBand", "errors": {},
              "rx_bytes_s": 2.1e10, "tx_bytes_s": 2.1e10, "xmit_wait_s": 0.0}
             for i in range(8)]
    nvlink = [{"gpu": g, "links": [[n, 1, 26.562, 0, 0, 0] for n in range(18)]}
              for g in range(8)]
    return {"ports": ports, "nvlink": nvlink}


def _streams(hosts: int) -> list[bytes]:
    rng = random.Random(38)
    out = []
    for i in range(hosts):
        lines = agent_stream(100 + i, 12).splitlines(keepends=True)
        hello = lines[0]
        if i % 5 == 1:  # a spoiled hello (its columns too, now and then)
            hello = json.dumps(_spoil(json.loads(hello), rng), separators=(",", ":")).encode() \
                + b"\n"
        fabric = [_fabric_line(rng, i + k) + b"\n" for k in range(3)]
        out.append(b"".join([hello, fabric[0], *lines[1:6], fabric[1], *lines[6:], fabric[2]]))
    return out


def _collector(streams: list[bytes], seed: int) -> tuple[list[Any], list[Any]]:
    """The relay's batch (as the console unpickles it) and each collector reader's counts
    and returned messages."""
    rng = random.Random(seed)
    specs = tuple(HostSpec(name=f"h{i}") for i in range(len(streams)))
    r, w = os.pipe()
    seen: list[Any] = [[] for _ in streams]

    async def run() -> list[Any]:
        relay = Relay(CollectorJob(specs, 4, 3600.0, "collector 1"), w)
        readers = [relay.new_reader(s.name) for s in specs]
        pending = [_chunks(s, rng) for s in streams]
        for s in specs:
            relay.emit(s.name, Connected(T0))
        while any(pending):
            for i, chunks in enumerate(pending):
                if chunks:
                    for m in readers[i].feed(chunks.pop(0)):
                        seen[i].append(_session_view(m))
                        relay.emit(specs[i].name, m)
                    seen[i].append((vars(readers[i].stats).copy(), readers[i].bad_streak))
        batch = relay._take()
        assert relay._flush is not None
        relay._flush.cancel()
        return batch

    try:
        batch = asyncio.run(run())
    finally:
        os.close(r)
        os.close(w)
    return check_batch(unframe(frame(batch)[4:]), len(streams)), seen


def _session_view(m: Any) -> Any:
    """What a collector's session reads of a message its reader returned: a fabric report
    only as a message (the relay forwards its line), with its time (the clock watch)."""
    if isinstance(m, FabricSample):
        return ("fabric", m.ts, m.interval_s)
    return m


def _entry(e: Any) -> Any:
    if isinstance(e, RelayedHello):
        return ("hello", e.hello, repr(e.columns), e.size)
    return e


def _findings(items: list[list[SessionItem]]) -> list[Any]:
    specs = [HostSpec(name=f"h{i}") for i in range(len(items))]
    fleet = FleetState(specs)
    for i, host in enumerate(items):
        for item in host:
            fleet.apply(f"h{i}", item, T0 + 20)
    return [(f.code, f.severity, f.summary, f.host, f.gpu, f.evidence, f.ts, f.extra)
            for f in fleet.all_findings()]


def _pipeline(streams: list[bytes]) -> tuple[Any, Any, Any, Any]:
    batch, seen = _collector(streams, 38)
    items = console_fold(batch, len(streams))
    return [(i, _entry(e)) for i, e in batch], seen, items, _findings(items)


@contextmanager
def _before(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The reference code in place of the new (both processes' code: one process here)."""
    real = protocol._decode_line
    with monkeypatch.context() as m:
        m.setattr(protocol, "check_depth", check_depth_before)
        m.setattr(compact.CompactStream, "_take", take_before)
        m.setattr(protocol, "_columns", columns_before)
        m.setattr(protocol, "_decode_line",
                  lambda line, builds=True: (real(line, True)[0], None))
        m.setattr(fabric, "_judged", judged_before)
        yield


@pytest.fixture(scope="module")
def streams() -> list[bytes]:
    return _streams(24)


def _pipeline_differences(new: Any, old: Any) -> list[str]:
    out = []
    (nb, ns, ni, nf), (ob, os_, oi, of) = new, old
    out += value_differences(nb, ob, "batch")
    out += value_differences(ns, os_, "collector")
    for i, (a, b) in enumerate(zip(ni, oi, strict=True)):
        out += value_differences(a, b, f"console h{i}")
    out += value_differences(nf, of, "findings")
    return out


@pytest.fixture(scope="module")
def new_pipeline(streams: list[bytes]) -> tuple[Any, Any, Any, Any]:
    """The streams through the code as it is, once for the check and its control."""
    return _pipeline(streams)


def test_the_console_gets_what_it_got_before_through_the_collector(
        streams: list[bytes], new_pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    new = new_pipeline
    with _before(monkeypatch):
        old = _pipeline(streams)
    _, seen, items, findings = new
    fabric = sum(type(m).__name__ == "FabricSample" for host in items for m in host)
    garbled = sum(s[-1][0]["garbled"] for s in seen)
    assert fabric > 40 and garbled > 10 and len(findings) > 10, (fabric, garbled, len(findings))
    assert any("IB" in str(f[0]) or "ib" in str(f[0]) for f in findings)
    assert _pipeline_differences(new, old) == []


def test_negative_control_a_wrong_depth_verdict_shows_end_to_end(
        streams: list[bytes], new_pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    new = new_pipeline
    with _before(monkeypatch):
        monkeypatch.setattr(protocol, "check_depth", _depth_with_strings_counted)
        wrong = _pipeline(streams)
    assert _pipeline_differences(new, wrong) != []


# --- a collector's fabric report: checked, not built -------------------------------------

def _fabric_verdicts(shell: Callable[[bytes], Any] | None = None) -> tuple[int, int, int]:
    """Each spoiled fabric line through a collector's reader (thin) and a console's: the
    same verdict (a report or none), counts and streak; the shell's time and interval the
    report's."""
    rng = random.Random(38)
    differ = shells = refused = 0
    for k in range(600):
        line = _fabric_line(rng, k) + b"\n"
        if k % 6 == 5:  # a report the console refuses too
            obj = json.loads(line)
            obj["ts"] = rng.choice((None, -1.0, "x", 1e12, [], True))
            line = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        elif k % 12 == 1:
            line = line[:rng.randrange(20, len(line) - 1)] + b"\n"  # cut short
        thin, full = Thin(), MessageReader()
        a, b = thin.feed(line), full.feed(line)
        if shell is not None:
            a = [shell(line.rstrip())] if line.startswith(b'{"type":"fabric"') else a
        same = len(a) == len(b) and all(
            type(x) is type(y) is FabricSample and (x.ts, x.interval_s) == (y.ts, y.interval_s)
            for x, y in zip(a, b, strict=True))
        differ += not same or (shell is None and (
            vars(thin.stats) != vars(full.stats) or thin.bad_streak != full.bad_streak))
        shells += bool(a) and isinstance(a[0], FabricSample) and not a[0].ports
        refused += not b
    return differ, shells, refused


def test_a_collectors_fabric_report_has_the_consoles_verdict() -> None:
    differ, shells, refused = _fabric_verdicts()
    assert shells > 300 and refused > 20, (shells, refused)
    assert differ == 0


def test_negative_control_a_shell_without_the_typed_decode_is_caught() -> None:
    def trusting(line: bytes) -> FabricSample:
        try:
            obj = json.loads(line)
            ts, interval = float(obj["ts"]), obj.get("interval_s")
        except (ValueError, TypeError, KeyError):
            ts, interval = 0.0, None
        return FabricSample(ts, interval, (), None, None)

    assert _fabric_verdicts(trusting)[0] > 20
