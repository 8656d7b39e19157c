"""Opening a recording as the untrusted file it is: its schema checked before any query,
every statement on a time budget.

A recording is passed around (attached to an incident, copied from a colleague's
bastion), so whoever made it chose every byte, its SQL schema included.  The security
review (2026-12-06, R7) replaced ``items`` with a view over an endless recursive CTE:
every reader hung in its first query (``rigwatch replay``, ``export`` and even the
recordings listing), and ``q`` did nothing.  So a reader:

* opens the file read-only with ``PRAGMA trusted_schema=OFF`` (no function the schema
  names runs unless SQLite marks it harmless) and ``cell_size_check``;
* reads ``sqlite_master`` before anything else and accepts only a recording's own
  tables, each with its columns (``EXPECTED_TABLES``; a later version's added plain
  columns are read by no query), indexes on them, and nothing else: no view, no trigger,
  no virtual table, no generated or hidden column;
* runs every statement under a budget (:class:`QueryBudget`): SQLite's progress handler
  interrupts one that runs longer than ``QUERY_BUDGET_S``, a file that cannot be read in
  time being one that cannot be read.
"""

from __future__ import annotations

import sqlite3
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from probes.errors import RigwatchError
from probes.store.recording_format import RecordingError
from probes.wire.sanitize import clean_text

_V1 = {
    "meta": (("key", "TEXT", 1), ("value", "TEXT", 0)),
    "hosts": (("id", "INTEGER", 1), ("name", "TEXT", 0)),
    "items": (("id", "INTEGER", 1), ("host_id", "INTEGER", 0), ("ts", "REAL", 0),
              ("kind", "TEXT", 0), ("body", "BLOB", 0)),
}
_V2 = {
    "templates": (("id", "INTEGER", 1), ("host_id", "INTEGER", 0), ("ts", "REAL", 0),
                  ("body", "BLOB", 0)),
    "blocks": (("id", "INTEGER", 1), ("host_id", "INTEGER", 0), ("t0", "REAL", 0),
               ("t1", "REAL", 0), ("n", "INTEGER", 0), ("template_id", "INTEGER", 0),
               ("after_item", "INTEGER", 0), ("tier", "INTEGER", 0), ("body", "BLOB", 0),
               ("lo", "BLOB", 0), ("hi", "BLOB", 0)),
    "staging": (("id", "INTEGER", 1), ("host_id", "INTEGER", 0), ("template_id", "INTEGER", 0),
                ("after_item", "INTEGER", 0), ("ts", "REAL", 0), ("body", "BLOB", 0)),
    "packed": (("host_id", "INTEGER", 1), ("last_staged", "INTEGER", 0)),
}
EXPECTED_TABLES: dict[str, tuple[tuple[str, str, int], ...]] = {**_V1, **_V2}
"""Each table a recording may have, with its columns as (name, declared type, primary key),
as ``recording_format``'s migrations create them.  A table added by a later schema version
must be named here too (a test checks a new recording against this)."""
_SQLITE_OWN = ("sqlite_stat", "sqlite_sequence")
"""Tables SQLite itself makes (``ANALYZE``, ``AUTOINCREMENT``): read by no query of ours."""

QUERY_BUDGET_S = 5.0
"""The longest one statement may run.  Every query of a reader goes through an index
and returns in milliseconds on a day-long recording; a whole-table count of a large
file takes well under a second."""
PROGRESS_OPS = 10_000
"""SQLite virtual-machine steps between two looks at the clock (a look costs about a
microsecond; ten thousand steps take about a millisecond)."""

MAX_TS = 1e11
"""The latest time a row may have (as the wire's ``MAX_TS``): rows outside 0..MAX_TS, or
whose time is not a number, are not read."""


ROW_ERRORS = (RigwatchError, zlib.error, ValueError, TypeError, KeyError, IndexError,
              AttributeError, OverflowError, RecursionError)
"""What decoding one row or block of someone else's file may raise: it is skipped and
counted (``RigwatchError`` holds the codec's, the block's, ``TooDeep`` and
``DataTooLarge``)."""


