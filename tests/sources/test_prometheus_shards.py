"""A large fleet read a shard at a time: the plan, the matcher's escaping (against a real
Prometheus, with host labels chosen to match other hosts if pasted in unescaped), the
per-GPU slots, and the coalesced hand-off to the console's loop.

Host label values are remote text: dcgm-exporter copies the node's hostname into
``Hostname``, and a relabelling rule can put anything there.  The series are written as
dcgm-exporter's OpenMetrics (``DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-…",…,Hostname="…"}``,
as in NVIDIA's dcgm-exporter README) and backfilled with ``promtool``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import orjson
import pytest

from probes.sources.prometheus import shards as prometheus_shards
from probes.sources.prometheus.client import PromEndpoint
from probes.sources.prometheus.columns import SlotTable
from probes.sources.prometheus.fields import Kind
from probes.sources.prometheus.rows import RowDecoder
from probes.sources.prometheus.shards import plan, promql_string, set_matcher, shard_count
from probes.sources.prometheus.source import PromFleetOptions, PromFleetSource
from probes.transport import handoff as handoff_module
from probes.transport.handoff import Handoff
from probes.wire.events import SessionItem
from probes.wire.samples import HostSample
from probes.wire.sanitize import clean_text
from tests.support.prometheus import backfill, prometheus

HOSTILE = ['pipe|or', 'pipe', 'or', '.*', 'a"quote', 'back\\slash', 'paren(1)[x]{2}+?',
           'ünï-ß', 'new\nline', '^start$', 'plain-01']
"""Host label values; ``pipe|or`` and ``.*`` unescaped would select other hosts' series."""

FAMILIES = {"DCGM_FI_DEV_FB_USED": 1000.0, "DCGM_FI_DEV_FB_FREE": 80000.0,
            "DCGM_FI_DEV_GPU_UTIL": 97.0, "DCGM_FI_DEV_GPU_TEMP": 61.0,
            "DCGM_FI_DEV_POWER_USAGE": 612.5, "DCGM_FI_DEV_SM_CLOCK": 1980.0,
            "DCGM_FI_DEV_XID_ERRORS": 0.0}


def _om_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _openmetrics(end: float) -> str:
    lines = []
    for name, value in FAMILIES.items():
        lines.append(f"# TYPE {name} gauge")
        for h, host in enumerate(HOSTILE):
            for g in range(8):
                labels = (f'gpu="{g}",UUID="GPU-{h:08x}-0000-4000-8000-{g:012x}",'
                          f'pci_bus_id="00000000:{0x18 + 16 * g:02X}:00.0",device="nvidia{g}",'
                          f'modelName="NVIDIA H100 80GB HBM3",Hostname="{_om_value(host)}",'
                          f'instance="10.0.0.{h}:9400",job="dcgm"')
                for t in (end - 60.0, end):
                    lines.append(f"{name}{{{labels}}} {value + h} {t:.3f}")
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def hostile_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("shards")
    om = root / "fleet.om"
    om.write_text(_openmetrics(time.time() - 30.0))
    tsdb = root / "prom" / "tsdb"
    tsdb.mkdir(parents=True)
    backfill(om, tsdb)
    with prometheus(root / "prom") as prom:
        yield prom.url


def test_a_small_fleet_is_one_shard_with_no_matcher() -> None:
    assert shard_count(1000 * 8, 6) == 1
    assert shard_count(1001 * 8, 6) == 2
    assert shard_count(10_000 * 8, 6) == 10
    assert plan({"a": {"a"}, "b": {"b"}}, "Hostname", 1) == [
        prometheus_shards.Shard(frozenset({"a", "b"}), "")]


def test_the_plan_puts_every_host_in_one_shard_with_all_its_scrape_addresses() -> None:
    values = {f"h{i:02d}": {f"10.0.0.{i}:9400"} for i in range(10)}
    values["h03"].add("10.9.9.9:9400")  # the exporter answered under two addresses
    shards = plan(values, "instance", 3)
    assert len(shards) == 3
    seen = [h for s in shards for h in s.hosts]
    assert sorted(seen) == sorted(values) and len(seen) == len(set(seen))
    holding = next(s for s in shards if "h03" in s.hosts)
    assert "10\\\\.9\\\\.9\\\\.9:9400" in holding.matcher
    assert "10\\\\.0\\\\.0\\\\.3:9400" in holding.matcher


def test_the_matcher_is_plain_ascii_whatever_the_labels_hold() -> None:
    matcher = set_matcher("Hostname", [*HOSTILE, "\x1b[31mred", "tab\there"])
    assert matcher.isascii() and matcher.isprintable()
    assert matcher.startswith('Hostname=~"') and matcher.endswith('"')
    body = matcher[len('Hostname=~"'):-1]
    # no quote ends the string early: every quote inside is escaped
    assert all(body[i - 1] == "\\" for i, c in enumerate(body) if c == '"')
    assert "\\\\x{1b}" in body and "\\\\x{fc}" in body
    assert promql_string('a"b\\c\n') == '"a\\"b\\\\c\\n"'


