"""Two per-tick steps of a collector's stream made cheaper (issue 38, the collector's CPU)
answer exactly as before, on random input, each with a negative control:

* ``LineSplitter.feed`` hands a line that lies whole in one chunk on without copying it
  through its buffer: the same lines, ``None`` markers and overlong counts as the old
  splitter (kept here verbatim) for any chunking;
* ``CompactStream._procs_fit`` compares every GPU's process count in one list comparison
  when each GPU's count is known: the same verdict as the old per-GPU loop.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from probes.wire.compact import CompactStream
from probes.wire.protocol import LineSplitter, StreamStats


class OldSplitter(LineSplitter):
    """``LineSplitter.feed`` before the whole-line path."""

    def feed(self, chunk: bytes) -> Iterator[bytes | None]:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._keep(chunk[start:])
                return
            piece = chunk[start:nl]
            start = nl + 1
            if self._discarding:
                self._discarding = False
                self._buf.clear()
                yield None
                continue
            if len(self._buf) + len(piece) > self._max:
                self._stats.overlong += 1
                self._buf.clear()
                yield None
                continue
            self._buf += piece
            line = bytes(self._buf)
            self._buf.clear()
            yield line


class NoLimitSplitter(OldSplitter):
    """Negative control: the whole-line path without its length check."""

    def feed(self, chunk: bytes) -> Iterator[bytes | None]:
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0 and not self._buf and not self._discarding:
            yield chunk[start:nl]
            start = nl + 1
        yield from super().feed(chunk[start:])


def _chunks(rng: random.Random) -> list[bytes]:
    data = b"".join(bytes(rng.randrange(32, 127) for _ in range(rng.choice(
        [0, 1, 5, 40, 90, 130]))) + b"\n" for _ in range(rng.randrange(0, 30)))
    data += b"x" * rng.randrange(0, 3)
    out, at = [], 0
    while at < len(data):
        n = rng.choice([1, 7, 64, 500, 4096])
        out.append(data[at:at + n])
        at += n
    return out


def _run(cls: type[LineSplitter], chunks: list[bytes], limit: int) -> tuple[Any, ...]:
    stats = StreamStats()
    s = cls(stats, limit)
    lines = [line for c in chunks for line in s.feed(c)] + list(s.flush())
    assert all(line is None or type(line) is bytes for line in lines)
    return lines, stats.overlong


def test_the_splitter_gives_the_old_lines_for_any_chunking() -> None:
    rng = random.Random(38)
    for _ in range(2000):
        chunks, limit = _chunks(rng), rng.choice([16, 64, 100, 1 << 18])
        assert _run(LineSplitter, chunks, limit) == _run(OldSplitter, chunks, limit), chunks


def test_negative_control_a_splitter_without_the_limit_is_caught() -> None:
    rng = random.Random(38)
    differ = sum(_run(NoLimitSplitter, c, 64) != _run(OldSplitter, c, 64)
                 for c in (_chunks(rng) for _ in range(300)))
    assert differ > 30


def _old_procs_fit(fit: list[int | None], gpus: list[Any]) -> bool:
    for row, n in zip(gpus, fit, strict=True):
        if n is None:
            continue
        mib = row.processes
        if mib is None or len(mib) != n:
            return False
    return True


def _stream(fit: list[int | None]) -> CompactStream:
    stream = CompactStream.__new__(CompactStream)
    stream._fit = fit
    stream._fit_all = None not in fit
    return stream


def _case(rng: random.Random) -> tuple[list[int | None], list[Any]]:
    n = rng.randrange(1, 9)
    fit: list[int | None] = [rng.choice([0, 1, 2, 3]) for _ in range(n)]
    if rng.random() < 0.3:
        fit[rng.randrange(n)] = None
    gpus = []
    for want in fit:
        k = want if want is not None and rng.random() < 0.8 else rng.randrange(0, 4)
        gpus.append(SimpleNamespace(processes=None if rng.random() < 0.05 else [1.0] * k))
    return fit, gpus


def test_procs_fit_gives_the_old_loop_s_verdict() -> None:
    rng = random.Random(38)
    verdicts = set()
    for _ in range(3000):
        fit, gpus = _case(rng)
        old = _old_procs_fit(fit, gpus)
        assert _stream(fit)._procs_fit(SimpleNamespace(gpus=gpus)) == old, (fit, gpus)  # type: ignore[arg-type]
        verdicts.add(old)
    assert verdicts == {True, False}


def test_negative_control_a_check_that_ignores_null_amounts_is_caught() -> None:
    rng = random.Random(38)
    differ = 0
    for _ in range(3000):
        fit, gpus = _case(rng)
        loose = all(n is None or g.processes is None or len(g.processes) == n
                    for g, n in zip(gpus, fit, strict=True))
        differ += loose != _old_procs_fit(fit, gpus)
    assert differ > 10
