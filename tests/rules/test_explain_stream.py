"""``explain`` reads a large input in blocks with bounded memory (review finding 11) and
gives the answer the whole-file read gave.

Before: the whole file became one list of lines and then of peeled lines, about ten times
its size (2.1 GB peak for a 200 MB kernel log).  The memory figures are in
``tests/bench/bench_explain.py`` (run by ``test_bench_quick``); here is what must hold.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from probes.explain import stream
from probes.explain.run import explain_bytes, to_document
from probes.rules.text import decode, split_lines
from tests.conftest import FIXTURES
from tests.support.explain_expect import expectation, fixture_input
from tui.cli import main

FILLER = "Dec  3 00:00:00 gpu-a01 systemd[1]: Started session {i} of user ops.\n"
LOG_SAMPLES = [p for p in sorted(FIXTURES.glob("*/*.txt"))
               if expectation(p)["kind"] == "log"]


def _filler(nbytes: int) -> tuple[str, int]:
    out, size, i = [], 0, 0
    while size < nbytes:
        line = FILLER.format(i=i)
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out), i


def _without_source(doc: dict, offset: int = 0) -> list[dict]:
    return [{**f, "source": None, "line": f["line"] - offset} for f in doc["findings"]]


@pytest.mark.parametrize("sample", LOG_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_log_deep_in_a_large_file_gives_the_same_findings(
        sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample's lines 1.5 windows into a file past the whole-read size, inside one
    window; every finding as the sample alone gives it, its line number shifted.  (The
    sizes are scaled down to the sample's, so that the test reads kilobytes, not MiB.)"""
    text = fixture_input(sample).decode("utf-8", "replace")
    text += "" if text.endswith("\n") else "\n"
    block = max(64 * 1024, 4 * len(text.encode()))
    monkeypatch.setattr(stream, "BLOCK_BYTES", block)
    monkeypatch.setattr(stream, "WHOLE_BYTES", 2 * block)
    monkeypatch.setattr(stream, "DETECT_BYTES", block // 2)
    before, n_before = _filler(int(1.5 * block))
    after, _ = _filler(2 * block)
    big = (before + text + after).encode()
    alone: dict[str, Any] = to_document([explain_bytes("x", text.encode())])
    streamed: dict[str, Any] = to_document([stream.explain_stream("x", io.BytesIO(big))])
    assert streamed["inputs"][0]["kind"] == "log"
    parsed = streamed["inputs"][0]["parsed"]
    assert parsed["lines"] == len(split_lines(decode(big)))
    assert set(parsed) <= {"lines", "throughput"}  # a training log's speed (issue 23)
    speed = alone["inputs"][0]["parsed"].get("throughput")
    assert (parsed.get("throughput") or {}).get("points") == (speed or {}).get("points")
    assert _without_source(streamed, n_before) == _without_source(alone)


def test_a_large_log_through_the_command(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Real sizes once: 6 MiB, windows of 2 MiB; an Xid on the last line is numbered so."""
    filler, n = _filler(6 * 1024 * 1024)
    path = tmp_path / "kern.log"
    path.write_text(filler + "Dec  3 00:00:01 gpu-a01 kernel: NVRM: Xid (PCI:0000:18:00): 79, "
                    "pid=0, GPU has fallen off the bus.\n")
    assert path.stat().st_size > stream.WHOLE_BYTES
    assert main(["explain", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"][0]["parsed"] == {"lines": n + 1}
    assert [(f["code"], f["xid"], f["line"]) for f in doc["findings"]] == [("xid", 79, n + 1)]


def test_blocks_split_lines_exactly_as_the_whole_text() -> None:
    rng = random.Random(7)
    pieces = ["a", "b", " ", "\n", "\r", "\r\n", "\x85", "\u2028", "é", "\ufeff", "\x1b", "\t"]
    for trial in range(2000):
        raw = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 80))).encode()
        raw += b"\xff\xe2\x82" if trial % 5 == 0 else b""
        reader = stream._Lines()
        got: list[str] = []
        step = rng.randint(1, 9)
        for at in range(0, len(raw), step):
            got += reader.feed(raw[at:at + step])
        got += reader.feed(b"", final=True)
        assert got == split_lines(decode(raw)), raw


def test_an_endless_line_keeps_its_head_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "MAX_LINE_CHARS", 100)
    raw = (b"x" * 1000 + b"\r\n" + b"NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off "
           b"the bus.\n" + b"y" * 500)
    blocks = (raw[at:at + 7] for at in range(0, len(raw), 7))
    result = stream.explain_log_blocks(blocks)
    assert result.parsed == {"lines": 3, "long_lines_cut": 2, "max_line_chars": 100}
    (xid,) = result.findings
    assert (xid.code, xid.xid, xid.line) == ("xid", 79, 2)


def test_a_huge_structured_output_is_parsed_from_its_head(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name, size in (("BLOCK_BYTES", 16), ("WHOLE_BYTES", 64), ("DETECT_BYTES", 16),
                       ("MAX_STRUCTURED_BYTES", 128)):
        monkeypatch.setattr(stream, name, size * 1024)  # scaled down: the parse is slow
    header = "index, name, temperature.gpu, utilization.gpu [%]\n"
    row = "0, NVIDIA H100 80GB HBM3, 41, 0 %\n"
    path = tmp_path / "smi.csv"
    path.write_text(header + row * (512 * 1024 // len(row)))
    assert main(["explain", "--json", str(path)]) == 0
    (got,) = json.loads(capsys.readouterr().out)["inputs"]
    assert got["kind"] == "nvidia-smi-csv"
    assert got["parsed"]["bytes_read"] == 128 * 1024
    assert got["parsed"]["bytes_read"] + got["parsed"]["bytes_skipped"] == path.stat().st_size
    assert main(["explain", str(path)]) == 0
    assert "bytes skipped" in capsys.readouterr().out


def test_every_file_opens_before_any_is_read(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "k.log"
    good.write_text("NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n")
    assert main(["explain", "--json", str(good), str(tmp_path / "missing.log")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "missing.log: cannot read" in out.err
