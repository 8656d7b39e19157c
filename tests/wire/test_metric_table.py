"""A GPU metric is named in one table (``probes/wire/fields.py``).

The first tests check what cannot be derived from the table: the agent's standalone column
lists, the typed ``GpuSample`` attributes, the history's ``Literal`` names.  The last adds a
moving GPU field to the table alone, in a fresh interpreter before anything derives from it,
and follows one simulated host's stream through the whole house: decoded (wire v2's fast
and checked paths, v1), recorded and read back, exported (Prometheus text, CSV) and charted
(a history series), and named in the Prometheus source's field map.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

from probes.agent import output
from probes.history import keys
from probes.outputs import export
from probes.sources.prometheus import fields as prometheus_fields
from probes.store import columns
from probes.wire import compact, fields, structs
from probes.wire.fields import GPU_TABLE, Move, Type
from probes.wire.samples import GpuSample
from tests.conftest import AGENT_SOURCE, REPO

_TYPES = {Type.AMOUNT: "float | None", Type.COUNT: "int | None", Type.FLAG: "bool | None",
          Type.TEXT: "str | None", Type.INDEX: "int", Type.STATE: "GpuState",
          Type.REASONS: "tuple[str, ...]", Type.PROCESSES: "tuple[GpuProcess, ...] | None",
          Type.PROCESS_MIB: "tuple[GpuProcess, ...] | None"}


def test_the_table_names_every_gpu_sample_field_with_its_type() -> None:
    declared = {f.name: str(f.type) for f in dataclasses.fields(GpuSample)}
    assert set(fields.names(GPU_TABLE)) == set(declared)
    for spec in GPU_TABLE:
        assert declared[spec.name] == _TYPES[spec.type], spec.name
    static = [s.column for s in GPU_TABLE if s.move is Move.STATIC]
    moving = [s.column for s in GPU_TABLE if s.move is Move.MOVING]
    assert len(set(static)) == len(static) and len(set(moving)) == len(moving)


def test_only_a_moving_field_is_charted_and_every_charted_one_is_a_number() -> None:
    for spec in fields.charted(GPU_TABLE):
        assert spec.move is Move.MOVING and spec.type in fields.NUMBERS, spec.name


def test_the_agent_declares_the_tables_columns() -> None:
    """The agent is one standalone file (``probes/transport/bootstrap.py``): its copy of the
    column lists is held to the table here."""
    assert output.GPU_STATIC == fields.static_columns(GPU_TABLE) == compact.GPU_STATIC
    assert output.GPU_MOVING == fields.moving_columns(GPU_TABLE) == compact.GPU_MOVING


def test_the_wire_keeps_its_positions() -> None:
    """Columns are positional on the wire: recordings and agents of today must still decode,
    so an existing field never moves (a new one goes at the end)."""
    assert compact.GPU_MOVING[:12] == (
        "mem_used_mib", "util_pct", "mem_util_pct", "temp_c", "power_w", "sm_clock_mhz",
        "temp_mem_c", "mem_clock_mhz", "pcie_tx_kbs", "pcie_rx_kbs", "clock_reasons",
        "process_used_mib")
    assert compact.GPU_STATIC[:27] == (
        "index", "uuid", "state", "bus_id", "mem_total_mib", "power_limit_w",
        "sm_clock_max_mhz", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max",
        "mem_clock_max_mhz", "pstate", "ecc_corrected_volatile", "ecc_uncorrected_volatile",
        "ecc_corrected_aggregate", "ecc_uncorrected_aggregate", "retired_pages_pending",
        "remap_correctable", "remap_uncorrectable", "remap_pending", "remap_failure",
        "nvlink_up", "nvlink_links", "persistence", "pcie_replay", "processes")
    assert columns.GPU_NUMBERS[:10] == compact.GPU_MOVING[:10]


def test_the_derived_lists_agree_with_the_table() -> None:
    moving_numbers = [s.name for s in GPU_TABLE if s.move is Move.MOVING
                      and s.type in fields.NUMBERS]
    assert list(columns.GPU_NUMBERS) == moving_numbers
    assert compact.GpuRow.__struct_fields__ == tuple(
        s.name for s in GPU_TABLE if s.move is Move.MOVING)
    assert structs.GpuS.__struct_fields__ == structs.GPU_FIELDS
    charted = [s.name for s in fields.charted(GPU_TABLE)]
    assert list(keys.GPU_FIELDS) == charted
    assert set(typing.get_args(keys.GpuField)) == set(charted)  # mypy's names, the same
    assert {m.name for m in export.GPU_METRICS} == \
        {s.dcgm for s in GPU_TABLE if s.dcgm} | {export.FB_FREE.name}
    by_attr = {f.attr: f for f in prometheus_fields.FIELDS}
    for spec in GPU_TABLE:
        if spec.dcgm:
            assert by_attr[spec.name].metrics[0] == spec.dcgm, spec.name
    assert set(export.CSV_FIELDS[5:-1]) == {s.name for s in GPU_TABLE if s.csv}


# ----------------------------------------------------------- a new field, table only

NEW_FIELD = """
import sys

