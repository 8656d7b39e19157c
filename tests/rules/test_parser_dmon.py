"""The ``nvidia-smi dmon`` / ``pmon`` parser: the samples, pmon (no sample of it: these
follow the real layouts of several driver generations), ``-o DT`` columns, repeated and
changing headers, cuts, prefixes, the modest findings, the recogniser, and a fuzz test."""
# ruff: noqa: E501, W291
# (samples keep nvidia-smi's full width and its trailing spaces)

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from probes.rules.parsers import dmon
from probes.rules.parsers.dmon import explain, kind_of, looks_like, parse_dmon
from probes.rules.text import decode, split_lines
from probes.triage import Severity, Step
from tests.conftest import FIXTURES, REPO
from tests.support.explain_expect import (
    expectation,
    finding_set,
    fixture_input,
    garble,
    subset_mismatches,
)

ALL = sorted(FIXTURES.glob("*/*.txt"))
KINDS = {dmon.KIND, dmon.PMON_KIND}
MINE = [p for p in ALL if expectation(p)["kind"] in KINDS]
OTHERS = [p for p in ALL if expectation(p)["kind"] not in KINDS]
HEALTHY = sorted((REPO / "tests" / "data" / "healthy").glob("*.txt"))


def _lines(text: str) -> list[str]:
    return split_lines(text)


def _codes(text: str) -> dict[tuple[str, str | None], Severity]:
    return {(f.code, f.gpu): f.severity for f in explain(_lines(text)).findings}


# --- the samples (tests/fixtures/samples) ---------------------------------------------

