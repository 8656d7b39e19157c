"""A flush's block encoded for the raw tier at once, a cast per codec (issue 38, session 7):
the bits must be those the raw codecs write series by series (``Codec.encode``: a
``struct.pack`` of half precision, an ``array('f')``).

Random doubles over every half-precision exponent (subnormals included), exact ties
between two halves, ±0, NaN, values just under, at and past half precision's largest
(65504; ``struct`` refuses 65520 and more, and the codec clamps that series), infinities,
and float32's range; cut as blocks of 16 samples, compared key by key with the codec.  The
histories' answers with the block so written are held to the code before by
``test_block_columns`` (its random streams swap past 65520 pages/s).  Negative control: a
clamp a little low is seen there.
"""

from __future__ import annotations

import math
import random
from array import array
from typing import Any

import pytest

from probes.history import block as block_mod
from probes.history.block import Block
from probes.history.keys import codec_for, gpu_key, host_key
from probes.history.storage import HALF_MAX
from tests.history.test_block_columns import SHORT, _differences, _random_stream

EDGES = (0.0, -0.0, math.nan, HALF_MAX, -HALF_MAX, 65519.99, 65520.0, -65520.0, 1e5,
         math.inf, -math.inf, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 6.1e-5, 1e-300, 3.4e38,
         1e39, -1e300)


def _value(rng: random.Random) -> float:
    r = rng.random()
    if r < 0.05:
        return rng.choice(EDGES)
    if r < 0.3:  # halfway between two halves: ties go to the even one
        return rng.choice((1, -1)) * (rng.randrange(2048) + 0.5) * 2.0 ** rng.randrange(-34, 6)
    return rng.choice((1, -1)) * 2.0 ** rng.uniform(-30, 18)


def _block(rng: random.Random, rows: int) -> Block:
    keys = [gpu_key(i, f) for i in range(3)
            for f in ("util_pct", "temp_c", "power_w", "sm_clock_mhz", "mem_used_mib")]
    keys += [host_key("cpu_pct"), host_key("mem_used_bytes"), host_key("swap_out_pages_s")]
    width = len(keys) + 2
    cols: dict[str, int | list[float]] = {key: j + 1 for j, key in enumerate(keys)}
    cols[host_key("gpu_count")] = [8.0] * rows
    calm = rng.random() < 0.3  # every value in range: no series clamped
    flat = array("d", [min(max(_value(rng), -6e4), 6e4) if calm else _value(rng)
                       for _ in range(rows * width)])
    return Block(flat, width, cols)


def test_the_block_encoded_at_once_is_what_each_codec_writes() -> None:
    rng = random.Random(38)
    compared = clamped = 0
    for _ in range(300):
        b = _block(rng, rng.choice((1, 2, 16)))
        encoded: dict[str, tuple[str, bytes]] = {}
        for codec, keys, enc in b.encoded():
            for i, key in enumerate(keys):
                encoded[key] = (codec.store, enc[:, i].tobytes())
        assert sorted(encoded) == sorted(b.cols)  # every series, the computed ones too
        for key, vals in b.columns().items():
            want = codec_for(key, 0).encode(vals)
            assert encoded[key] == (want.typecode, want.tobytes()), key
            compared += 1
            clamped += any(abs(v) >= 65520.0 for v in vals) and want.typecode == "H"
    assert compared > 5000 and clamped > 100


def test_negative_control_a_clamp_a_little_low_is_seen(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setattr(block_mod, "HALF_MAX", 65000.0)
    streams: list[Any] = [(_random_stream(1, 400), None), (_random_stream(2, 400), SHORT)]
    differ, _, _ = _differences(streams, every=199)
    assert differ > 0