from probes.wire import fields

early = sorted(m for m in sys.modules if m.startswith("probes.")
               and m not in ("probes.wire", "probes.wire.fields", "probes.wire.fastfill"))
assert not early, early  # nothing has derived its lists yet
fields.GPU_TABLE = (*fields.GPU_TABLE, fields.GpuFieldSpec(
    "enc_util_pct", fields.Move.MOVING, fields.Type.AMOUNT, "%", chart="pct",
    dcgm="DCGM_FI_DEV_ENC_UTIL", help="Encoder utilization (in %).", csv=15))
"""
"""The one change: a moving, charted, exported field added to the table."""

AGENT_SIDE = """
from probes.agent import output

output.GPU_MOVING = (*output.GPU_MOVING, "enc_util_pct")
"""
"""The agent's own copy (standalone, held to the table by the test above); its probe would
measure the value, which the script below puts into each simulated GPU."""

PIPELINE = """
import json

from probes.history.host import HostHistory
from probes.history.keys import codec_for, gpu_key
from probes.outputs.export import HostExport, export_csv, prometheus_text
from probes.store import columns
from probes.store.recording import Recorder
from probes.store.recording_reader import RecordingReader
from probes.sources.prometheus import fields as prometheus_fields
from probes.wire import decode_fields
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, HostSample

raw, rec_path = sys.argv[1], sys.argv[2]
v1_lines, v2_lines = [], []
encoder = output.CompactEncoder()
for line in open(raw, "rb").read().splitlines():
    msg = json.loads(line)
    if msg.get("type") == "sample":
        for g in msg["gpus"]:
            g["enc_util_pct"] = 10.0 + msg["seq"] + g["index"] / 4
        v2_lines += [json.dumps(m) for m in encoder.encode(msg)]
    elif msg.get("type") == "hello":
        v2_lines.append(json.dumps({**msg, "v": 2, "columns": output.compact_columns()}))
    else:
        v2_lines.append(json.dumps(msg))
    v1_lines.append(json.dumps(msg))


def want(s):
    return [10.0 + s.seq + g.index / 4 for g in s.gpus]


def got(s):
    return [g.enc_util_pct for g in s.gpus]


# decoded: wire v2 (its fast path, and the checked path for the ticks with PCIe chains), v1
reader = MessageReader()
items = reader.feed(("\\n".join(v2_lines) + "\\n").encode())
assert reader.compact is not None and reader.compact.known, "the v2 hello's columns"
assert reader.stats.garbled == 0
samples = [m for m in items if isinstance(m, HostSample)]
hello = next(m for m in items if isinstance(m, Hello))
assert len(samples) == 40 and all(s.gpus for s in samples)
assert sum(s.wire_row is not None for s in samples) > 30, "v2 fast path"
assert any(s.pcie for s in samples), "a tick through the checked path"
for s in samples:
    assert got(s) == want(s), ("v2", s.seq, got(s))
v1 = [m for m in MessageReader().feed(("\\n".join(v1_lines) + "\\n").encode())
      if isinstance(m, HostSample)]
assert [got(s) for s in v1] == [want(s) for s in v1] and len(v1) == 40, "v1"
checked = decode_fields._decode_sample(json.loads(v1_lines[-1]))
assert got(checked) == want(checked), "v1 checked decoder"

# recorded: a moving column, not a static fact (one signature for ticks that differ in it)
a, b = columns.split(samples[1]), columns.split(samples[2])
assert a is not None and b is not None and a.signature == b.signature
assert "enc_util_pct" in columns.GPU_NUMBERS
with Recorder(rec_path, "fleet", ["h"]) as rec:
    for s in samples:
        rec.record("h", s.ts, s)
with RecordingReader(rec_path) as r:
    recorded = [item for _, _, item in r.items() if isinstance(item, HostSample)]
assert len(recorded) == 40
for s, t in zip(samples, recorded):
    assert got(t) == want(s), ("recorded", s.seq, got(t))

# exported: Prometheus text and the CSV of the recording
text = prometheus_text([HostExport("h", hello, samples[-1])])
assert "# TYPE DCGM_FI_DEV_ENC_UTIL gauge" in text
line = next(x for x in text.splitlines() if x.startswith('DCGM_FI_DEV_ENC_UTIL{gpu="1"'))
assert float(line.rsplit(" ", 1)[1]) == want(samples[-1])[1], line
rows = "".join(export_csv(("h", s.ts, s) for s in recorded)).splitlines()
col = rows[0].split(",").index("enc_util_pct")
assert [float(r.split(",")[col]) for r in rows[1:3]] == want(recorded[0])[:2]

# charted: a dense history series, stored coarse with the table's codec
history = HostHistory()
for s in recorded:
    history.add(s)
