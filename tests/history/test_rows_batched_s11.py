"""Session 11's batched reads of the bucket and raw tiers (issue 38) answer every query and
every detector as the reads before did, bit for bit.

``Ring.rows_many`` now decodes an integer codec's series together (``decode_group``) and
``RawRing.rows_many`` widens a float codec's slots together (``widen``); the reads before
are ``rows_before_s11`` (main ``c12fc7c``, copied).  One history per stream is read both
ways (the reads change nothing in it): every query (``test_block_columns._digest``: points,
bins, unmerged, latest, …; every third check and at the end), the detectors' windows of
every dense series read together (one field of every GPU, and every key at once: mixed
codecs), and the detectors'
findings field by field (``test_judges_changed._exact``: types and onsets) — the schedule's
at every sample and every detector at once every few samples — under the default limits
and random short ones (there the queries only at the end: limits change no history).
Streams: ``test_raw_matrix``'s (random ones with GPUs appearing and
going, processes and disks coming and going, gaps, NaN/±0/±inf/past-half values, short
tiers, processes forgotten; the simulator; mutated v2 streams), all 16 simulator
templates over 15 min with odd values and restarts, ``bench_fold_age``'s hosts (hung,
idle, flipping, throttling, leaking, starved) with silences, and hostile relay streams.
Negative controls: missing values read as numbers (bucket and raw), and lows read for
highs, are seen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from probes.analysis.detectors import DetectorSchedule, run_detectors
from probes.analysis.limits import DEFAULT_LIMITS, DetectorLimits
from probes.history import HostHistory, raw, storage
from probes.history.raw import RawRing
from probes.history.storage import Ring
from probes.wire.protocol import MessageReader
from probes.wire.samples import Hello, HostSample
from tests.analysis.test_detectors_young import random_limits, samples
from tests.analysis.test_judges_changed import _exact
from tests.bench.bench_fold_age import HOSTS, stream
from tests.history import rows_before_s11
from tests.history.test_block_columns import _digest
from tests.history.test_raw_matrix import _cases, _windows
from tests.history.test_tier2_matrix import _odd
from tests.support.fingerprint import fingerprint
from tests.support.templates import TEMPLATES, template
from tests.transport.test_relay_rows import agent_stream

NEW = (Ring.rows_many, RawRing.rows_many)
COUNT: Counter[str] = Counter()
"""How often each batched path ran (not vacuous)."""


@contextlib.contextmanager
def reads_before() -> Iterator[None]:
    """The tiers read as before session 11."""
    Ring.rows_many = rows_before_s11.rows_many  # type: ignore[method-assign]
    RawRing.rows_many = rows_before_s11.rows_many  # type: ignore[method-assign]
    try:
        yield
    finally:
        Ring.rows_many, RawRing.rows_many = NEW  # type: ignore[method-assign]


def _queries(h: HostHistory, digest: bool = True) -> str:
    """The detectors' windows of every dense series read together (where the batched reads
    run: every control below is caught here), and with ``digest`` every other query
    (``_digest``: series read one at a time; 60% of the cost, no control caught by it alone);
    as text by ``fingerprint`` (equal exactly where ``repr`` is, at a third of its cost)."""
    keys = [k for k in h.series_keys() if h.steps(k) is None]  # type: ignore[arg-type]
    last = h.last_ts or 0.0
    return fingerprint([_digest(h) if digest else None, _windows(h),
                        h.windows(keys, last - 300.0, 20), h.windows(keys, last - 1500.0, 100),
                        h.windows(keys, last - 40.0)])


def _same(found: Any) -> str:
    """Findings field by field with their types, as text (a NaN in two findings alike,
    an odd value's mean, compares equal)."""
    return repr(_exact(found))


def _both(f: Any) -> tuple[Any, Any]:
    a = f()
    with reads_before():
        b = f()
    return a, b


def _items(hello: bytes, chunks: list[bytes]) -> list[Hello | HostSample]:
    reader = MessageReader()
    return [m for c in [hello, *chunks] for m in reader.feed(c)
            if isinstance(m, Hello | HostSample)]


def first_difference(items: list[Hello | HostSample], limits: DetectorLimits,
                     kw: dict[str, Any] | None = None, every: int = 97,
                     whole: int = 5) -> str | None:
    """One history, read both ways: the windows every ``every`` samples (with every query
    every third time and at the end), the schedule's findings every sample, every detector
    at once every ``whole`` samples."""
    h = HostHistory(**(kw or {}))
    new, old = DetectorSchedule(limits), DetectorSchedule(limits)
    hello: Hello | None = None
    n = 0
    for item in items:
        if isinstance(item, Hello):
            hello = item
            continue
        h.add(item)
        n += 1
        a = new.run("h", h, hello, item)
        with reads_before():
            b = old.run("h", h, hello, item)
        if (a is None) != (b is None) or _same(a or ()) != _same(b or ()):
            return f"schedule at {item.ts}"
        if a:
            COUNT.update(f.code.value for f in a)
        if n % whole == 0:
            a2, b2 = _both(functools.partial(run_detectors, "h", h, hello, item, limits))
            if _same(a2) != _same(b2):
                return f"detectors at {item.ts}"
        if n % every == 0:
            qa, qb = _both(functools.partial(_queries, h, n % (3 * every) == 0))
            if qa != qb:
                return f"queries at {item.ts}"
    qa, qb = _both(lambda: _queries(h))
    return None if qa == qb else "queries at the end"


@pytest.fixture(autouse=True)
def _counted(monkeypatch: pytest.MonkeyPatch) -> None:
    real_group, real_widen = storage.decode_group, raw.widen

    def group(codec: Any, stored: Any) -> Any:
        got = real_group(codec, stored)
        COUNT["group"] += 1
        COUNT["group_missing"] += sum(got[0])
        return got

    def widen(codec: Any, stored: Any, w: int, idx: Any) -> Any:
        got = real_widen(codec, stored, w, idx)
        COUNT["widen"] += 1
        COUNT["widen_nan"] += sum(got[1])
        return got

    monkeypatch.setattr(storage, "decode_group", group)
    monkeypatch.setattr(raw, "widen", widen)


@functools.cache
def _template(seconds: int, k: int) -> list[Hello | HostSample]:
    """Template ``k``'s items with odd values (each worker builds only the ones it runs)."""
    items = _items(*template(k, seconds)[1])
    hello = [i for i in items if isinstance(i, Hello)]
    odd = _odd([i for i in items if isinstance(i, HostSample)], 50 + k)
    return [*hello, *odd]


def test_raw_matrix_streams_read_as_before() -> None:
    for samples_, kw in _cases():
        assert first_difference(list(samples_), DEFAULT_LIMITS, kw, every=113,
                                whole=61) is None
    assert COUNT["group"] > 100 and COUNT["widen"] > 100
    assert COUNT["group_missing"] > 0 and COUNT["widen_nan"] > 0


@pytest.mark.parametrize("k", range(TEMPLATES))
def test_simulator_templates_read_as_before(k: int) -> None:
    assert first_difference(_template(900, k), DEFAULT_LIMITS, whole=41) is None


@pytest.mark.parametrize("seed", range(2))
def test_templates_under_random_limits(seed: int) -> None:
    rng = random.Random(seed)
    for k in rng.sample(range(TEMPLATES), 2):
        limits = random_limits(rng)
        # the queries only at the end: limits change no history, and the same histories'
        # queries at the same samples are compared above
        assert first_difference(_template(900, k), limits, every=10**9, whole=9) is None
    assert sum(v for c, v in COUNT.items() if c not in (
        "group", "group_missing", "widen", "widen_nan")) > 0  # findings seen


@pytest.mark.parametrize("name", HOSTS)
def test_aging_hosts_read_as_before(name: str) -> None:
    items = list(samples(stream(name, 1500.0, 1.0, gaps=0.003)))
    assert first_difference(items, DEFAULT_LIMITS, whole=29) is None
    items = list(samples(stream(name, 2400.0, 5.0, gaps=0.003)))
    lim = dataclasses.replace(DEFAULT_LIMITS, min_coverage=0.3, throttle_window_s=90.0,
                              temp_window_s=90.0, power_window_s=150.0, hang_window_s=90.0,
                              starve_window_s=150.0, leak_min_data_s=300.0)
    assert first_difference(items, lim, whole=5) is None


@pytest.mark.parametrize("seed", range(3))
def test_hostile_relay_streams_read_as_before(seed: int) -> None:
    items = list(samples(iter(agent_stream(40 + seed, 600).splitlines(keepends=True))))
    assert first_difference(items, random_limits(random.Random(seed)), whole=3) is None


def _spoiled(monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    real_group, real_widen = storage.decode_group, raw.widen

    def group(codec: Any, stored: Any) -> Any:
        bad, lo, hi, mean = real_group(codec, stored)
        if what == "swap":
            return bad, hi, lo, mean
        return [False] * len(bad), lo, hi, mean

    def widen(codec: Any, stored: Any, w: int, idx: Any) -> Any:
        got, bad = real_widen(codec, stored, w, idx)
        return got, [False] * len(bad)

    monkeypatch.setattr(storage, "decode_group", group)
    if what == "raw":
        monkeypatch.setattr(raw, "widen", widen)


@pytest.mark.parametrize("what", ["bucket", "raw", "swap"])
def test_negative_controls_are_seen(monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """Missing values taken as numbers (a bucket's sentinel, a raw NaN), lows for highs."""
    _spoiled(monkeypatch, what)
    seen = 0
    for samples_, kw in _cases()[:4]:
        seen += first_difference(list(samples_), DEFAULT_LIMITS, kw, every=113,
                                 whole=23) is not None
        if seen:
            break  # one stream that differs is all this asks
    assert seen >= 1
