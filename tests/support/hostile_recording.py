"""Hostile recordings, made as the security review made them (2026-12-06, R1 and R3-R7): a
real small recording written by the project's ``Recorder`` from the agent's simulator, then
tampered with through ``sqlite3``.

Each builder copies the base file and changes one thing, so a test names the attack it
shows.  Sizes are kept small enough for a test (a bomb row inflates to 256 MiB, not the
review's 2 GiB: far above any cap, cheap to build) but each attack is the review's.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

from probes.config.fleet import HostSpec
from probes.store import recording_format as fmt
from probes.store.recording import Recorder
from probes.wire.protocol import decode_line
from probes.wire.samples import KERNEL_SOURCE, FabricSample, LogEvent

HOSTILE = "[@click=app.quit]Q[/]\x1b]0;PWNED-TITLE\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202e"
"""Markup, OSC 0 (title), OSC 52 (clipboard), a screen clear and a bidi override: what the
review put in host names (R1)."""
HOSTS = ("gpu-h01", "gpu-h02")
BOMB_BYTES = 256 << 20
"""What one bomb row or block inflates to."""


def _agent(host: str, scenario: str, count: int) -> list[object]:
    proc = subprocess.run(
        [sys.executable, "-m", "probes.agent", "--simulate", scenario, "--fast", "--count",
         str(count), "--interval", "10", "--seed", "4", "--hostname", host],
        capture_output=True, timeout=120, check=True)
    # the simulated host's fabric messages are no part of what these recordings test
    return [m for x in proc.stdout.splitlines()
            if not isinstance(m := decode_line(x), FabricSample)]


def base_recording(path: Path) -> Path:
    """Two hosts, 20 min at 10 s (five packed blocks), their hellos and 20 log lines."""
    streams = {HOSTS[0]: _agent(HOSTS[0], "healthy", 120),
               HOSTS[1]: _agent(HOSTS[1], "xid79:6@600", 120)}
    with Recorder(path, "k", list(streams)) as rec:
        rec.describe_hosts([HostSpec(h, tags=("rack-a",)) for h in streams])
        merged = sorted(((getattr(i, "ts", 0.0), h, i) for h, items in streams.items()
                         for i in items), key=lambda x: x[0])
        for ts, host, item in merged:
            rec.record(host, ts, item)  # type: ignore[arg-type]
        t0 = merged[0][0]
        for k in range(20):
            ts = t0 + k * 50 + 1
            rec.record(HOSTS[0], ts, LogEvent(ts, KERNEL_SOURCE, f"NVRM: line {k}"))
    return path


def _tampered(base: Path, out: Path, change: Callable[[sqlite3.Connection], None]) -> Path:
    shutil.copyfile(base, out)
    conn = sqlite3.connect(out)
    try:
        change(conn)
        conn.commit()
    finally:
        conn.close()
    return out


def _zdict(conn: sqlite3.Connection) -> bytes:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return fmt.stored_zdict(meta, Path("base"))


def _raw_deflate(data_parts: Callable[[], list[bytes]], zdict: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15, zdict=zdict)
    return b"".join(c.compress(p) for p in data_parts()) + c.flush()


def hostile_names(base: Path, out: Path) -> Path:
    """R1: every host name, the hosts' specs in ``meta`` (names and tags) and one log line's
    body carry markup, OSC 0/52, a screen clear and a bidi override."""
    def change(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE hosts SET name = name || ?", (HOSTILE,))
        specs = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'host_specs'")
                           .fetchone()[0])
        specs = {k + HOSTILE: {**v, "tags": [f"rack{HOSTILE}"]} for k, v in specs.items()}
        conn.execute("UPDATE meta SET value = ? WHERE key = 'host_specs'", (json.dumps(specs),))
        body = fmt.Body(_zdict(conn))
        row = conn.execute("SELECT id, ts FROM items WHERE kind = 'log' LIMIT 1").fetchone()
        _kind, packed = body.pack(LogEvent(row[1], KERNEL_SOURCE, f"NVRM: {HOSTILE}"))
        conn.execute("UPDATE items SET body = ? WHERE id = ?", (packed, row[0]))
    return _tampered(base, out, change)


def bomb_items(base: Path, out: Path, rows: int = 3) -> Path:
    """R3: ``rows`` log rows whose bodies inflate to 256 MiB of spaces each."""
    def change(conn: sqlite3.Connection) -> None:
        bomb = _raw_deflate(lambda: [b" " * (1 << 20)] * (BOMB_BYTES >> 20), _zdict(conn))
        ids = [r[0] for r in conn.execute("SELECT id FROM items WHERE kind = 'log' "
                                          "ORDER BY id LIMIT ?", (rows,))]
        conn.executemany("UPDATE items SET body = ? WHERE id = ?", [(bomb, i) for i in ids])
    return _tampered(base, out, change)


def bomb_blocks(base: Path, out: Path, with_header: bool) -> Path:
    """R4: every block inflates to 256 MiB of zeros; ``with_header``: after a real block's
    header (its magic and counts), so only a cap taken from the header stops it."""
    def change(conn: sqlite3.Connection) -> None:
        head = b""
        if with_header:
            real = zlib.decompress(conn.execute("SELECT body FROM blocks ORDER BY n DESC "
                                                "LIMIT 1").fetchone()[0])
            head = real[:16]
        c = zlib.compressobj(9)
        bomb = c.compress(head) + b"".join(c.compress(b"\0" * (1 << 20))
                                           for _ in range(BOMB_BYTES >> 20)) + c.flush()
        conn.execute("UPDATE blocks SET body = ?", (bomb,))
    return _tampered(base, out, change)


def block_claims_rows(base: Path, out: Path, n: int = 200_000_000) -> Path:
    """R5: every block's header claims ``n`` rows (the data is the real block's)."""
    def change(conn: sqlite3.Connection) -> None:
        for bid, body in conn.execute("SELECT id, body FROM blocks").fetchall():
            data = zlib.decompress(body)
            magic, rows, c, tlen = struct.unpack_from("<4sIII", data)
            head = json.loads(data[16:16 + tlen])
            rest = data[16 + tlen:]
            if head.get("nulls"):  # without the null mask the decoder reaches its matrix
                mask = 2 * c, 2 * c + (rows * c + 7) // 8
                rest = rest[:mask[0]] + rest[mask[1]:]
                head["nulls"] = False
            text = json.dumps(head).encode()
            data = struct.pack("<4sIII", magic, n, c, len(text)) + text + rest
            conn.execute("UPDATE blocks SET body = ? WHERE id = ?", (zlib.compress(data), bid))
    return _tampered(base, out, change)


def hostile_block_text(base: Path, out: Path) -> Path:
    """R1 in a block: every block's clock-reason table names a reason ``HOSTILE``."""
    def change(conn: sqlite3.Connection) -> None:
        for bid, body in conn.execute("SELECT id, body FROM blocks").fetchall():
            data = zlib.decompress(body)
            magic, rows, c, tlen = struct.unpack_from("<4sIII", data)
            head = json.loads(data[16:16 + tlen])
            head["reasons"] = [[f"sw_power_cap{HOSTILE}"] for _ in head["reasons"]]
            text = json.dumps(head).encode()
            data = struct.pack("<4sIII", magic, rows, c, len(text)) + text + data[16 + tlen:]
            conn.execute("UPDATE blocks SET body = ? WHERE id = ?", (zlib.compress(data), bid))
    return _tampered(base, out, change)


