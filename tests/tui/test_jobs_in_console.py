"""Jobs in the console (issue #21 item 2): a host's row knows the Slurm jobs on its GPUs,
the filter finds them as ``job:ID``, and ``:job ID`` shows just those hosts."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from probes.analysis.fleet_row import jobs_of
from probes.config.fleet import HostSpec
from probes.fleet_state import FleetState
from probes.wire.events import Connected
from tests.support.tui_fakes import T0, FakeBackend, FrozenClock, hello, sample, wait_until
from tui.app import make_app
from tui.commands import CommandError, parse_command
from tui.console_options import ConsoleOptions
from tui.screens.fleet import FleetScreen
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.views.fleet_view import filter_rows
from widgets.fleet_table import FleetTable
from widgets.job_table import JobTable


def _sample_with_processes(host: str, job: str | None):  # type: ignore[no-untyped-def]
    from probes.wire.samples import GpuProcess
    s = sample(host, 0)
    gpus = tuple(replace(g, processes=(GpuProcess(41000 + g.index, "python", "u", 1.0,
                                                  slurm_job=job),)) for g in s.gpus)
    return replace(s, gpus=gpus)


def test_a_rows_jobs_come_from_its_gpu_processes() -> None:
    assert jobs_of(None) == ()
    assert jobs_of(_sample_with_processes("h", "48211")) == ("48211",)
    assert jobs_of(_sample_with_processes("h", None)) == ()
    s = _sample_with_processes("h", "9")
    mixed = replace(s, gpus=s.gpus[:4] + tuple(
        replace(g, processes=tuple(replace(p, slurm_job="10") for p in g.processes or ()))
        for g in s.gpus[4:]))
    assert jobs_of(mixed) == ("9", "10")


def test_the_filter_finds_a_job_and_only_its_hosts() -> None:
    fleet = FleetState([HostSpec(name=h) for h in ("a", "b")])
    for h, job in (("a", "48211"), ("b", "48212")):
        fleet.apply(h, Connected(T0), T0)
        fleet.apply(h, hello(h), T0)
        fleet.apply(h, _sample_with_processes(h, job), T0)
    rows = fleet.rows(T0)
    assert [r.name for r in filter_rows(rows, "job:48211")] == ["a"]
    assert [r.name for r in filter_rows(rows, "!job:48211")] == ["b"]


def test_the_job_command_takes_digits() -> None:
    assert parse_command(":job 48211").arg == "48211"
    for bad in (":job", ":job abc", ":job 48211;rm"):
        try:
            parse_command(bad)
        except CommandError:
            continue
        raise AssertionError(bad)


async def test_colon_job_shows_the_jobs_hosts() -> None:
    names = ["gpu-j01", "gpu-j02", "gpu-j03"]
    items = []
    for h, job in zip(names, ("48211", "48211", "50000"), strict=True):
        items += [(h, Connected(T0)), (h, hello(h)), (h, _sample_with_processes(h, job))]
    backend = FakeBackend([HostSpec(name=h) for h in names], items)
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock(T0 + 1))
    async with app.run_test(size=(120, 30)) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen)
                         and app.screen.query_one(FleetTable).row_count == 3)
        app.run_command("job 48211")
        # the job view: its GPUs by rank on its two hosts, with the core's verdicts
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen)
                         and app.screen.picture is not None)
        assert app.job_watch.job == "48211"
        table = app.screen.query_one(JobTable)
        await wait_until(pilot, lambda: table.row_count == 16)
        assert [(x.host, x.gpu.index) for x in table.lines][:2] == [("gpu-j01", 0),
                                                                    ("gpu-j01", 1)]
        assert {x.gpu.judged.verdict.value for x in table.lines} == {"ok"}
        assert "Slurm job 48211 · 2 hosts · 16 GPUs" in str(
            app.screen.query_one("#job-summary", Static).render())
        await pilot.press("enter")  # the first row's host
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        assert app.screen.host == "gpu-j01"
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen))
        await pilot.press("escape")
        # underneath, the fleet shows just the job's hosts
        await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen)
                         and app.screen.query_one(FleetTable).row_count == 2)
        shown = [line.row.name for line in app.screen.query_one(FleetTable).hosts]
        assert shown == ["gpu-j01", "gpu-j02"]


def test_the_gpu_tables_job_column_names_each_gpus_work() -> None:
    from probes.wire.samples import GpuProcess
    from tui.views.host_views import gpu_work
    from widgets.gpu_table import GpuTable

    s = _sample_with_processes("h", "48211")
    g0 = replace(s.gpus[0], processes=(GpuProcess(1, "python", "u", 1.0, slurm_job="48211",
                                                  slurm_step="0", rank=8, world_size=16),))
    assert gpu_work(g0) == "job 48211.0 rank 8/16"
    two = replace(g0, processes=(*g0.processes, GpuProcess(
        2, "python", "v", 1.0, container="3f1c2a9d8e7b0000", runtime="docker")))
    assert gpu_work(two) == "job 48211.0 rank 8/16 +1"
    assert gpu_work(replace(g0, processes=())) is None
    names = [c.key for c in GpuTable.COLUMNS]
    assert names.index("job") < names.index("reasons")
    fleet = FleetState([HostSpec(name="h")])
    fleet.apply("h", Connected(T0), T0)
    fleet.apply("h", hello("h"), T0)
    fleet.apply("h", replace(s, gpus=(g0, *s.gpus[1:])), T0)
    from tui.views.host_views import gpu_rows
    rows = gpu_rows(fleet.hosts["h"])
    cells = GpuTable.cells(rows[0])
    assert cells[names.index("job")][0] == "job 48211.0 rank 8/16"


def test_sorting_by_job_groups_a_jobs_hosts() -> None:
    from tui.views.fleet_view import sort_rows

    fleet = FleetState([HostSpec(name=h) for h in ("a", "b", "c", "d")])
    for h, job in (("a", "900"), ("b", None), ("c", "48211"), ("d", "900")):
        fleet.apply(h, Connected(T0), T0)
        fleet.apply(h, hello(h), T0)
        fleet.apply(h, _sample_with_processes(h, job), T0)
    assert [r.name for r in sort_rows(fleet.rows(T0), "job")] == ["a", "d", "c", "b"]


def test_the_job_view_keeps_a_lost_gpu_of_the_jobs_node() -> None:
    from probes.wire.samples import GpuState
    from tui.views.job_view import job_picture

    fleet = FleetState([HostSpec(name="n", expect_gpus=8)])
    s = _sample_with_processes("n", "48206")
    fleet.apply("n", Connected(T0), T0)
    fleet.apply("n", hello("n"), T0)
    fleet.apply("n", s, T0)
    lost = replace(s.gpus[6], state=GpuState.LOST, processes=None)
    fleet.apply("n", replace(s, ts=T0 + 1, seq=1, gpus=(*s.gpus[:6], lost, s.gpus[7])), T0 + 1)
    p = job_picture(fleet, "48206")
    assert [(x.host, x.gpu.index) for x in p.lines if x.gpu.judged.gone] == [("n", 6)]
    assert len(p.lines) == 8
