"""A recording is untrusted input (security review 2026-12-06, R1 and R3-R7; issue #35).

Each hostile file is a real small recording (the project's ``Recorder`` fed by the agent's
simulator) tampered with through ``sqlite3`` as the review did (``tests/support/
hostile_recording.py``).  What must hold: nothing from the file reaches a terminal raw
(host names, specs, tags, item text, every export format); a bomb inflates no further than
its cap; a header's counts are checked before anything is allocated; a bad row is skipped
and counted, never a traceback; a view, a trigger or any object a recording does not have
is refused before a query runs; no statement runs longer than its budget; and ``q`` quits a
replay of every such file.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from probes.store import catalog, untrusted
from probes.store import recording_format as fmt
from probes.store.recording import Recorder, RecordingError, RecordingReader
from probes.wire.samples import KERNEL_SOURCE, HostSample, LogEvent
from tests.conftest import REPO
from tests.support import hostile_recording as hostile

RAW = ("\x1b", "\x07", "\u202e", "\x9b")
"""What must never be written raw: ESC, BEL (ends an OSC), a bidi override, C1 CSI."""
PEAK_LIMIT = 48 << 20
"""Reading any hostile file may not allocate more than this at once (a bomb is 256 MiB)."""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile.base_recording(tmp_path_factory.mktemp("hostile") / "base.sqlite3")


def _make(base: Path, tmp_path: Path, name: str) -> Path:
    return hostile.BUILDERS[name](base, tmp_path / f"{name}.sqlite3")


def _read_all(path: Path) -> tuple[list[tuple[str, float, object]], int, int]:
    """Every item, the reader's skipped count, and the peak of memory allocated meanwhile."""
    tracemalloc.start()
    try:
        with RecordingReader(path) as r:
            items = list(r.items())
            skipped = r.skipped
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return items, skipped, peak


def _export(path: Path, form: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", "import sys; from tui.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", "export", "--format", form,
                           str(path)], capture_output=True, timeout=60, cwd=REPO)


def _printable(text: str) -> bool:
    return not any(c in text for c in RAW)


# -- R1: hostile names -------------------------------------------------------------------------

def test_host_names_specs_tags_and_items_are_cleaned(base: Path, tmp_path: Path) -> None:
    path = _make(base, tmp_path, "names")
    with RecordingReader(path) as r:
        names = r.hosts()
        specs = r.host_specs()
        lines = [i.line for _, _, i in r.items(kinds=["log"]) if isinstance(i, LogEvent)]
        spacing = r.sample_spacing(names[0])
    assert len(names) == 2 and all(_printable(n) for n in names)
    assert names[0].startswith("gpu-h01[@click=app.quit]Q[/]\\x1b]0;PWNED-TITLE\\x07")
    assert "<U+202E>" in names[0]
    # the specs stored under the raw names are found under the cleaned ones
    assert [s.name for s in specs] == names
    assert all(_printable(t) and t.startswith("rack") for s in specs for t in s.tags)
    assert all(s.tags for s in specs)
    assert spacing == 10.0, "the cleaned name still finds its host's samples"
    assert any("PWNED-TITLE" in x for x in lines) and all(_printable(x) for x in lines)
    # JSON lines escaped them already (the review saw \u001b); the listing shows no name
    assert _printable(_export(path, "jsonl").stdout.decode("ascii"))
    out, err = io.StringIO(), io.StringIO()
    assert catalog.write_listing(tmp_path, out, err) == 1
    assert _printable(out.getvalue() + err.getvalue())


def test_clock_reasons_in_a_block_are_cleaned(base: Path, tmp_path: Path) -> None:
    path = hostile.hostile_block_text(base, tmp_path / "reasons.sqlite3")
    with RecordingReader(path) as r:
        reasons = {x for _, _, s in r.items(kinds=["sample"]) if isinstance(s, HostSample)
                   for g in s.gpus for x in g.clock_reasons}
    assert reasons and all(_printable(x) and "PWNED-TITLE" in x for x in reasons)


@pytest.mark.parametrize("form", ["csv", "prometheus"])
def test_csv_and_openmetrics_exports_of_hostile_names_write_no_control_character(
        base: Path, tmp_path: Path, form: str) -> None:
    path = _make(base, tmp_path, "names")
    done = _export(path, form)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode("utf-8")
    assert "PWNED-TITLE" in out and _printable(out)
    assert not any(ord(c) < 32 and c not in "\n" for c in out)


