"""The network panel: a healthy and a broken host's ports and NVLinks, the core's marks with
a glyph and a word, columns dropped when narrow, and its snapshot on a broken host."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult

from tests.support.widget_app import ThemedApp
from widgets.network_panel import GpuLinks, NetworkPanel, NetworkView, PortRow, rate, render_network


def healthy() -> NetworkView:
    ports = tuple(PortRow(f"mlx5_{i}/1", "Active", 400.0, "IB", 2.1e10, 2.08e10,
                          beside=f"GPU{i}") for i in range(8))
    links = tuple(GpuLinks(g, 18, 18, 26.562) for g in range(8))
    return NetworkView(ports, links, "10 min")


def broken() -> NetworkView:
    """mlx5_3 down beside GPU 3 (one flap), mlx5_5 trained at 200, mlx5_6 counting symbol
    errors, a counter reset on mlx5_7; GPU 2 with an NVLink down, GPU 5 with CRC errors."""
    ports = list(healthy().ports)
    ports[3] = PortRow("mlx5_3/1", "DOWN Polling", 10.0, "IB", 0.0, 0.0, "1 flap", "GPU3",
                       "down")
    ports[5] = PortRow("mlx5_5/1", "Active", 200.0, "IB", 1.2e10, 1.2e10, beside="GPU5",
                       verdict="slow")
    ports[6] = PortRow("mlx5_6/1", "Active", 400.0, "IB", 2.0e10, 2.0e10,
                       "+412 symbol_error, +3 link_error_recovery", "GPU6", "errors")
    ports[7] = PortRow("mlx5_7/1", "Active", 400.0, "IB", None, 2.0e10, beside="GPU7",
                       unknown=True)
    links = list(healthy().nvlinks)
    links[2] = GpuLinks(2, 17, 18, 26.562, verdict="down")
    links[5] = GpuLinks(5, 18, 18, 26.562, "1843 replay, 7 recovery, 96 crc", "errors")
    return NetworkView(tuple(ports), tuple(links), "10 min")


def _line(view: NetworkView, width: int, starts: str) -> str:
    return next(x for x in render_network(view, width).plain.splitlines()
                if x.startswith(starts))


def test_rates_in_the_units_an_operator_reads() -> None:
    assert rate(2.1e10) == "21.0 GB/s" and rate(8.12e8) == "812.0 MB/s"
    assert rate(0.0) == "0 B/s" and rate(None) == "–"


def test_a_healthy_host_reads_ok_on_every_line() -> None:
    text = render_network(healthy(), 158).plain
    assert text.splitlines()[0] == "network · errors over 10 min"
    assert _line(healthy(), 158, "mlx5_3/1").split() == [
        "mlx5_3/1", "Active", "✓", "ok", "400", "Gb/s", "IB", "21.0", "GB/s", "20.8", "GB/s",
        "GPU3", "–"]
    assert _line(healthy(), 158, "GPU7").split() == ["GPU7", "18/18", "up", "at", "26.562",
                                                     "GB/s", "✓", "ok"]
    assert "DOWN" not in text and "errors" not in text.split("\n", 1)[1].replace(
        "errors over", "")


def test_a_broken_host_marks_each_line_with_a_glyph_and_a_word() -> None:
    view = broken()
    assert "✗ DOWN" in _line(view, 158, "mlx5_3/1") and "1 flap" in _line(view, 158, "mlx5_3")
    assert "▼ slow" in _line(view, 158, "mlx5_5/1") and "200 Gb/s" in _line(view, 158, "mlx5_5")
    assert "▲ errors" in _line(view, 158, "mlx5_6/1")
    assert "+412 symbol_error" in _line(view, 158, "mlx5_6/1")
    assert "reset?" in _line(view, 158, "mlx5_7/1")  # no rate made up across a reset
    assert "17/18 up" in _line(view, 158, "GPU2") and "✗ DOWN" in _line(view, 158, "GPU2")
    assert "96 crc" in _line(view, 158, "GPU5")
    down = render_network(view, 158)
    spans = [down.plain[s.start:s.end] for s in down.spans if "sev-critical" in str(s.style)]
    assert [x.strip() for x in spans].count("✗ DOWN") == 2  # the port and GPU 2's NVLinks


def test_narrow_drops_layer_and_traffic_first() -> None:
    line = _line(broken(), 78, "mlx5_6/1")
    assert "IB" not in line.split() and "GB/s" not in line
    assert "▲ errors" in line and "GPU6" in line
    assert all(len(x) <= 78 for x in render_network(broken(), 78).plain.splitlines())


def test_nothing_reported() -> None:
    assert render_network(None, 80).plain.splitlines()[1] == (
        "no InfiniBand/RoCE ports or NVLinks reported")


class PanelApp(ThemedApp):
    def __init__(self, view: NetworkView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        yield NetworkPanel(id="network")

    def on_mount(self) -> None:
        self.query_one(NetworkPanel).network = self.view


def test_snapshot_of_a_broken_host(snap_compare: Callable[..., bool]) -> None:
    """A port down beside GPU 3, one slow, one counting errors, a reset counter; an NVLink
    down and CRC errors: each with its mark."""
    assert snap_compare(PanelApp(broken()), terminal_size=(120, 24))