series = history.series(gpu_key(2, "enc_util_pct"))
assert series is not None, "no history series"
assert [p.mean for p in series.points()] == [10.0 + s.seq + 0.5 for s in recorded]
assert codec_for("gpu/2/enc_util_pct", 1) is not None

# named in the Prometheus source's field map
assert "enc_util_pct" in prometheus_fields.SAMPLE_ATTRS
assert any(f.attr == "enc_util_pct" and f.metrics == ("DCGM_FI_DEV_ENC_UTIL",) and f.history
           for f in prometheus_fields.FIELDS)
print("followed", len(samples), "ticks")
"""


def _agent_v1(count: int = 40) -> bytes:
    return subprocess.run(
        [sys.executable, "-I", "-", "--simulate", "throttle:5", "--interval", "30", "--fast",
         "--count", str(count), "--seed", "4"],
        input=AGENT_SOURCE, capture_output=True, check=True, timeout=60).stdout


def _run(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    raw = tmp_path / "agent.jsonl"
    raw.write_bytes(_agent_v1())
    rec = tmp_path / "rec"
    rec.mkdir(mode=0o700)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(raw), str(rec / "r.sqlite3")],
        capture_output=True, text=True, timeout=120, cwd=REPO)


def test_a_new_moving_field_added_to_the_table_is_decoded_recorded_exported_and_charted(
        tmp_path: Path) -> None:
    done = _run(NEW_FIELD + AGENT_SIDE + PIPELINE, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "followed 40 ticks" in done.stdout


@pytest.mark.parametrize("left_out", ["agent", "table"])
def test_the_pipeline_check_fails_without_the_field(tmp_path: Path, left_out: str) -> None:
    """The same walk without the table's entry (or without the agent's column) fails: the
    test above can fail."""
    script = (AGENT_SIDE + PIPELINE) if left_out == "table" else \
        (NEW_FIELD + "from probes.agent import output\n" + PIPELINE)
    done = _run("import sys\n" + script, tmp_path)
    assert done.returncode != 0 and "the v2 hello's columns" in done.stderr, done.stderr


OLD_RECORDING = """
import json

from probes.store.recording import Recorder, find_resumable
from probes.store.recording_format import RecordingError
from probes.store.recording_reader import RecordingReader
from probes.wire.samples import HostSample

want = json.loads(open(sys.argv[1]).read())
for path in sys.argv[2:]:
    with RecordingReader(path) as r:
        got = [item for _, _, item in r.items() if isinstance(item, HostSample)]
    assert [[g.temp_c for g in s.gpus] for s in got] == want["temp_c"], path
    assert [[g.pcie_rx_kbs for g in s.gpus] for s in got] == want["pcie_rx_kbs"], path
    assert all(g.enc_util_pct is None for s in got for g in s.gpus), path
    try:  # appending would mix two layouts in one file
        Recorder(path, "fleet", ["h"]).close()
        raise SystemExit("reopened a recording of other GPU columns")
    except RecordingError as e:
        assert "other GPU columns" in str(e)
import pathlib
assert find_resumable(pathlib.Path(sys.argv[2]).parent, "fleet", 1e12) is None
print("read", len(sys.argv) - 2, "recordings")
"""
"""Read, with the extended table, recordings made with today's."""


def test_a_recording_made_before_a_new_field_still_reads(tmp_path: Path) -> None:
    import json
    import sqlite3

    from probes.store.recording import Recorder
    from probes.wire.protocol import MessageReader
    from probes.wire.samples import HostSample

    samples = [m for m in MessageReader().feed(_agent_v1(12)) if isinstance(m, HostSample)]
    rec = tmp_path / "rec"
    rec.mkdir(mode=0o700)
    named, legacy = rec / "named.sqlite3", rec / "legacy.sqlite3"
    for path in (named, legacy):
        with Recorder(path, "fleet", ["h"]) as r:
            for s in samples:
                r.record("h", s.ts, s)
    with sqlite3.connect(legacy) as conn:  # as recorded before the table named its columns
        assert conn.execute("DELETE FROM meta WHERE key = 'gpu_numbers'").rowcount == 1
    want = tmp_path / "want.json"
    want.write_text(json.dumps({k: [[getattr(g, k) for g in s.gpus] for s in samples]
                                for k in ("temp_c", "pcie_rx_kbs")}))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NEW_FIELD + OLD_RECORDING), str(want),
         str(named), str(legacy)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "read 2 recordings" in done.stdout


@pytest.mark.parametrize("value", ['{"temp_c": 1}', "[]", '["temp_c", "temp_c"]', '["a b"]',
                                   "not json"])
def test_a_recordings_unreadable_column_list_is_named(tmp_path: Path, value: str) -> None:
    import sqlite3

    from probes.store.recording import Recorder
    from probes.store.recording_format import RecordingError
    from probes.store.recording_reader import RecordingReader

    path = tmp_path / "r.sqlite3"
    Recorder(path, "fleet", ["h"]).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'gpu_numbers'", (value,))
    with pytest.raises(RecordingError, match="GPU column list is unreadable"):
        RecordingReader(path)