async def test_each_shard_reads_exactly_its_own_hosts(
        hostile_prometheus: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a shard a read of at most 3 hosts' GPUs × the fields read every refresh
    monkeypatch.setattr(prometheus_shards, "SERIES_PER_READ", 3 * 8 * 6)
    source = PromFleetSource(PromFleetOptions(PromEndpoint(hostile_prometheus),
                                              history_s=0.0))
    disc = await source.discover()
    assert disc.shard_label == "Hostname"
    assert len(disc.hosts) == len(HOSTILE)
    assert len(source.shards) >= 4
    assert all(s.matcher for s in source.shards)
    union: set[str] = set()
    for k, shard in enumerate(source.shards):
        _, samples, _ = await source.read_shard(k)
        assert set(samples) == set(shard.hosts), (shard.matcher, sorted(samples))
        assert not union & set(samples)
        union |= set(samples)
        for host, sample in samples.items():
            assert [g.index for g in sample.gpus] == list(range(8)), host
        # the first read of a shard asks for every collected field, one query each
        assert source.last_queries == 7
    assert union == set(disc.hosts)
    # the values came back under the right host
    _, whole, _ = await source.read_now()
    by_value = {h: 1000.0 + i for i, h in enumerate(HOSTILE)}
    for host in disc.hosts:
        raw = next(v for v in by_value if clean_text(v) == host)
        assert whole[host].gpus[0].mem_used_mib == by_value[raw], host


def _vector(rows: list[tuple[str, str, str, float]]) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"Hostname": h, "instance": i, "gpu": g}, "value": [1700000000.0, str(v)]}
        for h, i, g, v in rows]}})


def test_a_gpu_answering_under_two_addresses_is_one_gpu() -> None:
    decoder = RowDecoder("Hostname")
    table = SlotTable(decoder)
    used = table.column(decoder.instant(_vector([
        ("h1", "10.0.0.1:9400", "0", 100.0), ("h1", "10.0.0.1:9400", "1", 101.0),
        ("h1", "10.0.0.99:9400", "1", float("nan")), ("h2", "10.0.0.2:9400", "0", 200.0)]),
        "q"), Kind.FLOAT)
    temp = table.column(decoder.instant(_vector([
        ("h1", "10.0.0.99:9400", "1", 55.0), ("h2", "10.0.0.2:9400", "0", 60.0)]), "q"),
        Kind.FLOAT)
    layout = dict(table.layout())
    assert [idx for idx, _ in layout["h1"]] == [0, 1]
    assert len(dict(layout["h1"])[1]) == 2  # GPU1's two slots
    built, _ = table.build([("mem_used_mib", used), ("temp_c", temp)], [], None, {}, {})
    h1 = {g.index: g for g in built["h1"]}
    assert h1[1].mem_used_mib == 101.0 and h1[1].temp_c == 55.0
    assert h1[0].temp_c is None
    assert built["h2"][0].mem_used_mib == 200.0


def test_a_gpu_with_no_reading_now_gets_no_sample_and_no_old_values() -> None:
    decoder = RowDecoder("Hostname")
    table = SlotTable(decoder)
    first = table.column(decoder.instant(_vector([
        ("h1", "a:9400", "0", 1.0), ("h1", "a:9400", "1", 2.0)]), "q"), Kind.FLOAT)
    table.build([("mem_used_mib", first)], [], None, {}, {})
    later = table.column(decoder.instant(_vector([("h1", "a:9400", "0", 3.0)]), "q"),
                         Kind.FLOAT)
    built, _ = table.build([("mem_used_mib", later)], [], None, {}, {})
    assert [(g.index, g.mem_used_mib) for g in built["h1"]] == [(0, 3.0)]


def test_an_xid_is_an_event_when_the_last_code_changes() -> None:
    decoder = RowDecoder("Hostname")
    table = SlotTable(decoder)
    last: dict[tuple[str, int], int] = {}

    def read(code: float) -> list[tuple[tuple[str, int], int]]:
        rows = [("h1", "a:9400", "0", 5.0)]
        used = table.column(decoder.instant(_vector(rows), "q"), Kind.FLOAT)
        xid = table.column(decoder.instant(_vector([("h1", "a:9400", "0", code)]), "q"),
                           Kind.XID)
        return table.build([("mem_used_mib", used)], [], xid, {}, last)[1]

    assert read(0.0) == [(("h1", 0), 0)]
    assert read(0.0) == []
    assert read(79.0) == [(("h1", 0), 79)]
    assert read(79.0) == []  # sticky: the same code again is not a new event


async def test_the_handoff_keeps_order_and_wakes_the_loop_once_a_burst() -> None:
    loop = asyncio.get_running_loop()
    got: list[tuple[str, SessionItem]] = []
    done = asyncio.Event()
    total = 20_000

    def deliver(host: str, item: SessionItem) -> None:
        got.append((host, item))
        if len(got) == total:
            done.set()

    hand = Handoff(loop, deliver)
    items = [(f"h{i % 97}", HostSample(float(i), i, ())) for i in range(total)]
    thread = threading.Thread(target=lambda: [hand.put(h, s) for h, s in items])
    thread.start()
    await asyncio.wait_for(done.wait(), 30)
    thread.join()
    assert got == items
    assert hand.drains < total / 50, hand.drains


async def test_a_long_burst_is_folded_in_slices_that_let_the_loop_breathe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handoff_module, "SLICE_S", 0.01)
    loop = asyncio.get_running_loop()
    order: list[str] = []
    total = 400

    def slow(host: str, item: SessionItem) -> None:
        order.append("item")
        end = time.perf_counter() + 0.0005
        while time.perf_counter() < end:
            pass

    hand = Handoff(loop, slow)
    for i in range(total):
        hand.put("h", HostSample(float(i), i, ()))
    ticks = 0
    while order.count("item") < total:
        await asyncio.sleep(0)
        ticks += 1
        order.append("tick")
    # the 0.2 s burst was cut into slices, and the loop ran other callbacks between them
    assert hand.drains >= 5
    first, last = order.index("item"), len(order) - 1 - order[::-1].index("item")
    assert "tick" in order[first:last]
