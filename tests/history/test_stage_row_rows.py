"""The staging read from the tick's row alone, held to today's ``stage_row`` (issue 38, s9).

``stage9_candidate.stage_row_rows`` takes a row sample's host and disk numbers, disk names
and time from its ``SampleRow`` instead of the decoded ``HostStats``/``DiskStats``.  Not
landed (under the asked 15 %), but the equivalence it needs is checked here so that a later
lazy decoder can rely on it: inside ``HostHistory.add``, with the arguments it gives, every
row sample of the simulator's 16 templates (``bench_ingest.template``) and of mutated,
hostile v2 streams (``test_row_fold._mutated``: statics re-sent and changed, GPUs dropped,
processes coming and going, odd values and None fields) is staged both ways and compared
field by field, the numbers bit for bit, the epoch's pids by identity
(``test_stage_pack._same``).  Negative control: a copy that swaps each disk's r_await and
w_await is caught.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from probes.history import HostHistory
from probes.history import host as history_host
from probes.history.staged import Staged
from probes.wire.samples import HostSample
from tests.history import stage9_candidate
from tests.history.stage9_candidate import stage_row_rows
from tests.history.test_row_fold import _decode, _lines, _mutated
from tests.history.test_stage_pack import _same

Stager = Callable[..., Staged]


@contextmanager
def _both_ways(candidate: Stager, log: list[bool]) -> Iterator[None]:
    today = history_host.stage_row

    def stage_row(s: HostSample, row: Any, pids: Any, layout: tuple[int, ...], ok: float,
                  lens: tuple[int, ...] | None = None) -> Staged:
        got = today(s, row, pids, layout, ok, lens)
        log.append(_same(candidate(s, row, pids, layout, ok, lens), got, pids))
        return got

    history_host.stage_row = stage_row  # type: ignore[assignment]
    try:
        yield
    finally:
        history_host.stage_row = today


@pytest.fixture(scope="module")
def feeds() -> list[list[HostSample]]:
    out = []
    for k in range(16):
        hello, lines = _lines(k, 90)
        out.append(_decode(hello, lines, eager=False))
        if k % 2 == 0:
            mutated = list(_mutated(lines, random.Random(9000 + k), 17 + k))
            out.append(_decode(hello, mutated, eager=False))
    return out


def _agree(feeds: list[list[HostSample]], candidate: Stager) -> list[bool]:
    log: list[bool] = []
    with _both_ways(candidate, log):
        for feed in feeds:
            h = HostHistory()
            for s in feed:
                h.add(s)
    return log


def test_staging_from_the_row_equals_stage_row(feeds: list[list[HostSample]]) -> None:
    log = _agree(feeds, stage_row_rows)
    assert len(log) > 1500  # the row path is exercised on every template
    assert all(log), f"{log.count(False)} of {len(log)} staged samples differ"


def test_the_none_path_is_reached(feeds: list[list[HostSample]],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Some ticks leave a field unreported (the NaN pass after the pack refuses None)."""
    seen: list[int] = []
    real = stage9_candidate.staged._numbers

    def numbers(*a: Any) -> Any:
        seen.append(1)
        return real(*a)

    monkeypatch.setattr(stage9_candidate.staged, "_numbers", numbers)
    assert all(_agree(feeds, stage_row_rows))
    assert seen


def test_pids_that_do_not_fit_the_amounts_are_fitted_alike(
        feeds: list[list[HostSample]]) -> None:
    """The decoder refuses a tick whose amounts do not fit its epoch's processes, so the
    fitted branch is reached here by giving both stagers pids one longer or shorter."""
    rng = random.Random(38)
    checked = 0
    for feed in feeds:
        for s in feed[::7]:
            row: Any = s.wire_row
            if row is None:
                continue
            pids = [tuple(range(len(g.processes or ()))) for g in row.gpus]
            i = rng.randrange(len(pids))
            pids[i] = pids[i][:-1] if pids[i] and rng.random() < 0.5 else (*pids[i], 7)
            args: tuple[Any, ...] = (s, row, tuple(pids), tuple(range(len(pids))), 3.0)
            assert _same(stage_row_rows(*args), history_host.stage_row(*args))
            checked += 1
    assert checked > 200


def test_negative_control_swapped_disk_awaits_are_seen(feeds: list[list[HostSample]]) -> None:
    def swapped(s: Any, row: Any, *a: Any) -> Staged:
        got = stage_row_rows(s, row, *a)
        if not row.disks:
            return got
        nums = got.numbers[:]
        at = len(nums) - 4 * len(row.disks)
        for i in range(len(row.disks)):
            j = at + 4 * i
            nums[j + 1], nums[j + 2] = nums[j + 2], nums[j + 1]
        return got._replace(numbers=nums)

    log = _agree(feeds[:4], swapped)
    assert log.count(False) > len(log) // 2
