"""A static epoch's GPUs hold their values in slots (issue 38, memory in the UI process).

``StaticEpoch.gpus`` (and ``CompactStream._gpu_base``, the same objects) were ``GpuSample``
objects over a 38-key dict each, ~900 bytes a GPU held for as long as the epoch lasts; they
are now ``StaticGpu``, a slotted ``GpuSample`` (~390 bytes), and the samples' GPUs are
filled from its slots.  Checked against main's form (the static half a dict, the filler a
copy of it), set up here by replacing the two functions that make and read it, over random
v2 streams with spoiled ``static`` messages (``test_static_check_once``) and the bench's
template streams: every message, every sample's GPUs (fields, their types, the dicts' key
order and size), every static half's fields and the static findings equal.  Negative
control: a static half that keeps one moving value of its first tick is caught.
"""

from __future__ import annotations

import sys
import tracemalloc
from typing import Any

import pytest

from probes.analysis.allocation import stray_process_findings
from probes.analysis.findings import sample_findings
from probes.analysis.limits import DEFAULT_LIMITS
from probes.wire import compact
from probes.wire.protocol import MessageReader
from probes.wire.samples import GpuSample, Hello, HostSample
from tests.bench.bench_ingest import template
from tests.transport.test_relay_rows import value_differences
from tests.wire.test_shared_facts import _typed
from tests.wire.test_static_check_once import _streams

_new = object.__new__
_set = object.__setattr__
_old_fill = compact.row_filler(compact.GPU_ROW_FIELDS, skip="processes")


def _main_static_gpu(checked: GpuSample) -> GpuSample:
    """main's static half: a ``GpuSample`` over a dict of every field, moving ones None."""
    base = {k: getattr(checked, k) for k in compact._STATIC_VALUES} | \
        dict.fromkeys(compact.GPU_ROW_FIELDS)
    base["processes"] = checked.processes
    obj = _new(GpuSample)
    _set(obj, "__dict__", base)
    return obj


def _main_fill(base: GpuSample, row: Any) -> dict[str, Any]:
    return _old_fill(base.__dict__, row)


def _static_facts(g: Any) -> object:
    return None if g is None else _typed(compact._as_sample(g))


def _gpu_shape(g: GpuSample) -> object:
    d = vars(g)
    return list(d), sys.getsizeof(d), [list(vars(p)) for p in g.processes or ()]


def _run(stream: bytes) -> list[object]:
    reader = MessageReader()
    out: list[object] = []
    hello: Hello | None = None
    for line in stream.splitlines(keepends=True):
        for m in reader.feed(line):
            if isinstance(m, HostSample):
                gpus = m.gpus  # built (a row sample's from its epoch's halves)
                out.append(m)
                out.append(("gpus", [_gpu_shape(g) for g in gpus],
                            [_static_facts(g) for g in compact.static_gpus(m)],
                            compact.listed_gpus(m),
                            sample_findings("h", hello, m, DEFAULT_LIMITS),
                            stray_process_findings("h", m, DEFAULT_LIMITS)))
            else:
                hello = m if isinstance(m, Hello) else hello
                out.append(m)
        c = reader.compact
        if c is not None and b'"static"' in line:
            out.append(("static", [_static_facts(g) for g in c._gpu_base],
                        [_static_facts(g) for g in c._epoch.gpus], c._epoch.listed,
                        c._whole, c._fit))
    return out


def _differences(got: list[object], want: list[object]) -> list[str]:
    if len(got) != len(want):
        return [f"{len(got)} messages for {len(want)}"]
    out = []
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if isinstance(a, HostSample):
            out += [f"{k}{d}" for d in value_differences(a, b)]
        elif a != b:
            out.append(f"{k}: {str(a)[:200]} for {str(b)[:200]}")
    return out


def _bench_streams(n: int, seconds: int = 20) -> list[bytes]:
    out = []
    for k in range(n):
        hellos, ticks = template(k, seconds)[1]
        out.append(hellos + b"".join(ticks))
    return out


@pytest.fixture(scope="module")
def streams() -> list[bytes]:
    return _streams(8) + _bench_streams(4)


def _compare(streams: list[bytes], monkeypatch: pytest.MonkeyPatch,
             static_gpu: Any = None) -> tuple[int, list[str]]:
    with monkeypatch.context() as m:
        if static_gpu is not None:
            m.setattr(compact, "_static_gpu", static_gpu)
        got = [_run(s) for s in streams]
    with monkeypatch.context() as m:  # main's form: a dict per static half
        m.setattr(compact, "_static_gpu", _main_static_gpu)
        m.setattr(compact, "_fill_gpu", _main_fill)
        want = [_run(s) for s in streams]
    samples = sum(1 for w in want for x in w if isinstance(x, HostSample))
    return samples, [f"stream {i}: {d}" for i, (a, b) in enumerate(zip(got, want, strict=True))
                     for d in _differences(a, b)]


def test_slotted_static_halves_give_every_value_main_gave(
        streams: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    samples, diffs = _compare(streams, monkeypatch)
    assert diffs == []
    assert samples > 200, samples


def test_negative_control_a_static_half_with_a_moving_value_is_caught(
        streams: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    real = compact._static_gpu

    def leaky(checked: GpuSample) -> compact.StaticGpu:
        g = real(checked)
        _set(g, "temp_c", 41.0)  # a moving value left in the static half
        return g

    _, diffs = _compare(streams[-2:], monkeypatch, leaky)
    assert diffs != []


def test_a_static_half_reads_compares_and_copies_as_a_gpu_sample() -> None:
    stream = _bench_streams(1, 2)[0]
    samples = [m for m in MessageReader().feed(stream) if isinstance(m, HostSample)]
    g = samples[-1].static_epoch.gpus[0]  # type: ignore[union-attr]
    plain = compact._as_sample(g)
    assert isinstance(g, GpuSample) and type(plain) is GpuSample
    assert g == plain and plain == g and hash(g) == hash(plain) and g != samples[-1].gpus[0]
    assert repr(g) == repr(plain)
    import copy
    import pickle
    for c in (copy.copy(g), copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert type(c) is compact.StaticGpu and c == g


def _held_per_gpu(monkeypatch: pytest.MonkeyPatch, static_gpu: Any = None) -> float:
    """Bytes a ``static`` message leaves held, a GPU, over 64 hosts' streams (traced)."""
    stream = _bench_streams(1, 2)[0]
    hello, rest = stream.split(b"\n", 1)
    static = next(x for x in rest.split(b"\n") if x.startswith(b'{"type":"static"')) + b"\n"
    with monkeypatch.context() as m:
        if static_gpu is not None:
            m.setattr(compact, "_static_gpu", static_gpu)
        readers = [MessageReader() for _ in range(64)]
        for r in readers:
            list(r.feed(hello + b"\n"))
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for r in readers:
            list(r.feed(static))
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        gpus = sum(len(r.compact._gpu_base) for r in readers)  # type: ignore[union-attr]
    assert gpus == 64 * 8
    return (after - before) / gpus


def test_an_epoch_holds_its_gpus_in_under_half_main_s_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on main (~1,960 bytes a GPU there, ~1,450 here: the static half ~900 -> ~390)."""
    now = _held_per_gpu(monkeypatch)
    main = _held_per_gpu(monkeypatch, _main_static_gpu)
    print(f"held a GPU: main's form {main:.0f} B, slotted {now:.0f} B")
    assert now < 1700, now
    assert now < main - 450, (now, main)
