"""A v2 stream that builds its samples holds its ``static`` facts once (issue 38, memory).

The console's stream kept each ``static`` message's GPUs twice: parsed, as named fields (for
the checked path), and checked (the epoch's halves, for the fast path).  It now keeps the
line instead of the parsed fields and reads them again only when a tick needs the checked
path.  Main's stream is this one handed no line (it then keeps the parsed fields, as it
did); every sample built (fast path, checked path, a relayed row through ``from_row``)
must equal main's field by field over streams whose static facts change, are lost, re-sent
and garbled.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from probes.wire.compact import CompactStream
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from tests.transport.test_relay_rows import (
    _chunks,
    agent_stream,
    collector_batch,
    console_fold,
    decoded,
    differences,
    value_differences,
)

_STATIC = CompactStream.static


def _mains_static(self: CompactStream, obj: dict[str, Any], static_id: int = 0,
                  line: bytes | None = None, finite: bool = False) -> None:
    """Main's built stream: the parsed fields kept (no line to read them from again)."""
    _STATIC(self, obj, static_id, line if self._thin else None, finite)


def _stale_static(self: CompactStream, obj: dict[str, Any], static_id: int = 0,
                  line: bytes | None = None, finite: bool = False) -> None:
    """Wrong on purpose (the negative control): the checked path reads the first line kept."""
    first = self._message if isinstance(self._message, bytes) else None
    _STATIC(self, obj, static_id, line, finite)
    if first is not None and not self._thin:
        self._message = first


def _compare(got: list[Any], want: list[Any]) -> list[str]:
    out = differences(got, want)
    for k, (a, b) in enumerate(zip(got, want, strict=False)):
        if isinstance(a, HostSample):
            out += value_differences(a, b, f"{k}")
    return out


@pytest.fixture(scope="module")
def streams() -> list[bytes]:
    return [agent_stream(seed, 120) for seed in range(8)]


def _both(monkeypatch: pytest.MonkeyPatch, run: Any,
          wrong: Any = _mains_static) -> tuple[Any, Any]:
    new = run()
    with monkeypatch.context() as m:
        m.setattr(CompactStream, "static", wrong)
        old = run()
    return new, old


def test_decoded_samples_equal_mains(streams: list[bytes], monkeypatch: pytest.MonkeyPatch
                                     ) -> None:
    slow = 0
    for seed, stream in enumerate(streams):
        new, old = _both(monkeypatch, lambda s=stream, k=seed: decoded(s, k))
        assert _compare(new, old) == [], seed
        slow += sum(1 for m in new if isinstance(m, HostSample) and m.wire_row is None)
    assert slow > 30  # the checked path was taken (garbled ticks, text to sanitise)


def test_relayed_rows_equal_mains(streams: list[bytes], monkeypatch: pytest.MonkeyPatch
                                  ) -> None:
    batch = collector_batch(streams, 38)
    new, old = _both(monkeypatch, lambda: console_fold(batch, len(streams)))
    assert len(new) == len(old) == len(streams)
    for host, (a, b) in enumerate(zip(new, old, strict=True)):
        assert _compare(a, b) == [], host


def test_the_stream_keeps_the_line_not_the_fields(streams: list[bytes]) -> None:
    reader = MessageReader()
    for chunk in _chunks(streams[0], random.Random(1)):
        reader.feed(chunk)
    stream = reader.compact
    assert stream is not None and stream._has_static
    assert stream._static_gpus is None and isinstance(stream._message, bytes)
    stream._raw_statics()  # read again once, then kept while the epoch lasts
    assert stream._static_gpus is not None


def test_negative_control_a_stale_line_is_seen(streams: list[bytes],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    seen = 0
    for seed, stream in enumerate(streams):
        with monkeypatch.context() as m:
            m.setattr(CompactStream, "static", _stale_static)
            wrong = decoded(stream, seed)
        seen += bool(_compare(wrong, decoded(stream, seed)))
    assert seen > 0