def test_a_host_name_that_is_not_utf8_reads_with_replacement(base: Path, tmp_path: Path) -> None:
    path = tmp_path / "latin1.sqlite3"
    hostile._tampered(base, path, lambda c: c.execute(
        "UPDATE hosts SET name = CAST(x'67707565ff1b5b324a' AS TEXT) WHERE id = 1"))
    with RecordingReader(path) as r:
        assert r.hosts()[0] == "gpue\ufffd\\x1b[2J"
        assert len(list(r.items())) > 200


# -- R3, R4, R5: bombs and lying headers ---------------------------------------------------

def test_bomb_rows_inflate_no_further_than_the_cap(base: Path, tmp_path: Path) -> None:
    items, skipped, peak = _read_all(_make(base, tmp_path, "bomb_item"))
    assert skipped == 3
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.0f} MiB allocated for {skipped} bomb rows"
    assert sum(1 for _, _, i in items if isinstance(i, LogEvent)) == 19  # 22 less 3
    assert fmt.MAX_ROW_BYTES < hostile.BOMB_BYTES


@pytest.mark.parametrize("name", ["bomb_block", "bomb_block_header"])
def test_bomb_blocks_inflate_no_further_than_their_header(base: Path, tmp_path: Path,
                                                          name: str) -> None:
    items, skipped, peak = _read_all(_make(base, tmp_path, name))
    assert skipped == 5, "each of the five blocks is refused"
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.0f} MiB allocated"
    assert {type(i).__name__ for _, _, i in items} == {"Hello", "LogEvent"}


def test_a_header_claiming_200_million_rows_allocates_nothing(base: Path,
                                                              tmp_path: Path) -> None:
    items, skipped, peak = _read_all(_make(base, tmp_path, "block_n"))
    assert skipped == 5
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.0f} MiB allocated"
    assert len(items) == 24  # every item that is not a sample


def test_deep_json_is_a_skipped_row_not_a_traceback(base: Path, tmp_path: Path) -> None:
    path = _make(base, tmp_path, "deep")
    items, skipped, _ = _read_all(path)
    assert skipped == 1 and len(items) > 200
    done = _export(path, "jsonl")
    assert done.returncode == 0, done.stderr
    err = done.stderr.decode()
    assert "Traceback" not in err
    assert err.count("1 unreadable row of") == 1 and "skipped" in err


def test_numbers_json_cannot_hold_make_a_row_unreadable(base: Path, tmp_path: Path) -> None:
    """A row whose JSON says 1e400 (infinity once parsed) or NaN is refused, as the wire
    refuses them: a float infinity in an item crashes whatever formats it as an integer."""
    path = tmp_path / "inf.sqlite3"

    def change(conn: sqlite3.Connection) -> None:
        body = fmt.Body(hostile._zdict(conn))
        for k, (rid, ts) in enumerate(conn.execute(
                "SELECT id, ts FROM items WHERE kind = 'log' ORDER BY id LIMIT 2").fetchall()):
            text = json.dumps({"t": "log", "ts": ts, "source": KERNEL_SOURCE, "line": "x"})
            text = text.replace(json.dumps(ts), ("1e400", "NaN")[k])
            c = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=body.zdict)
            conn.execute("UPDATE items SET body = ? WHERE id = ?",
                         (c.compress(text.encode()) + c.flush(), rid))
    hostile._tampered(base, path, change)
    items, skipped, _ = _read_all(path)
    assert skipped == 2
    assert all(getattr(i, "ts", 0.0) < 1e11 for _, _, i in items)


def test_a_reader_on_an_event_loop_gets_a_turn_while_bad_rows_are_skipped(
        base: Path, tmp_path: Path) -> None:
    with RecordingReader(_make(base, tmp_path, "bomb_item")) as r:
        got = list(r.entries(pause_s=0.0))
    assert sum(1 for _, _, i in got if i is None) == 3
    with RecordingReader(_make(base, tmp_path, "block_n")) as r:
        got = list(r.entries(pause_s=0.0))
    assert sum(1 for _, _, i in got if i is None) == 5


# -- R7: views, triggers, budgets ----------------------------------------------------------

_OPEN_AND_LIST = textwrap.dedent("""
    import io, sys, time
    from pathlib import Path
    from probes.store import catalog
    from probes.store.recording import RecordingError, RecordingReader
    path = Path(sys.argv[1])
    t = time.monotonic()
    try:
        RecordingReader(path).span()
        print("OPENED")
    except RecordingError as e:
        print("REFUSED", e)
    out, err = io.StringIO(), io.StringIO()
    n = catalog.write_listing(path.parent, out, err)
    print("LISTED", n, repr(err.getvalue()))
    print("SECONDS", time.monotonic() - t)
""")