@pytest.mark.parametrize("sample", MINE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_gives_its_expected_answer(sample: Path) -> None:
    want = expectation(sample)
    lines = split_lines(decode(fixture_input(sample)))
    assert looks_like(lines)
    assert kind_of(lines) == want["kind"]
    got = explain(lines)
    assert got.kind == want["kind"]
    parsed = json.loads(json.dumps(got.parsed))
    assert subset_mismatches(want["parsed"], parsed) == []
    docs = [f.to_json(sample.name) for f in got.findings]
    assert finding_set(docs) == finding_set(want["findings"])


@pytest.mark.parametrize("sample", OTHERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recogniser_does_not_claim_other_kinds(sample: Path) -> None:
    assert not looks_like(split_lines(decode(fixture_input(sample))))


@pytest.mark.parametrize("sample", HEALTHY, ids=lambda p: p.stem)
def test_recogniser_does_not_claim_healthy_logs(sample: Path) -> None:
    assert not looks_like(split_lines(decode(sample.read_bytes())))


def test_the_fixtures_are_there() -> None:
    assert {p.name[:2] for p in MINE} >= {"02", "04", "06"}
    assert len(OTHERS) >= 50


def test_fixture_units_and_row_objects() -> None:
    (load,) = [p for p in MINE if p.name.startswith("04-")]
    d = parse_dmon(split_lines(decode(fixture_input(load))))
    assert d.main is not None
    assert d.main.units == ("Idx", "W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz", "MHz")
    assert [r.value("pwr") for r in d.rows] == [639, 643, 641, 646, 644]
    assert d.rows[0].line == 3 and not d.main.is_pmon


# --- pmon ------------------------------------------------------------------------------------

PMON_OLD = """\
# gpu        pid  type    sm   mem   enc   dec   command
# Idx          #   C/G     %     %     %     %   name
    0      22010     C    98    56     -     -   python3
    1          -     -     -     -     -     -   -
    2       4117     G     0     1     -     -   Xorg
    0      22010     C    97    55     -     -   python3
"""

PMON_NEW = """\
# gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   ccpm    command 
# Idx           #    C/G      %      %      %      %      %      %     MB     MB    name 
    0     1864615     C     84     23      -      -      -      -  24395      0    python train.py --cfg a.yaml 
    1     2233095   C+G      -      -      -      -      -      -    535      0    my app 
    2           -     -      -      -      -      -      -      -      -      -    -         
"""

PMON_DT = """\
#Date       Time        gpu        pid  type    sm   mem   enc   dec   command
#YYYYMMDD   HH:MM:SS    Idx          #   C/G     %     %     %     %   name
 20240104   13:54:35      0      12345     C    85    42     0     0   python
 20240104   13:54:35      1      12347     C    92    55     0     0   tensorflow
"""


def test_pmon_old_layout() -> None:
    lines = _lines(PMON_OLD)
    assert looks_like(lines) and kind_of(lines) == dmon.PMON_KIND
    res = explain(lines)
    assert res.kind == "pmon" and res.findings == ()
    assert res.parsed["columns"] == ["gpu", "pid", "type", "sm", "mem", "enc", "dec",
                                     "command"]
    assert res.parsed["rows"] == [
        [0, 22010, "C", 98, 56, None, None, "python3"],
        [1, None, None, None, None, None, None, None],
        [2, 4117, "G", 0, 1, None, None, "Xorg"],
        [0, 22010, "C", 97, 55, None, None, "python3"]]


def test_pmon_newer_columns_and_commands_with_spaces() -> None:
    res = explain(_lines(PMON_NEW))
    assert res.kind == "pmon"
    assert res.parsed["columns"] == ["gpu", "pid", "type", "sm", "mem", "enc", "dec", "jpg",
                                     "ofa", "fb", "ccpm", "command"]
    rows = res.parsed["rows"]
    assert isinstance(rows, list)
    assert rows[0] == [0, 1864615, "C", 84, 23, None, None, None, None, 24395, 0,
                       "python train.py --cfg a.yaml"]
    assert rows[1][2] == "C+G" and rows[1][-1] == "my app"
    assert rows[2] == [2, *([None] * 11)]
    assert res.parsed["units"][-1] == "name"  # type: ignore[index]


def test_pmon_with_date_and_time() -> None:
    lines = _lines(PMON_DT)
    assert looks_like(lines) and kind_of(lines) == "pmon"
    res = explain(lines)
    assert res.parsed["columns"][:4] == ["date", "time", "gpu", "pid"]  # type: ignore[index]
    assert res.parsed["rows"][1] == [20240104, "13:54:35", 1, 12347, "C", 92, 55, 0, 0,  # type: ignore[index]
                                     "tensorflow"]


def test_pmon_with_no_process_at_all() -> None:
    text = "\n".join(PMON_OLD.splitlines()[:2])
    assert looks_like(_lines(text)) and kind_of(_lines(text)) == "pmon"
    assert explain(_lines(text)).parsed["rows"] == []


# --- dmon variants -----------------------------------------------------------------------------

DMON_DT_V = """\
#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk  pviol  tviol  sbecc  dbecc    pci  rxpci  txpci
#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %    MHz    MHz      %   bool   errs   errs   errs   MB/s   MB/s
 20240104   13:54:35      0    690     84     90    100     60      0      0   2619   1410     12      0      0      0      0    210    677
 20240104   13:54:35      1    520     61     70    100     58      0      0   2619   1980      0      0      0      0      0    217    677
 20240104   13:54:35      2     71     40     44      0      0      0      0   2619    345      3      0      0      0      0      0      0
 20240104   13:54:35      3    700     89     95    100     61      0      0   2619   1200      0      1      0      0      0    205    660

 20240104   13:54:36      0    688     85     90    100     60      0      0   2619   1410     15      0      0      0      0    211    675
 20240104   13:54:36      1    522     61     70    100     58      0      0   2619   1980      0      0      4      2      0    217    677
"""


def test_dmon_dt_violations_and_ecc() -> None:
    lines = _lines(DMON_DT_V)
    assert looks_like(lines) and kind_of(lines) == "dmon"
    res = explain(lines)
    assert res.kind == "dmon"
    cols = res.parsed["columns"]
    assert isinstance(cols, list) and cols[:3] == ["date", "time", "gpu"] and len(cols) == 19
    assert len(res.parsed["rows"]) == 6  # type: ignore[arg-type]
    assert _codes(DMON_DT_V) == {("clocks-throttled", "GPU0"): Severity.WARNING,
                                 ("clocks-throttled", "GPU3"): Severity.WARNING,
                                 ("ecc-uncorrectable", "GPU1"): Severity.CRITICAL}
    f = next(f for f in res.findings if f.gpu == "GPU0")
    assert (f.line, f.count, f.time, f.step) == (3, 2, "20240104 13:54:35", Step.GPU)
    assert "power-cap violation 12 %" in f.summary


def test_power_violation_without_an_sm_column_counts() -> None:
    text = "# gpu  pviol  tviol\n# Idx      %   bool\n    0      5      0\n    1      0      0\n"
    assert _codes(text) == {("clocks-throttled", "GPU0"): Severity.WARNING}


DMON_MULTI = """\
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
# Idx      W      C      C      %      %      %      %    MHz    MHz
    0     72     36      -      0      0      0      0   2619    345
    1     71     36      -      0      0      0      0   2619    345
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
# Idx      W      C      C      %      %      %      %    MHz    MHz
    0     73     36      -      0      0      0      0   2619    345
    1     70     37      -      0      0      0      0   2619    345
"""


def test_repeated_header_is_skipped_and_dash_is_null() -> None:
    d = parse_dmon(_lines(DMON_MULTI))
    assert len(d.tables) == 1 and len(d.rows) == 4
    res = explain(_lines(DMON_MULTI))
    assert res.parsed["rows"][2] == [0, 73, 36, None, 0, 0, 0, 0, 2619, 345]  # type: ignore[index]
    assert res.findings == ()


def test_a_different_header_is_a_table_of_its_own() -> None:
    text = DMON_MULTI + "# gpu    sm   mem   enc   dec\n# Idx     %     %     %     %\n" \
        "    0     3     1     0     0\n"
    d = parse_dmon(_lines(text))
    assert [len(t.columns) for t in d.tables] == [10, 5]
    assert len(d.rows) == 4 and d.tables[1].rows[0].value("sm") == 3


def test_cut_rows_garbage_rows_prefixes_and_crlf() -> None:
    text = ("gpu01: # gpu    sm   mem   enc   dec\r\n"
            "gpu01: # Idx     %     %     %     %\r\n"
            "gpu01:     0    95    40     0     0\r\n"
            "gpu02:     0    97    41     0     0\r\n"
            "Segmentation fault\r\n"
            "    0    1    2    3    4    5    6\r\n"
            "gpu01:     1    93    4")
    lines = split_lines(decode(text.encode()))
    assert looks_like(lines)
    d = parse_dmon(lines)
    assert [(r.host, list(r.values), r.cut) for r in d.rows] == [
        ("gpu01", [0, 95, 40, 0, 0], False), ("gpu02", [0, 97, 41, 0, 0], False),
        ("gpu01", [1, 93], True)]


def test_fenced_and_quoted_paste() -> None:
    text = "```\n" + "\n".join("> " + line for line in DMON_MULTI.splitlines()) + "\n```\n"
    assert looks_like(_lines(text))
    assert len(parse_dmon(_lines(text)).rows) == 4


@pytest.mark.parametrize("text", [
    "# gpu    pwr  gtemp\n    0     72     36\n",           # no units row
    "# Idx      W      C\n    0     72     36\n",           # no names row
    "# gpu stats follow\nsome log line\n# Idx is the index\n",
    "GPU0    X      NV12\nGPU1    NV12   X\n",
    "Device            r/s     w/s\nsda              1.00    2.00\n",
    "", "\n",
])
def test_not_claimed(text: str) -> None:
    assert not looks_like(_lines(text))


def test_kind_of_without_a_header_pair_and_empty_inputs() -> None:
    assert kind_of([]) == "dmon"
    for lines in ([], [""], ["   "]):
        res = explain(lines)
        assert res.parsed == {"columns": [], "rows": []} and res.findings == ()


# --- never raise --------------------------------------------------------------------------------

def _corpus() -> list[list[str]]:
    out = [_lines(t) for t in (PMON_OLD, PMON_NEW, PMON_DT, DMON_DT_V, DMON_MULTI)]
    out += [split_lines(decode(fixture_input(p))) for p in MINE]
    return out


def test_truncation_at_every_line_and_char_never_raises() -> None:
    for lines in _corpus():
        for n in range(len(lines) + 1):
            explain(lines[:n])
            looks_like(lines[:n])
            if n < len(lines):
                for k in range(0, len(lines[n]), 5):
                    json.dumps(explain([*lines[:n], lines[n][:k]]).parsed)


def test_random_garbage_never_raises() -> None:
    rng = random.Random(2468)
    alphabet = "# gpuIdxpidC/G%WMHz0123456789-:.\t\ufffd`>"
    base = _corpus()
    for _ in range(300):
        lines = garble(rng, list(rng.choice(base)), alphabet, 100)
        looks_like(lines)
        kind_of(lines)
        res = explain(lines)
        json.dumps(res.parsed)
        for f in res.findings:
            assert f.line >= 1
    raw = bytes(rng.randrange(256) for _ in range(5000))
    explain(split_lines(decode(raw)))
