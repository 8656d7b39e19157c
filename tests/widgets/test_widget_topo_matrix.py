"""The PCIe topology panel: matrix colours by link class, legend, GPU–NIC paths, PCIe links,
and how it fits 160 and 80 columns."""

from __future__ import annotations

import pytest
from rich.color import Color
from textual.app import App, ComposeResult

from probes.rules.parsers.topo import parse_topo
from probes.triage import Severity
from tests.support.screens import panel_lines
from tests.support.widget_app import ThemedApp
from widgets import topo_matrix
from widgets.topo_matrix import (
    GpuLink,
    TopoPanel,
    TopoView,
    abbreviate,
    link_class,
    link_rank,
    nearest_nics,
    pcie_text,
    render_topo,
    short_cell,
)

GPUS = tuple(f"GPU{i}" for i in range(8))
NICS = tuple(f"NIC{i}" for i in range(10))


class PanelApp(ThemedApp):
    """The panel alone, styled as the console styles it."""

    def compose(self) -> ComposeResult:
        yield TopoPanel(id="topo")


def hgx_links() -> dict[str, dict[str, str]]:
    """8 GPUs on NV18, NICi under GPUi's switch (PIX), NODE within a socket, SYS across;
    NIC8/NIC9 (storage) on socket 0; GPU2–GPU5 has lost one NVLink (NV17)."""
    devices = GPUS + NICS
    socket = {d: (i % 8) // 4 if d.startswith("GPU") else (0 if i >= 16 else (i - 8) // 4)
              for i, d in enumerate(devices)}
    links: dict[str, dict[str, str]] = {}
    for r in devices:
        row = {}
        for c in devices:
            if r == c:
                row[c] = "X"
            elif r in GPUS and c in GPUS:
                row[c] = "NV18"
            elif {r, c} in ({f"GPU{i}", f"NIC{i}"} for i in range(8)):
                row[c] = "PIX"
            else:
                row[c] = "NODE" if socket[r] == socket[c] else "SYS"
        links[r] = row
    links["GPU2"]["GPU5"] = links["GPU5"]["GPU2"] = "NV17"
    return links


def hgx_view() -> TopoView:
    cpu = {g: "0-55,112-167" if i < 4 else "56-111,168-223" for i, g in enumerate(GPUS)}
    numa = {g: "0" if i < 4 else "1" for i, g in enumerate(GPUS)}
    state = [GpuLink(i, 5, 5, 16, 16, f"0000:{0x18 + 16 * i:02x}:00.0") for i in range(8)]
    state[3] = GpuLink(3, 5, 5, 8, 16, "0000:48:00.0", "switch 0000:46:00.0 x8/16",
                       width_low=True, shortfall=Severity.WARNING)
    state[4] = GpuLink(4, 1, 5, 16, 16, "0000:58:00.0", gen_low=True, shortfall=Severity.INFO)
    return TopoView(GPUS, NICS, hgx_links(), cpu, numa, tuple(state), {"NIC0": "mlx5_0"})


def line_of(lines: list[str], start: str, nth: int = 0) -> str:
    """The ``nth`` line after the title and matrix header starting with ``start`` (a GPU's
    matrix row comes before its table row)."""
    return [line for line in lines[2:] if line.strip().startswith(start)][nth]


def colour_of(panel: TopoPanel, row_start: str, token: str, nth: int = 0) -> Color | None:
    """Foreground colour of the ``nth`` ``token`` on the line starting with ``row_start``."""
    for strip in panel.render_lines(panel.region.reset_offset):
        if not strip.text.strip().startswith(row_start):
            continue
        seen = 0
        for seg in strip:
            if seg.text.strip() == token:
                if seen == nth:
                    return seg.style.color if seg.style else None
                seen += 1
    raise AssertionError(f"{token!r} not found on {row_start!r}")


def theme_colour(app: App[None], name: str) -> Color:
    return Color.parse(app.get_css_variables()[name])


# ---- pure parts ------------------------------------------------------------------------


