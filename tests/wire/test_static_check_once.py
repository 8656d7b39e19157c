"""A ``static`` message's facts go through v1's check in one call (issue 38, start-up).

``CompactStream._take`` checked the static host once and each GPU alone (nine calls of v1's
decoder for an 8-GPU host).  It now checks the host and every GPU in one call wherever that
call keeps every GPU, and falls back to the GPU-by-GPU check (the code as it was) where v1
drops one or refuses the whole.  Checked against that GPU-by-GPU path over the agent
simulator's ``static`` messages, spoiled at random as hosts spoil them: GPUs whose index v1
refuses (dropped), values of other types and signs, odd or missing processes, hostile text
(``test_clean_tree``'s strings at random paths), a host that is no list.  Equal means the
stream's whole state after the message (the checked halves, their types and signs, what the
fast path's checks use) and every tick's sample after it, or the same refusal.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from probes.wire.compact import CompactStream
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.transport.test_relay_rows import agent_stream, value_differences
from tests.wire.test_clean_tree import _spoil
from tests.wire.test_shared_facts import _typed
from tests.wire.test_wire_v2 import odd

_STATE = ("_has_static", "_static_gpus", "_static_host", "_gpu_base", "_procs", "_host_base",
          "_last_procs", "_whole", "_proc_counts", "_fit", "_fit_all", "_thin")


def _spoiled_static(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj))
    gpus = obj.get("gpus")
    for _ in range(rng.choice((1, 1, 2, 3))):
        what = rng.random()
        if isinstance(gpus, list) and gpus and what < 0.6:
            g = gpus[rng.randrange(len(gpus))]
            if not isinstance(g, list) or not g:
                continue
            at = 0 if what < 0.2 else rng.randrange(len(g))  # the index: v1 may drop the GPU
            g[at] = odd(rng, -1, 1024, 3.0, "0")
        elif what < 0.7 and isinstance(gpus, list) and gpus:
            g = gpus[rng.randrange(len(gpus))]
            if isinstance(g, list) and g:  # the processes
                g[-1] = rng.choice([None, [], "x", [[1, "p"]], [[None] * 20], [["a"] * 3],
                                    [[7, "python", "u", "1", None, 0, -1]]])
        elif what < 0.8:
            obj["host"] = rng.choice([None, [], [1], ["x", -5], {"a": 1}, [2**64, 1.5]])
        elif what < 0.85:
            obj["gpus"] = rng.choice([None, [], {}, [None, 1, "x"]])
            gpus = obj["gpus"]
        else:
            obj = _spoil(obj, rng)
            gpus = obj.get("gpus")
    return obj


def _streams(n: int) -> list[bytes]:
    """Streams of hello, static, ticks; every static after the first spoiled (some kept)."""
    rng = random.Random(8)
    out = []
    for seed in range(n):
        lines = agent_stream(seed, 30, spoil=False).splitlines(keepends=True)
        for k, line in enumerate(lines):
            if line.startswith(b'{"type":"static"') and rng.random() < 0.8:
                spoiled = _spoiled_static(json.loads(line), rng)
                lines[k] = json.dumps(spoiled).encode() + b"\n"
        out.append(b"".join(lines))
    return out


def _run(stream: bytes) -> list[object]:
    """Every message the reader gives and its stream's state after each ``static``."""
    reader = MessageReader()
    out: list[object] = []
    for line in stream.splitlines(keepends=True):
        out += reader.feed(line)
        c = reader.compact
        if c is not None and b'"static"' in line:
            out.append(("state", reader.stats.garbled,
                        [_typed(getattr(c, k)) for k in _STATE],
                        _typed(c._epoch.gpus), c._epoch.listed))
    return out


def _differences(got: list[object], want: list[object]) -> list[str]:
    if len(got) != len(want):
        return [f"{len(got)} for {len(want)}"]
    out = []
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if isinstance(a, HostSample):
            out += [f"{k}{d}" for d in value_differences(a, b)]
        elif a != b:
            out.append(f"{k}: state differs")
    return out


def _compare(streams: list[bytes], monkeypatch: pytest.MonkeyPatch,
             check_all: Any = None) -> tuple[int, list[str]]:
    with monkeypatch.context() as m:
        if check_all is not None:
            m.setattr(CompactStream, "_check_all", check_all)
        got = [_run(s) for s in streams]
    with monkeypatch.context() as m:  # the GPU-by-GPU check alone: the code before
        m.setattr(CompactStream, "_check_all", lambda self, gpus: None)
        want = [_run(s) for s in streams]
    states = sum(1 for w in want for x in w if isinstance(x, tuple))
    return states, [f"host {i}: {d}" for i, (a, b) in enumerate(zip(got, want, strict=True))
                    for d in _differences(a, b)]


@pytest.fixture(scope="module")
def streams() -> list[bytes]:
    return _streams(8)


def test_the_static_checked_in_one_call_is_the_static_checked_gpu_by_gpu(
        streams: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"one": 0, "fallback": 0}
    real = CompactStream._check_all

    def counting(self: CompactStream, gpus: list[dict[str, Any]]) -> Any:
        got = real(self, gpus)
        calls["one" if got is not None else "fallback"] += 1
        return got

    states, diffs = _compare(streams, monkeypatch, counting)
    assert diffs == []
    assert states > 40 and calls["one"] > 15 and calls["fallback"] > 5, (states, calls)


def test_negative_control_one_call_that_keeps_its_place_when_a_gpu_is_dropped_is_caught(
        streams: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that takes the one call's GPUs by position even where v1 dropped one."""
    def careless(self: CompactStream, gpus: list[dict[str, Any]]) -> Any:
        try:
            return self._checked({"type": "sample", "ts": 1.0, "host": self._static_host,
                                  "gpus": gpus})
        except Exception:
            return None

    _, diffs = _compare(streams, monkeypatch, careless)
    assert diffs != []