@pytest.mark.parametrize("name, what", [("view", "a view 'items'"),
                                         ("trigger", "a trigger 't'")])
def test_a_view_or_trigger_is_refused_before_any_query(base: Path, tmp_path: Path, name: str,
                                                       what: str) -> None:
    path = _make(base, tmp_path, name)
    try:  # before the fix, the view hung every reader: a timeout is the failure
        done = subprocess.run([sys.executable, "-c", _OPEN_AND_LIST, str(path)],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {name}.sqlite3 did not end within 60 s")
    out = done.stdout
    assert f"REFUSED {path} is not a rigwatch recording (it holds {what}" in out, done.stderr
    assert "LISTED 0" in out and f"{name}.sqlite3" in out.split("LISTED", 1)[1]
    assert float(out.rsplit("SECONDS", 1)[1]) < 10.0
    export = _export(path, "csv")
    assert export.returncode == 2 and export.stderr.decode().count("\n") == 1


def test_objects_a_recording_does_not_have_are_refused(base: Path, tmp_path: Path) -> None:
    cases = {
        "table": "CREATE TABLE extra(x)",
        "generated": "ALTER TABLE hosts ADD COLUMN g TEXT AS (name || name)",
        "virtual": "CREATE VIRTUAL TABLE items_fts USING fts5(x)",
    }
    for case, sql in cases.items():
        path = tmp_path / f"{case}.sqlite3"
        hostile._tampered(base, path, lambda c, sql=sql: c.execute(sql))
        with pytest.raises(RecordingError, match="is not a rigwatch recording"):
            RecordingReader(path)


def test_a_statement_past_its_budget_is_interrupted(base: Path) -> None:
    db = untrusted.open_checked(base, budget_s=0.3)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="interrupt") as caught:
        db.execute("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                   "SELECT count(*) FROM r").fetchone()
    assert time.monotonic() - started < 3.0
    assert "ran longer than 0.3 s" in str(db.error(base, caught.value))
    assert db.execute("SELECT count(*) FROM hosts").fetchone()[0] == 2, "budget re-armed"
    db.close()


def test_a_new_recording_has_exactly_the_expected_tables(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    with Recorder(path, "k", ["h"]) as rec:
        rec.record("h", 1.0, LogEvent(1.0, KERNEL_SOURCE, "x"))
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == set(untrusted.EXPECTED_TABLES)
    for name, cols in untrusted.EXPECTED_TABLES.items():
        got = tuple((c[1], c[2].upper(), 1 if c[5] else 0)
                    for c in conn.execute(f'PRAGMA table_xinfo("{name}")'))
        assert got == cols, name
    conn.close()


# -- q always quits a replay -------------------------------------------------------------------

_REPLAY_AND_QUIT = textwrap.dedent("""
    import asyncio, json, sys, time
    from probes.sources.replay import ReplayBackend
    from tui.app import make_app
    from tui.console_options import ConsoleOptions

    async def one(path):
        backend = ReplayBackend(path, speed=600.0)
        app = make_app(backend, ConsoleOptions(demo=False, title="hostile"))
        async with app.run_test(size=(120, 36)) as pilot:
            until = time.monotonic() + 20.0  # 20 min of recording at x600: 2 s
            while not backend.finished and time.monotonic() < until:
                await pilot.pause(0.1)
            hosts = list(app.fleet.hosts)
            header = app.mode_text()
            t = time.monotonic()
            await pilot.press("q")
        return {"quit_s": time.monotonic() - t, "hosts": hosts, "header": header}

    print(json.dumps({p: asyncio.run(one(p)) for p in sys.argv[1:]}))
""")


def test_q_quits_a_replay_of_every_hostile_file(base: Path, tmp_path: Path) -> None:
    names = ["names", "bomb_item", "bomb_block", "bomb_block_header", "block_n", "deep"]
    paths = [str(_make(base, tmp_path, n)) for n in names]
    env = {**os.environ, "TEXTUAL_ANIMATIONS": "none"}
    try:  # before the fix a bomb block froze the loop: q, and this test, never returned
        done = subprocess.run([sys.executable, "-c", _REPLAY_AND_QUIT, *paths],
                              capture_output=True, text=True, timeout=180, cwd=REPO, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("a replay of a hostile file did not quit within 180 s")
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.splitlines()[-1])
    for name, path in zip(names, paths, strict=True):
        run = got[path]
        assert run["quit_s"] < 5.0, (name, run)
        assert "end" in run["header"], (name, run)
        assert len(run["hosts"]) == 2 and all(_printable(h) for h in run["hosts"]), name
        if name != "names":
            assert "unreadable row" in run["header"] and "skipped" in run["header"], run
