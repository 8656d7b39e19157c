"""``tests.support.templates`` answers what a fresh ``bench_ingest.template`` does (CI time,
issue 38 s14): a shorter template sliced from a longer one is that shorter template, byte for
byte, for every host; and each call's lists are its own."""

from __future__ import annotations

import pytest

from tests.bench import bench_ingest
from tests.support import templates


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty cache here, whatever the worker built before (and it is left as it was)."""
    monkeypatch.setattr(templates, "_HELD", {})


def test_a_slice_of_a_longer_template_is_the_shorter_template() -> None:
    for k in range(templates.TEMPLATES):
        templates.template(k, 37)  # the longest, built first
        for seconds in (1, 12, 36, 37):
            assert templates.template(k, seconds) == bench_ingest.template(k, seconds), k
    assert all(len(v1[1]) == 37 for v1, _ in templates._HELD.values())


def test_a_longer_template_asked_later_is_built_again() -> None:
    assert templates.template(3, 5) == bench_ingest.template(3, 5)
    assert templates.template(3, 20) == bench_ingest.template(3, 20)
    assert len(templates._HELD[3][1][1]) == 20


def test_each_call_gets_its_own_lists() -> None:
    (_, a), (_, a2) = templates.template(2, 6)
    a.clear()
    a2.append(b"spoiled")
    assert templates.template(2, 6) == bench_ingest.template(2, 6)


def test_negative_control_another_hosts_or_a_shifted_slice_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = bench_ingest.template(4, 12)
    monkeypatch.setattr(templates, "_HELD", {4: bench_ingest.template(5, 30)})
    assert templates.template(4, 12) != fresh  # another host's ticks
    (h, lines), (h2, lines2) = bench_ingest.template(4, 30)
    monkeypatch.setattr(templates, "_HELD", {4: ((h, lines[1:]), (h2, lines2[1:]))})
    assert templates.template(4, 12) != fresh  # a tick late
    monkeypatch.setattr(templates, "_HELD", {4: ((h, lines), (h2, lines2))})
    assert templates.template(4, 12) == fresh