class Guarded:
    """A read-only connection to a recording whose every statement runs on a time budget.

    ``execute`` starts a statement's budget; a reader calls ``arm()`` again before each
    batch it fetches from a long-lived cursor (a replay holds one open for hours, and its
    budget counts only while it is being stepped).  SQLite's progress handler looks at the
    clock every ``PROGRESS_OPS`` steps and interrupts a statement past its budget.
    """

    def __init__(self, conn: sqlite3.Connection, budget_s: float = QUERY_BUDGET_S) -> None:
        self.conn = conn
        self.budget_s = budget_s
        self._deadline = time.monotonic() + budget_s
        self.interrupted = 0
        """Statements interrupted so far."""
        conn.set_progress_handler(self._over, PROGRESS_OPS)

    def arm(self) -> None:
        self._deadline = time.monotonic() + self.budget_s

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
                ) -> sqlite3.Cursor:
        self._deadline = time.monotonic() + self.budget_s
        return self.conn.execute(sql, params)

    def close(self) -> None:
        self.conn.close()

    def _over(self) -> int:
        if time.monotonic() <= self._deadline:
            return 0
        self.interrupted += 1
        return 1

    def error(self, path: Path, exc: BaseException) -> RecordingError:
        """The one-line error for a statement that failed (or ran out of time)."""
        if self.interrupted and "interrupt" in str(exc):
            return RecordingError(f"{path}: a query ran longer than {self.budget_s:g} s: the "
                                  "file is damaged or was made to hang its readers")
        return RecordingError(f"cannot read recording {path}: {exc}")


def open_checked(path: Path, budget_s: float = QUERY_BUDGET_S) -> Guarded:
    """A read-only, budgeted connection to ``path`` whose schema is a recording's.

    Text that is not UTF-8 reads with replacement characters (SQLite hands back whatever
    bytes a hostile file holds, and the default decoding would raise on them).

    Raises:
        RecordingError: it cannot be opened, or its schema is not a recording's.
    """
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False)
    except sqlite3.Error as e:
        raise RecordingError(f"cannot open recording {path}: {e}") from None
    conn.text_factory = _text
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.execute("PRAGMA cell_size_check=ON")
        db = Guarded(conn, budget_s)
        check_schema(db, path)
    except sqlite3.Error as e:
        conn.close()
        raise RecordingError(f"{path} is not a rigwatch recording ({e})") from None
    except RecordingError:
        conn.close()
        raise
    return db


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def check_schema(conn: Guarded, path: Path) -> None:
    """Refuse any object a recording does not have, before a query touches a table.

    Raises:
        RecordingError: a view, trigger, virtual table, unknown table or column.
        sqlite3.DatabaseError: the schema itself is damaged.
    """
    entries = conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') "
                           "FROM sqlite_master").fetchall()
    tables = set()
    for kind, name, table, sql in entries:
        shown = clean_text(str(name))[:80]
        if kind == "table":
            if str(name).startswith(_SQLITE_OWN):
                continue
            if name not in EXPECTED_TABLES:
                raise RecordingError(f"{path} is not a rigwatch recording (it has a table "
                                     f"{shown!r} that recordings do not)")
            text = str(sql).upper()
            if text.startswith("CREATE VIRTUAL") or "WITHOUT ROWID" in text:
                raise RecordingError(f"{path} is not a rigwatch recording (its table {shown} "
                                     "is not a plain table)")
            tables.add(name)
        elif kind == "index":
            if table not in EXPECTED_TABLES:
                raise RecordingError(f"{path} is not a rigwatch recording (an index on "
                                     f"{clean_text(str(table))[:80]!r})")
        else:  # a view or a trigger: code that would run in our queries (or on a write)
            raise RecordingError(f"{path} is not a rigwatch recording (it holds a {kind} "
                                 f"{shown!r}; a recording has none)")
    for name in tables:
        info = conn.execute(f'PRAGMA table_xinfo("{name}")').fetchall()
        cols = {(str(c[1]), str(c[2]).upper(), 1 if c[5] else 0) for c in info}
        if any(c[6] != 0 for c in info) or not set(EXPECTED_TABLES[name]) <= cols:
            raise RecordingError(f"{path} is not a rigwatch recording (table {name} does "
                                 "not have a recording's columns)")
