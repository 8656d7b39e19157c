"""No input crashes ``explain``: truncation anywhere, random bytes, every parser on every kind.

Deterministic (fixed seeds), so a failure names a reproducible input.
"""

from __future__ import annotations

import random

import pytest

from probes.explain.detect import KINDS
from probes.explain.run import explain_bytes, to_document
from tests.conftest import FIXTURES
from tests.support.explain_expect import fixture_input

SAMPLES = sorted(FIXTURES.glob("*/*.txt"))


def _check(raw: bytes, kind: str | None = None) -> None:
    doc = to_document([explain_bytes("fuzz", raw, kind)])
    for f in doc["findings"]:  # type: ignore[attr-defined]
        assert f["line"] >= 1 and f["step"] in ("gpu", "syslog", "nccl", "model")


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_truncated_and_corrupted_fixtures_never_crash(sample: object) -> None:
    raw = fixture_input(sample)  # type: ignore[arg-type]
    rng = random.Random(sample.name)  # type: ignore[attr-defined]
    cuts = sorted({*rng.sample(range(len(raw) + 1), min(40, len(raw) + 1)),
                   *(i for i, b in enumerate(raw) if b == 0x0A)})
    for cut in cuts:
        _check(raw[:cut])
    for _ in range(30):
        data = bytearray(raw)
        for _ in range(rng.randint(1, 12)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        _check(bytes(data))
    lines = raw.split(b"\n")
    rng.shuffle(lines)
    _check(b"\n".join(lines))
    _check(raw.replace(b"\n", b"\r\n"))
    _check(b"```\n" + raw + b"\n```")


@pytest.mark.parametrize("kind", KINDS)
def test_every_parser_survives_every_other_kind(kind: str) -> None:
    for sample in SAMPLES:
        _check(fixture_input(sample), kind)


@pytest.mark.parametrize("kind", [None, *KINDS])
def test_pure_noise_never_crashes(kind: str | None) -> None:
    rng = random.Random(7)
    for n in (0, 1, 2, 17, 400, 5000):
        _check(bytes(rng.randrange(256) for _ in range(n)), kind)
    for text in ("|", "+---+", "GPU0\tX", "# gpu", "Device r/s", "{", '{"sysstat":',
                 "Timestamp : x\nGPU 0000:00:00.0", "a,b,c\n1,2", "LnkSta:", "\x00" * 50,
                 "NVRM: Xid (PCI:", "Watchdog caught collective operation timeout: WorkNCCL("):
        _check(text.encode(), kind)
