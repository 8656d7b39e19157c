"""The processes panel: one row per (process, GPU), biggest memory first, dashes for unknowns."""

from __future__ import annotations

import time
from dataclasses import replace

from textual.app import ComposeResult

from tests.support.widget_app import ThemedApp
from widgets.process_table import (
    COMMAND_WIDTH,
    EMPTY,
    ProcessPanel,
    ProcessRow,
    ProcessTable,
    sort_key,
)


class PanelApp(ThemedApp):
    """The panel alone, styled as the console styles it."""

    def compose(self) -> ComposeResult:
        yield ProcessPanel(id="processes")


LONG = "python -m torch.distributed.run --nproc_per_node=8 train.py --config big.yaml"
PROCS = (
    ProcessRow(4242, "alice", "python train.py", 0, 40_960.0),
    ProcessRow(4243, "alice", "python train.py", 1, 81_200.0),
    ProcessRow(5001, "bob", LONG, 1, 1_024.0),
    ProcessRow(None, None, None, 2, None),
    ProcessRow(4242, "alice", "python train.py", 3, 512.0),
)


def cells(table: ProcessTable) -> list[list[str]]:
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def test_sort_key_puts_unknown_memory_last() -> None:
    ordered = sorted(PROCS, key=sort_key)
    assert [p.used_mib for p in ordered] == [81_200.0, 40_960.0, 1_024.0, 512.0, None]


def test_cells_format_and_dash_unknowns() -> None:
    assert ProcessTable.cells(PROCS[1]) == (
        ("4243", None), ("alice", None), ("python train.py", None), ("1", None),
        ("81,200", None), ("–", "cell--muted"))
    unknown = ProcessTable.cells(PROCS[3])
    assert [text for text, _ in unknown] == ["–", "–", "–", "2", "–", "–"]
    assert all(cls == "cell--muted" for text, cls in unknown if text == "–")
    command, _ = ProcessTable.cells(PROCS[2])[2]
    assert len(command) == COMMAND_WIDTH and command.endswith("…")


async def test_rows_sorted_by_memory_at_160_and_80_columns() -> None:
    for size in ((160, 30), (80, 24)):
        app = PanelApp()
        async with app.run_test(size=size) as pilot:
            panel = app.query_one(ProcessPanel)
            panel.processes = PROCS
            await pilot.pause()
            table = panel.query_one(ProcessTable)
            rows = cells(table)
            assert [r[0] for r in rows] == ["4243", "4242", "5001", "4242", "–"]
            wide = size[0] >= ProcessTable.NARROW_BELOW
            work = ["–"] if wide else []  # the job column goes below 110 columns
            assert rows[0] == ["4243", "alice", "python train.py", "1", "81,200", *work]
            assert rows[3][3:] == ["3", "512", *work], "a process on two GPUs: a row on each"
            assert [str(c.label) for c in table.columns.values()] == [
                "PID", "User", "Command", "GPU", "Mem MiB", *(["Job / container"] if wide
                                                              else [])]
            assert not panel.query_one(".process-empty").display
            text = "\n".join(s.text for s in table.render_lines(table.region.reset_offset))
            assert "81,200" in text and "Mem MiB" in text, f"visible at {size}"


async def test_update_in_place_and_empty_state() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(ProcessPanel)
        await pilot.pause()
        empty = panel.query_one(".process-empty")
        assert empty.display and str(empty.render()) == EMPTY
        assert panel.query_one(ProcessTable).row_count == 0
        panel.processes = PROCS
        await pilot.pause()
        table = panel.query_one(ProcessTable)
        assert table.row_count == 5 and not empty.display
        grown = (*PROCS[:1], ProcessRow(4243, "alice", "python train.py", 1, 90_000.0),
                 *PROCS[2:])
        panel.processes = grown
        await pilot.pause()
        assert cells(table)[0][4] == "90,000"
        panel.processes = (*PROCS[:2], ProcessRow(None, "root", "Xorg", 0, 4.0),
                           ProcessRow(None, "root", "Xorg", 0, 4.0))
        await pilot.pause()
        assert table.row_count == 4, "duplicate keys are made unique, not dropped"
        panel.processes = ()
        await pilot.pause()
        assert table.row_count == 0 and empty.display


async def test_many_processes_render_time() -> None:
    many = tuple(ProcessRow(1000 + i, "u", f"worker {i}", i % 8, float(i)) for i in range(400))
    app = PanelApp()
    async with app.run_test(size=(160, 40)) as pilot:
        panel = app.query_one(ProcessPanel)
        start = time.perf_counter()
        panel.processes = many
        await pilot.pause()
        print(f"process table, 400 rows first fill: {(time.perf_counter() - start) * 1000:.1f} ms")
        assert cells(panel.query_one(ProcessTable))[0][0] == "1399"


def test_the_work_column_names_the_job_and_rank_else_the_container_or_pod() -> None:
    from probes.wire.samples import GpuProcess
    from tui.views.host_views import work_label

    base = GpuProcess(41000, "python", "train", 100.0)
    assert work_label(base) is None
    assert work_label(replace(base, slurm_job="48211", slurm_step="0", rank=3,
                              world_size=16)) == "job 48211.0 rank 3/16"
    assert work_label(replace(base, slurm_job="48211")) == "job 48211"
    assert work_label(replace(base, container="3f1c2a9d8e7b", runtime="docker",
                              rank=2)) == "docker 3f1c2a9d8e7b rank 2"
    assert work_label(replace(base, container="9b2e4f6a8c0d", runtime="containerd",
                              pod="0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d")) == "pod 0a1b2c3d"
    assert work_label(replace(base, rank=0)) == "rank 0"
