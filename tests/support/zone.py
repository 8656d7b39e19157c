"""The time zone a test renders times in: pinned to UTC, so strftime output (snapshots, the
screens' clocks) matches on any machine."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def pinned_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Autouse in each module that imports it: TZ=UTC for the test, the old zone after."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