def test_link_classes_order_nearest_to_farthest() -> None:
    cells = ["SYS", "NODE", "PHB", "PXB", "PIX", "NV4", "X"]
    assert sorted(cells, key=link_rank) == ["X", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]
    assert link_class("NV18") == link_class("NV1") == "NV"
    assert link_class("SOC") == "SYS"
    assert link_class("N/A") is None and link_class(None) is None
    assert link_rank("OK") > link_rank("SYS")


def test_abbreviations_and_short_cells() -> None:
    assert [abbreviate(n) for n in ("GPU3", "NIC12", "mlx5_1", "X")] == ["G3", "N12", "m1", "X"]
    assert short_cell("NV18", 18) == "NV" and short_cell("NV17", 18) == "NV↓"
    assert short_cell("NV4", 18) == "NV4"
    assert short_cell("NODE", 18) == "NOD" and short_cell("SYS", 18) == "SYS"


def test_nearest_nic_keeps_ties_and_ignores_unknown_cells() -> None:
    view = TopoView(("GPU0",), ("NIC0", "NIC1", "NIC2"),
                    {"GPU0": {"GPU0": "X", "NIC0": "SYS", "NIC1": "PXB", "NIC2": "PXB"}})
    assert nearest_nics(view, "GPU0") == (["NIC1", "NIC2"], "PXB")
    odd = TopoView(("GPU0",), ("NIC0",), {"GPU0": {"GPU0": "X", "NIC0": "N/A"}})
    assert nearest_nics(odd, "GPU0") == ([], None)
    assert nearest_nics(odd, "GPU9") == ([], None)


def test_pcie_text_marks_downgrades_with_glyph_and_word() -> None:
    """The marks and the word are the core's (``judge.link_verdict``), rendered as given."""
    assert pcie_text(GpuLink(0, 5, 5, 16, 16)) == ("Gen5 x16", "", None)
    assert pcie_text(GpuLink(0, 5, 5, 8, 16, width_low=True, shortfall=Severity.WARNING)) \
        == ("Gen5 ▼ x8/16", "lanes lost", Severity.WARNING)
    assert pcie_text(GpuLink(0, 1, 4, 16, 16, gen_low=True, shortfall=Severity.INFO)) \
        == ("▼ Gen1/4 x16", "gen down", Severity.INFO)
    # an idle GPU trained down: the core says ok, so the mark stays and no word is added
    assert pcie_text(GpuLink(0, 1, 4, 16, 16, gen_low=True)) == ("▼ Gen1/4 x16", "", None)
    assert pcie_text(GpuLink(0, 3, 4, 4, 16, gen_low=True, width_low=True,
                             shortfall=Severity.WARNING))[0] == "▼ Gen3/4 ▼ x4/16"
    assert pcie_text(GpuLink(0, None, 5, 16, None)) == ("Gen– x16", "", None)
    assert pcie_text(GpuLink(0)) == ("–", "", None)
    assert pcie_text(None) == ("–", "", None)


def test_from_matrix_takes_the_parser_output_as_is() -> None:
    matrix = parse_topo(HEADERLESS_NIC_LEGEND)
    view = TopoView.from_matrix(matrix, (GpuLink(1, 4, 4, 16, 16),))
    assert view.gpus == ("GPU0", "GPU1") and view.nics == ("NIC0",)
    assert view.nic_names == {"NIC0": "mlx5_0"}
    assert view.links_state == (GpuLink(1, 4, 4, 16, 16),)
    text = str(render_topo(view, 120))
    assert "NIC0 mlx5_0" in text


HEADERLESS_NIC_LEGEND = [
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
    "GPU0\t X \tSYS\tPHB\t0-15\t0\t\tN/A",
    "GPU1\tSYS\t X \tSYS\t16-31\t1\t\tN/A",
    "NIC0\tPHB\tSYS\t X ",
    "",
    "NIC Legend:",
    "",
    "  NIC0: mlx5_0",
]


# ---- mounted -------------------------------------------------------------------------


