"""The preflight screen's table: one line per host with its verdict and first problem."""

from __future__ import annotations

from dataclasses import dataclass

from textual.reactive import reactive

from probes.analysis.preflight import CheckVerdict
from widgets._styled_table import Cell, ColumnSpec, KeyedRow, StyledTable

VERDICT_CLASS = {
    CheckVerdict.PASS: "cell--ok",
    CheckVerdict.WARN: "cell--sev-warning",
    CheckVerdict.FAIL: "cell--sev-critical",
    CheckVerdict.SKIP: "cell--muted",
}
"""The verdict is always written as a word; the colour only repeats it."""


@dataclass(frozen=True)
class PreflightLine:
    """One host's preflight at a glance, already computed."""

    host: str
    verdict: CheckVerdict
    fails: int
    warns: int
    first_problem: str
    """The first failing (else warning) check as ``check: detail``; empty when all pass."""


class PreflightTable(StyledTable):
    """Hosts in inventory order with their preflight verdicts."""

    COLUMNS = (
        ColumnSpec("host", "Host", 10),
        ColumnSpec("verdict", "Verdict", 7),
        # below ``NARROW_BELOW`` the counts go (the detail lists every check) and the first
        # problem, which leads with its verdict, gets their room
        ColumnSpec("fail", "Fail", 4, right=True, narrow=False),
        ColumnSpec("warn", "Warn", 4, right=True, narrow=False),
        ColumnSpec("problem", "First problem"),
    )

    hosts: reactive[tuple[PreflightLine, ...]] = reactive((), init=False)

    def watch_hosts(self) -> None:
        """Write the new rows into the table."""
        self.sync_rows(self.keyed_rows())

    def keyed_rows(self) -> list[KeyedRow]:
        """One row per host, keyed by host name."""
        return [(line.host, self.cells(line)) for line in self.hosts]

    @staticmethod
    def cells(line: PreflightLine) -> tuple[Cell, ...]:
        """The formatted cells of one host."""
        return (
            (line.host, None),
            (line.verdict.value, VERDICT_CLASS[line.verdict]),
            (str(line.fails), "cell--sev-critical" if line.fails else "cell--muted"),
            (str(line.warns), "cell--sev-warning" if line.warns else "cell--muted"),
            (line.first_problem or "all checks pass", None if line.first_problem
             else "cell--muted"),
        )
