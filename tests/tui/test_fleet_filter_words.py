"""The fleet filter reads each row's words once while the row is the same object (issue 38,
keys): ``RowWords`` keeps them by host, checked by identity.  A random fleet's rows through
the console's ``FleetRows`` (rows kept off screen, rebuilt on change), filtered each tick by
random queries with and without the memo: the same rows pass, in the same order, and the
memo computes a host's words only for a row it has not seen.  Negative control: words kept
by host name alone (past a row's change) pass the wrong rows."""

from __future__ import annotations

import random

import pytest

from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.events import Connected
from tests.analysis.test_fleet_rows_seen import HOSTS, _tick_items
from tests.support.tui_fakes import T0, hello
from tui.views import fleet_view
from tui.views.fleet_rows import FleetRows
from tui.views.fleet_view import RowWords, filter_rows

QUERIES = ["h0", "down", "!healthy", "critical", "warning", "lost", "hot", "stale", "h1 !down",
           "connecting", "healthy", "gpu"]


class _ByNameOnly(RowWords):
    """Negative control: a host's words kept past its row's change."""

    def __call__(self, row: fleet_view.FleetRow) -> str:
        kept = self._kept.get(row.name)
        if kept is None:
            kept = self._kept[row.name] = (row, fleet_view.words(row))
        return kept[1]


def _run(seed: int, memo: RowWords) -> tuple[int, int]:
    """Ticks of a random fleet; (ticks where the filtered rows differ, words computed)."""
    rng = random.Random(seed)
    fleet = FleetState([HostSpec(name=h, expect_gpus=8) for h in HOSTS])
    for name in HOSTS:
        fleet.apply(name, Connected(T0), T0)
        fleet.apply(name, hello(name), T0)
    view = FleetRows(fleet)
    differ = 0
    for step in range(1, 50):
        _tick_items(rng, fleet, step)
        now = T0 + step + rng.random() * 0.5
        fleet.tick(now)
        view.focus = frozenset(HOSTS[:5])
        view.numbers_read = rng.random() < 0.5
        rows = view.rows(now)
        for query in rng.sample(QUERIES, 4):
            differ += filter_rows(rows, query, memo) != filter_rows(rows, query)
    return differ, len(memo._kept)


def test_filtered_rows_with_kept_words_equal_the_words_read_afresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    computed = [0]
    words = fleet_view.words

    def counted(row: fleet_view.FleetRow) -> str:
        computed[0] += 1
        return words(row)

    monkeypatch.setattr(fleet_view, "words", counted)  # the memo's misses (the plain
    for seed in (1, 2):  # ``filter_rows`` holds the function it was defined with)
        computed[0] = 0
        memo = RowWords()
        differ, kept = _run(seed, memo)
        assert differ == 0
        assert kept == len(HOSTS)
        # 4 queries a tick: without the memo, every row's words 4 times a tick
        assert 0 < computed[0] < 49 * len(HOSTS), computed


def test_the_comparison_sees_words_kept_past_a_rows_change() -> None:
    differ, _ = _run(1, _ByNameOnly())
    assert differ > 0