async def test_8_gpus_10_nics_at_160_columns_show_everything() -> None:
    app = PanelApp()
    async with app.run_test(size=(160, 50)) as pilot:
        panel = app.query_one(TopoPanel)
        panel.topo = hgx_view()
        await pilot.pause()
        lines = panel_lines(panel)
        assert lines[0].strip() == "PCIe topology"
        header = lines[1].split()
        assert header == [*GPUS, *NICS]
        gpu0 = line_of(lines, "GPU0").split()
        assert gpu0 == ["GPU0", "X", *["NV18"] * 7, "PIX", "NODE", "NODE", "NODE",
                        "SYS", "SYS", "SYS", "SYS", "NODE", "NODE"]
        assert "NV17" in line_of(lines, "GPU2 ")
        assert "GPU2 " not in "".join(lines[10:]).replace(line_of(lines, "GPU2 ", 1), "")
        assert line_of(lines, "NIC9").split()[-1] == "X"
        legend = "\n".join(lines)
        for word in ("X self", "NV# # bonded NVLinks", "PIX ≤1 PCIe bridge", "PHB via a CPU",
                     "NODE across host bridges", "SYS across sockets", "nearest", "farthest"):
            assert word in legend
        (table_head,) = [line for line in lines if "nearest NIC" in line]
        for col in ("CPU affinity", "NUMA", "path", "PCIe now/max", "bus", "bridge"):
            assert col in table_head
        rows = [line for line in lines if line.strip().startswith("GPU") and "Gen" in line]
        assert len(rows) == 8
        assert rows[0].split()[:6] == ["GPU0", "0-55,112-167", "0", "NIC0", "mlx5_0", "PIX"]
        assert "56-111,168-223" in rows[7] and " 1 " in rows[7]
        assert "Gen5 ▼ x8/16" in rows[3] and "lanes lost" in rows[3]
        assert "▼ switch 0000:46:00.0 x8/16" in rows[3]
        assert "▼ Gen1/5 x16" in rows[4] and "gen down" in rows[4]
        assert "▼" not in rows[0] and "0000:18:00.0" in rows[0]
        assert all(len(line.rstrip()) <= 159 for line in lines)


async def test_cells_are_coloured_by_link_class_from_the_theme() -> None:
    app = PanelApp()
    async with app.run_test(size=(160, 50)) as pilot:
        panel = app.query_one(TopoPanel)
        panel.topo = hgx_view()
        await pilot.pause()
        for theme in ("rigwatch-dark", "rigwatch-colour-safe"):
            app.theme = theme
            await pilot.pause()
            assert colour_of(panel, "GPU0 ", "SYS") == theme_colour(app, "sev-critical")
            assert colour_of(panel, "GPU0 ", "NODE") == theme_colour(app, "sev-warning")
            assert colour_of(panel, "GPU0 ", "NV18") == theme_colour(app, "status-streaming")
            assert colour_of(panel, "GPU0 ", "PIX") == theme_colour(app, "sev-info")
            assert colour_of(panel, "GPU0 ", "X") == theme_colour(app, "text-dim")
            lost = colour_of(panel, "GPU3 ", "lanes lost")
            assert lost == theme_colour(app, "link-degraded")


async def test_80_columns_abbreviate_and_drop_affinity_first() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(TopoPanel)
        panel.topo = hgx_view()
        await pilot.pause()
        lines = panel_lines(panel)
        assert lines[1].split() == [abbreviate(d) for d in (*GPUS, *NICS)]
        g0 = line_of(lines, "G0 ").split()
        assert g0 == ["G0", "X", *["NV"] * 7, "PIX", "NOD", "NOD", "NOD",
                      "SYS", "SYS", "SYS", "SYS", "NOD", "NOD"]
        assert "NV↓" in line_of(lines, "G2 ")
        assert line_of(lines, "N9 ").split()[-1] == "X"
        text = "\n".join(lines)
        assert "18 NVLinks (NV↓ fewer)" in text and "NOD same NUMA" in text
        assert "CPU affinity" not in text and "0-55,112-167" not in text
        (head,) = [line for line in lines if "nearest NIC" in line]
        assert "NUMA" in head and "bus" not in head
        gpu3 = line_of(lines, "GPU3 ")
        assert "▼ x8/16" in gpu3 and "lanes lost" in gpu3
        assert gpu3.rstrip().endswith("…")
        assert panel.size.width <= 80
        assert not any(line.rstrip().endswith("…") for line in lines[:22])


