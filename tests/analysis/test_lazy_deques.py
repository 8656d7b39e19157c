"""A host holds its errors, reach onsets, log events, fabric errors and its log scanner's
queues in deques only once it has one (issue 38, memory: an empty deque is ~0.8 KB, seven a
host at 1,000 hosts is ~5.5 MB, and most hosts never err, drop or log).  Once one comes
they are the deques they were, with the same bound: the readers (``len``, iteration,
``tuple``) read them as before."""

from __future__ import annotations

from collections import deque

from probes.config.fleet import HostSpec
from probes.errors import DisconnectKind
from probes.fleet_state import FleetState
from probes.wire.events import Connected, Disconnected
from probes.wire.samples import LogEvent, ProbeError
from tests.support.builders import gpu, hello, sample


def _streaming() -> FleetState:
    fleet = FleetState([HostSpec("h", expect_gpus=8)])
    fleet.apply("h", hello(), now=1.0)
    for t in range(2, 6):
        fleet.apply("h", sample(tuple(gpu(i) for i in range(8)), ts=float(t)), now=float(t))
    return fleet


def test_a_quiet_host_holds_no_deque() -> None:
    host = _streaming().hosts["h"]
    for held in (host.errors, host.reach.onsets, host.logs.events):
        assert held == () and not isinstance(held, deque)
        assert len(held) == 0 and list(held) == [] and tuple(held)[-5:] == ()


def test_each_is_the_bounded_deque_it_was_from_its_first_item() -> None:
    fleet = _streaming()
    host = fleet.hosts["h"]
    for k in range(150):
        fleet.apply("h", ProbeError(10.0 + k, "smi", f"timeout {k}"), now=10.0 + k)
        fleet.apply("h", LogEvent(10.0 + k, "job:/x.log", f"line {k}"), now=10.0 + k)
    for k in range(40):  # an outage, then back: each outage one onset
        fleet.apply("h", Disconnected(200.0 + 2 * k, "refused", 5.0, None,
                                      DisconnectKind.UNREACHABLE), now=200.0 + 2 * k)
        fleet.apply("h", Connected(201.0 + 2 * k), now=201.0 + 2 * k)
        fleet.apply("h", sample(tuple(gpu(i) for i in range(8)), ts=201.5 + 2 * k),
                    now=201.5 + 2 * k)
    errors, onsets, events = host.errors, host.reach.onsets, host.logs.events
    assert isinstance(errors, deque) and errors.maxlen == 100
    assert [e.message for e in errors] == [f"timeout {k}" for k in range(50, 150)]
    assert isinstance(events, deque) and events.maxlen == 500 and len(events) == 150
    assert isinstance(onsets, deque) and onsets.maxlen == 32
    assert list(onsets) == [200.0 + 2 * k for k in range(8, 40)]
    assert any(f.code == "flapping" for f in host.findings())


def test_a_quiet_host_holds_no_scanner_queue_nor_fabric_deque() -> None:
    host = _streaming().hosts["h"]
    scanner = host.logs.scanner
    for held in (scanner.inbox, scanner.done, scanner.readings, host.fabric.errors):
        assert held == () and not isinstance(held, deque)
    assert scanner.take() == [] and scanner.take_readings() == []
    assert host.fabric.recent(100.0, 60.0) == {}


def test_the_scanner_queues_fill_and_empty_as_deques_once_used() -> None:
    from probes.rules.logrules.live import LiveLogScanner

    scanner = LiveLogScanner()
    scanner.reader = lambda text: ("it/s", 2.5) if "it/s" in text else None
    scanner.post("job:/x.log", "step 10 3.1 it/s", 1.0)
    scanner.post("job:/x.log", "torch.OutOfMemoryError: CUDA out of memory.", 2.0)
    assert isinstance(scanner.inbox, deque)
    scanner.work()
    assert isinstance(scanner.readings, deque) and isinstance(scanner.done, deque)
    assert [r[:3] for r in scanner.take_readings()] == [("job:/x.log", 1.0, ("it/s", 2.5))]
    hits = scanner.take()
    assert hits and scanner.take() == [] and scanner.take_readings() == []
