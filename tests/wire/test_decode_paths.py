"""The one-pass msgspec sample path (``probes.wire.structs``) and the checked path agree.

``decode_line`` tries the one-pass path first on a clean sample line and falls back to
the checked decoder on anything it refuses, so the two must give equal samples, with the
same types, on every line the agent writes and on lines mutated into odd shapes.  A path
that silently accepted a negative, a wrong type or a duplicate key would show here.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from typing import Any

import pytest

from probes.errors import ProtocolError
from probes.wire import structs
from probes.wire.protocol import decode_line
from probes.wire.samples import DiskStats, GpuProcess, GpuSample, HostSample, HostStats
from tests.conftest import AGENT_SOURCE

ODD_VALUES: list[object] = [None, True, False, 0, -1, 7, 2**40, 2**53, 2**53 + 1, 2**63 - 1,
                            2**64, 1.5, -0.0, -1e-9, 1e300, 9007199254740993.0, "x", "", "ok",
                            "lost", [], {}, [1, "a", None], ["a", "b"], {"a": 1},
                            [{"pid": 1}], [{"pid": -1}], [{"pid": 1.5}], [5]]


@pytest.fixture(scope="module")
def sample_lines() -> list[bytes]:
    """Sample lines of the real agent over several scenarios (lost GPU, throttle, leak)."""
    out: list[bytes] = []
    for scen in ("xid79:6@60,throttle:5", "leak:3,link-downgrade:2", "healthy"):
        proc = subprocess.run(
            [sys.executable, "-I", "-", "--simulate", scen, "--interval", "30", "--fast",
             "--count", "6", "--seed", "4"],
            input=AGENT_SOURCE, capture_output=True, check=True, timeout=30)
        out += [x for x in proc.stdout.splitlines() if json.loads(x)["type"] == "sample"]
    return out


def _checked(line: bytes) -> Any:
    """``decode_line`` as it was before the one-pass tier: orjson + checks, else ``json``.

    (That tier is itself held to the standard library's in tests/wire/test_protocol.py.)
    """
    saved = structs.decode_sample
    structs.decode_sample = _refuse
    try:
        return _fast(line)
    finally:
        structs.decode_sample = saved


def _refuse(line: bytes) -> HostSample:
    raise structs.Refused("off")


def _fast(line: bytes) -> Any:
    try:
        return decode_line(line)
    except ProtocolError:
        return "garbled"


def _types(s: HostSample) -> list[dict[str, type]]:
    return [{k: type(v) for k, v in vars(g).items()} for g in s.gpus] + \
        [{k: type(v) for k, v in vars(s.host).items()}]


def test_struct_fields_follow_the_dataclasses() -> None:
    """Conversion zips Struct tuples onto dataclass field names: the orders must match."""
    assert structs.GpuS.__struct_fields__ == structs.GPU_FIELDS
    assert tuple(f.name for f in dataclasses.fields(GpuSample)) == structs.GPU_FIELDS
    assert structs.HostS.__struct_fields__ == tuple(f.name for f in dataclasses.fields(HostStats))
    assert ("name", *structs.DiskS.__struct_fields__) == \
        tuple(f.name for f in dataclasses.fields(DiskStats))
    assert structs.ProcessS.__struct_fields__ == \
        tuple(f.name for f in dataclasses.fields(GpuProcess))


def test_agent_lines_take_the_one_pass_path_and_equal_the_checked(
        sample_lines: list[bytes]) -> None:
    for line in sample_lines:
        if b'"pcie"' in line:
            continue
        one = structs.decode_sample(line)  # raises if the fast path refused an agent line
        checked = _checked(line)
        assert one == checked
        assert _types(one) == _types(checked)
        assert one.gpus and one.disks


def test_mutated_values_agree(sample_lines: list[bytes]) -> None:
    """Every GPU, process, host and disk field replaced by odd values of every JSON type."""
    rng = random.Random(20)
    base = json.loads(sample_lines[-1])
    places = ([("gpus", 0, k) for k in base["gpus"][0]] + [("gpus", 3, k) for k in base["gpus"][3]]
              + [("host", None, k) for k in base["host"]]
              + [("disks", name, k) for name, d in base["disks"].items() for k in d]
              + [(None, None, k) for k in ("ts", "seq", "gpus", "host", "disks", "type")])
    agreed_fast = 0
    for _ in range(600):
        obj = json.loads(json.dumps(base))
        picks = rng.sample(places, rng.randint(1, 4))
        for part, sub, key in sorted(picks, key=lambda p: p[0] is None):  # top level last
            target = obj if part is None else obj[part] if sub is None else obj[part][sub]
            target[key] = rng.choice(ODD_VALUES)
        line = json.dumps(obj, separators=(",", ":")).encode()
        fast, checked = _fast(line), _checked(line)
        assert fast == checked, line
        if isinstance(fast, HostSample):
            assert _types(fast) == _types(checked)
            agreed_fast += 1
    assert agreed_fast > 100  # the mutations did not all just garble the line


def test_mutated_bytes_agree(sample_lines: list[bytes]) -> None:
    """Raw edits: a byte dropped, doubled or replaced, a duplicated key, a raw control."""
    rng = random.Random(21)
    line = sample_lines[0]
    cases = [line.replace(b'"type":"sample"', b'"type":"sample","type":"hello"', 1),
             line.replace(b'"seq":', b'"seq":1,"seq":', 1),
             line.replace(b'"temp_c":', b'"temp_c":-0,"temp_c":', 1),
             line.replace(b'"name":"python"', b'"name":"py\tthon"', 1),
             line.replace(b'"name":"python"', b'"name":"py\\u001b]0;x"', 1),
             line[:-1] + b',"x":' + b"[" * 80 + b"]" * 80 + b"}",
             line.replace(b'"util_pct":', b'"util_pct":1e400,"u":', 1)]
    for _ in range(300):
        i = rng.randrange(len(line))
        op = rng.choice(("drop", "double", "swap"))
        if op == "drop":
            cases.append(line[:i] + line[i + 1:])
        elif op == "double":
            cases.append(line[:i] + line[i:i + 1] + line[i:])
        else:
            cases.append(line[:i] + bytes([rng.choice(b'0123456789-.,:"{}[]e ')]) + line[i + 1:])
    for case in cases:
        fast, checked = _fast(case), _checked(case)
        if fast != checked and isinstance(checked, str):
            pytest.fail(f"fast path accepted what the checked path refuses: {case!r}")
        assert fast == checked, case


def test_a_line_with_pcie_chains_falls_back_and_keeps_them(sample_lines: list[bytes]) -> None:
    obj = json.loads(sample_lines[0])
    obj["pcie"] = {"0000:17:00.0": [{"address": "0000:17:00.0", "speed_gts": 32.0, "width": 16}]}
    line = json.dumps(obj).encode()
    with pytest.raises(structs.Refused):
        structs.decode_sample(line)
    s = decode_line(line)
    assert isinstance(s, HostSample) and s.pcie is not None
    assert s.pcie["0000:17:00.0"][0].width == 16