def deep_json(base: Path, out: Path, depth: int = 100_000) -> Path:
    """R6: one log row's body is JSON nested ``depth`` deep."""
    def change(conn: sqlite3.Connection) -> None:
        deep = b"[" * depth + b"]" * depth
        body = _raw_deflate(lambda: [deep], _zdict(conn))
        row = conn.execute("SELECT id FROM items WHERE kind = 'log' ORDER BY id LIMIT 1"
                           ).fetchone()
        conn.execute("UPDATE items SET body = ? WHERE id = ?", (body, row[0]))
    return _tampered(base, out, change)


def endless_view(base: Path, out: Path) -> Path:
    """R7: ``items`` replaced by a VIEW over a recursive CTE that never ends."""
    def change(conn: sqlite3.Connection) -> None:
        conn.execute("DROP TABLE items")
        conn.execute("CREATE VIEW items AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL "
                     "SELECT i + 1 FROM r) SELECT i AS id, 1 AS host_id, 1.0 * i AS ts, "
                     "'log' AS kind, x'00' AS body FROM r")
    return _tampered(base, out, change)


def with_trigger(base: Path, out: Path) -> Path:
    """R7: a trigger on ``items`` (it would fire if the file were ever written)."""
    def change(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TRIGGER t AFTER INSERT ON items BEGIN "
                     "DELETE FROM hosts; END")
    return _tampered(base, out, change)


BUILDERS: dict[str, Callable[[Path, Path], Path]] = {
    "names": hostile_names,
    "bomb_item": bomb_items,
    "bomb_block": lambda b, o: bomb_blocks(b, o, with_header=False),
    "bomb_block_header": lambda b, o: bomb_blocks(b, o, with_header=True),
    "block_n": block_claims_rows,
    "deep": deep_json,
    "view": endless_view,
    "trigger": with_trigger,
}
"""Every hostile file by a short name (as the review named them)."""