async def test_wide_device_names_fall_back_to_short_headers() -> None:
    """16 GPUs and ten ``mlx5_*`` columns (old DGX-2 output) at 160: G/m headers, full cells."""
    gpus = tuple(f"GPU{i}" for i in range(16))
    nics = tuple(f"mlx5_{i}" for i in range(10))
    links = {g: {d: "X" if d == g else "NV6" if d in gpus else "SYS" for d in gpus + nics}
             for g in gpus[:4]}
    app = PanelApp()
    async with app.run_test(size=(160, 40)) as pilot:
        panel = app.query_one(TopoPanel)
        panel.topo = TopoView(gpus, nics, links, {g: "0-27" for g in gpus[:4]})
        await pilot.pause()
        lines = panel_lines(panel)
        assert lines[1].split()[:2] == ["G0", "G1"] and lines[1].split()[-1] == "m9"
        assert line_of(lines, "G0 ").split()[1:4] == ["X", "NV6", "NV6"]
        assert line_of(lines, "G15").split()[1:] == ["–"] * 26
        assert "0-27" in line_of(lines, "GPU3 ") and "–" in line_of(lines, "GPU15")


async def test_truncated_matrix_and_none_values_render_dashes() -> None:
    lines_in = [
        "        GPU0    GPU1    mlx4_0  CPU Affinity",
        "GPU0     X      PIX     SYS     0-11,24-35",
    ]
    view = TopoView.from_matrix(parse_topo(lines_in), (GpuLink(1, None, None, None, None),))
    app = PanelApp()
    async with app.run_test(size=(120, 30)) as pilot:
        panel = app.query_one(TopoPanel)
        panel.topo = view
        await pilot.pause()
        lines = panel_lines(panel)
        assert line_of(lines, "GPU1 ").split() == ["GPU1", "–", "–", "–"]
        gpu1 = line_of(lines, "GPU1 ", 1)
        assert gpu1.split() == ["GPU1", "–", "–", "–", "–"]
        (head,) = [line for line in lines if "nearest NIC" in line]
        assert "CPU affinity" in head and "NUMA" not in head
        gpu0 = line_of(lines, "GPU0 ", 1)
        assert "mlx4_0" in gpu0 and "SYS" in gpu0 and "0-11,24-35" in gpu0


async def test_empty_states() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(TopoPanel)
        await pilot.pause()
        assert [line.strip() for line in panel_lines(panel)] == [
            "PCIe topology", "no topology reported"]
        panel.topo = TopoView(links_state=(GpuLink(0, 4, 4, 16, 16, "0000:01:00.0"),))
        await pilot.pause()
        text = "\n".join(panel_lines(panel))
        assert "no topo -m matrix" in text
        assert "GPU0" in text and "Gen4 x16" in text
        assert "–" in line_of(panel_lines(panel), "GPU0")


async def test_equal_view_is_not_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = topo_matrix.render_topo

    def counting(view: TopoView | None, width: int) -> object:
        calls.append(width)
        return real(view, width)

    monkeypatch.setattr(topo_matrix, "render_topo", counting)
    app = PanelApp()
    async with app.run_test(size=(160, 50)) as pilot:
        panel = app.query_one(TopoPanel)
        panel.topo = hgx_view()
        await pilot.pause()
        before = len(calls)
        assert before >= 1
        for _ in range(5):
            panel.topo = hgx_view()
            await pilot.pause()
        panel.refresh()
        await pilot.pause()
        assert len(calls) == before


async def test_resizing_the_terminal_relays_the_panel() -> None:
    app = PanelApp()
    async with app.run_test(size=(160, 50)) as pilot:
        panel = app.query_one(TopoPanel)
        panel.topo = hgx_view()
        await pilot.pause()
        assert panel_lines(panel)[1].split()[0] == "GPU0"
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert panel_lines(panel)[1].split()[0] == "G0"
        await pilot.resize_terminal(160, 50)
        await pilot.pause()
        assert panel_lines(panel)[1].split()[0] == "GPU0"
        assert "CPU affinity" in "\n".join(panel_lines(panel))
