"""Host-panel render cost: thermal, iostat and topology, against plain text of the same size.

Prints one JSON object and one summary line.  Each panel is fed the view its widget test
draws (8 GPUs; the iostat panel also 4 disks of 600 points, the topology 10 NICs):

* thermal: the panel mounted in an app at 160x48, a new view set and drawn each step
  (``pilot.pause``, so the event loop and compositor are included);
* iostat and topology: the pure render functions (``render_iostat`` at 158 columns,
  ``render_topo`` at 158 and 78), which the widgets call when the view or width changes.

The baseline, in the same run, draws the same characters without the panel's work: for the
thermal panel a ``Static`` in the same app showing the panel's text, changed each step; for
the render functions one ``Content`` built from the same lines in one style.  Ratios are the
panel's time over its baseline's.

    python tests/bench/bench_widgets.py [--quick]

``--quick``: a few repetitions of each (a few seconds in all).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import Static

from tests.support.screens import screen_lines
from tests.support.widget_app import ThemedApp
from tests.widgets.test_widget_iostat_panel import saw
from tests.widgets.test_widget_thermal_panel import ThermalApp, rack
from tests.widgets.test_widget_topo_matrix import hgx_view
from widgets.iostat_panel import DiskRow, IostatView, render_iostat
from widgets.thermal_panel import ThermalPanel
from widgets.topo_matrix import render_topo

SIZE = (160, 48)


class TextApp(ThemedApp):
    """The baseline's app: one ``Static`` where the panel would be."""

    def compose(self) -> ComposeResult:
        yield Static(id="text")


def iostat_view() -> IostatView:
    """8 GPUs and 4 disks, 600 points each (ten minutes at 1 Hz)."""
    points = saw(100.0, 0.0, 20, 600)
    return IostatView(tuple(DiskRow(f"nvme{i}n1", *(1.0,) * 8, util_points=points)
                            for i in range(4)),
                      tuple((i, points) for i in range(8)), "10 min")


def plain(content: Content) -> Callable[[], Content]:
    """A baseline: the same lines rebuilt as one-style ``Content``."""
    lines = content.plain.split("\n")

    def build() -> Content:
        return Content("\n").join([Content.styled(line, "$text") for line in lines])
    return build


def per_call_ms(fn: Callable[[], object], n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1000


async def thermal_ms(steps: int) -> tuple[float, list[str]]:
    """Per view set and drawn, and the panel's text (for the baseline)."""
    app = ThermalApp()
    async with app.run_test(size=SIZE) as pilot:
        panel = app.query_one(ThermalPanel)
        panel.view = rack()
        await pilot.pause()
        start = time.perf_counter()
        for k in range(steps):
            panel.view = rack(throttled=(k % 8,))
            await pilot.pause()
        ms = (time.perf_counter() - start) / steps * 1000
        return ms, screen_lines(app)


async def text_ms(lines: list[str], steps: int) -> float:
    """Per change of a ``Static`` showing ``lines`` (alternately shifted, so each redraws)."""
    texts = ["\n".join(lines), "\n".join(line[1:] + line[:1] for line in lines)]
    app = TextApp()
    async with app.run_test(size=SIZE) as pilot:
        static = app.query_one("#text", Static)
        static.update(texts[1])
        await pilot.pause()
        start = time.perf_counter()
        for k in range(steps):
            static.update(texts[k % 2])
            await pilot.pause()
        return (time.perf_counter() - start) / steps * 1000


def entry(ms: float, base_ms: float) -> dict[str, float]:
    return {"ms": round(ms, 3), "baseline_ms": round(base_ms, 3),
            "over_baseline": round(ms / max(base_ms, 1e-6), 1)}


async def main_async(quick: bool) -> dict[str, Any]:
    steps = 10 if quick else 100
    reps = 10 if quick else 200
    out: dict[str, Any] = {}
    ms, lines = await thermal_ms(steps)
    out["thermal_8_gpus_160x48"] = entry(ms, await text_ms(lines, steps))
    view = iostat_view()
    out["iostat_8_gpus_4_disks_600_points"] = entry(
        per_call_ms(lambda: render_iostat(view, 158), reps),
        per_call_ms(plain(render_iostat(view, 158)), reps))
    topo = hgx_view()
    for width in (158, 78):
        out[f"topo_8_gpus_10_nics_{width}_cols"] = entry(
            per_call_ms(functools.partial(render_topo, topo, width), reps),
            per_call_ms(plain(render_topo(topo, width)), reps))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="a few repetitions of each")
    args = p.parse_args()
    results = asyncio.run(main_async(args.quick))
    print(json.dumps({"bench": "widgets", "quick": args.quick,
                      "python": platform.python_version(), "machine": platform.machine(),
                      "results": results}))
    print("widgets: " + "; ".join(f"{name} {r['ms']:.2f} ms ({r['over_baseline']}x plain text)"
                                  for name, r in results.items()))


if __name__ == "__main__":
    main()
