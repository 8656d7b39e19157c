"""Hostile hosts (issue 18): every byte from a host is data, on every screen.

A fake fleet whose agent writes markup (``[@click=app.quit]``, ``[/]``, ``[link=…]``),
terminal escapes (OSC 0 title, OSC 52 clipboard, CSI 2J, C1 CSI), a bidi override and a
zero-width space into every free-text field, kernel lines that make OOM-killer and Xid
findings, a job log whose traceback frame is ``in [/]`` (a cuda-oom finding, so a toast),
and absurd numbers (10**400, NaN, Infinity, negative counts).  Every line goes through the
console's own decoder, as from a real session.  Each screen (fleet, wall, host with each
panel, triage and each step, preflight, help) is drawn at 80×24 and 160×48; the test then
checks that nothing raised, that the app still runs (no action ran, also after clicking
every toast) and that the terminal output carries no escape but Textual's own.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from probes.agent import AGENT_VERSION, PROTOCOL_VERSION, Simulator, parse_scenarios
from probes.config.fleet import HostSpec
from probes.wire.events import Connected, SessionItem
from probes.wire.fastfill import MAX_AMOUNT
from probes.wire.protocol import decode_line
from probes.wire.samples import DiskStats, HostSample, job_source
from tests.support.tui_fakes import (
    T0,
    FakeBackend,
    FrozenClock,
    fleet_items,
    fleet_specs,
    wait_until,
)
from tui.app import RigwatchApp, make_app
from tui.console_options import ConsoleOptions
from tui.screens.host import HostScreen
from tui.screens.triage import TriageScreen
from widgets.header_bar import StatusLine

HOSTILE = ("[@click=app.quit]x[/] [/] [link=https://e.example]l[/link] \x1b]0;TITLE\x07"
           "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x9b2J \u202e\u200b")
FREE_TEXT = {"hostname", "kernel", "os", "python", "driver_version", "cuda_version", "cpu_model",
             "name", "model", "user", "pstate", "serial", "vbios", "nvcc", "nccl", "torch",
             "rate", "state_text", "reason"}
HOSTS = ("evil-01", "good-02")
STEP_S = 60.0
MINUTES = 20
JOB = job_source("/home/alice/train.log")
TEXTUAL_CSI = re.compile(r"\x1b\[[0-9;:?<>=]*[ -/]*[@-~]")
"""What Textual itself writes: CSI sequences (SGR colours, cursor moves, modes)."""
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b]")


def _poison(value: Any, key: str = "") -> Any:
    """Every free-text string with the hostile text appended, keys of ``disks`` too."""
    if isinstance(value, dict):
        out = {k: _poison(v, k) for k, v in value.items()}
        if key == "disks":
            out = {k + HOSTILE: v for k, v in out.items()}
        return out
    if isinstance(value, list):
        items = [_poison(v, key) for v in value]
        return [*items, HOSTILE] if key == "clock_reasons" else items
    if isinstance(value, str) and key in FREE_TEXT:
        return value + HOSTILE
    return value


def _events(t: float) -> list[tuple[str, str]]:
    """Kernel and job-log lines that make findings out of hostile text."""
    return [
        ("kernel", f"Out of memory: Killed process 4242 ({HOSTILE}) total-vm:1000kB, "
                   "anon-rss:900kB, file-rss:0kB"),
        ("kernel", f"{HOSTILE.replace(' ', '')} invoked oom-killer: gfp_mask=0x100cca"),
        ("kernel", f"NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus. {HOSTILE}"),
        (JOB, "Traceback (most recent call last):"),
        (JOB, '  File "/home/alice/train.py", line 42, in [/]'),
        (JOB, '  File "/home/alice/[link=x]m.py", line 7, in [@click=app.quit]ZZZZ[/]'),
        (JOB, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. "
              f"GPU 0 has a total capacity of 79.11 GiB {HOSTILE}"),
        (JOB, f"step 100 loss 2.3 {HOSTILE}"),
        (HOSTILE, HOSTILE),
    ]


def _wire_items(host: str, seed: int, hostile: bool) -> list[SessionItem]:
    """A simulated host's stream as wire lines, poisoned, through the console's decoder."""
    sim = Simulator(parse_scenarios("leak:3,throttle:5"), seed, host)
    facts, gpus = sim.facts()
    hello: dict[str, Any] = {"type": "hello", "v": PROTOCOL_VERSION, "agent": AGENT_VERSION,
                             "ts": T0, "host": facts, "gpus": gpus,
                             "probes": {"simulator": {"available": True}}, "simulated": ["x"]}
    hello.update(sim.topology())
    lines: list[str] = []
    if hostile:
        hello = _poison(hello)
        hello["host"]["mem_total_bytes"] = 10**400
        hello["host"]["cpu_cores_logical"] = -8
        hello["agent"] = HOSTILE
    lines.append(json.dumps(hello))
    for seq in range(MINUTES + 1):
        t = seq * STEP_S
        g, h, disks = sim.sample(t)
        msg: dict[str, Any] = {"type": "sample", "v": PROTOCOL_VERSION, "seq": seq,
                               "ts": T0 + t, "gpus": g, "host": h, "disks": disks}
        if hostile:
            msg = _poison(msg)
            for gpu in msg["gpus"]:
                gpu["processes"] = [{"pid": 7, "name": HOSTILE, "user": HOSTILE,
                                     "used_mib": 1e308}]
            msg["gpus"][0].update(temp_c=float("nan"), power_w=float("inf"), util_pct=-5.0,
                                  ecc_corrected_volatile=-1, mem_used_mib=1e308)
            msg["host"]["mem_used_bytes"] = 10**400
            if seq == MINUTES - 2:
                lines += [json.dumps({"type": "event", "v": PROTOCOL_VERSION,
                                      "ts": T0 + t, "source": src, "line": line})
                          for src, line in _events(t)]
                lines.append(json.dumps({"type": "error", "ts": T0 + t, "probe": HOSTILE,
                                         "message": HOSTILE}))
                lines.append("[" * 100_000)
        lines.append(json.dumps(msg))
    items: list[SessionItem] = [Connected(T0)]
    for line in lines:
        try:
            items.append(decode_line(line))
        except Exception:  # a garbled line is skipped, as MessageReader does
            continue
    return items


def _hostile_fleet() -> tuple[FakeBackend, FrozenClock]:
    items = [(h, item) for i, h in enumerate(HOSTS)
             for item in _wire_items(h, i + 1, hostile=h.startswith("evil"))]
    specs = [HostSpec(name=h, tags=("rack-x",), expect_gpus=8) for h in HOSTS]
    return FakeBackend(specs, items), FrozenClock(T0 + MINUTES * STEP_S + 1.0)


def _screen_output(app: RigwatchApp) -> str:
    """What the terminal would receive to draw the whole screen now (toasts included)."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


def _assert_clean(app: RigwatchApp, where: str) -> None:
    assert app.is_running and app.return_code is None, f"{where}: the app stopped"
    out = _screen_output(app)
    foreign = TEXTUAL_CSI.sub("", out)
    assert "\x1b" not in foreign, f"{where}: an escape sequence not Textual's own: " + repr(
        foreign[max(0, foreign.index("\x1b") - 40):foreign.index("\x1b") + 40])
    text = "".join(seg.text for strip in app.screen._compositor.render_strips()
                   for seg in strip)
    bad = FORBIDDEN.search(text)
    assert bad is None, f"{where}: {bad.group()!r} reached the screen"


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_a_hostile_fleet_on_every_screen(size: tuple[int, int]) -> None:
    backend, clock = _hostile_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    ran: list[str] = []
    original_run_action = app.run_action

    async def spy(action: Any, *args: Any, **kwargs: Any) -> Any:
        ran.append(str(action))
        return await original_run_action(action, *args, **kwargs)

    app.run_action = spy  # type: ignore[method-assign]
    async with app.run_test(size=size, notifications=True) as pilot:
        await backend.started.wait()
        await wait_until(pilot, lambda: all(
            h.last is not None and h.last.seq == MINUTES for h in app.fleet.hosts.values()))
        app.refresh_view()
        await pilot.pause(0.3)
        evil = app.fleet.hosts["evil-01"]
        codes = {f.code for f in evil.findings()}
        assert {"oom-killer", "xid", "cuda-oom"} <= codes, codes
        _assert_clean(app, "fleet")
        await wait_until(pilot, lambda: app.notice is not None)  # the alerts' notice
        await pilot.pause(0.2)
        _assert_clean(app, "fleet with the alerts' notice")
        (line,) = app.screen.query(StatusLine)
        notice = str(line.render())
        assert "evil-01" in notice and "t for triage" in notice, notice
        await pilot.click(line)  # a click on the notice runs nothing
        await pilot.pause(0.05)
        assert not [a for a in ran if "quit" in a or "click" in a], ran
        _assert_clean(app, "fleet after clicking every toast")
        for keys, where in ((("w",), "wall"), (("m", "m", "m"), "wall metrics"),
                            (("w", "s", "s"), "table sorted")):
            await pilot.press(*keys)
            await pilot.pause(0.1)
            _assert_clean(app, where)
        await pilot.press("home", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HostScreen))
        for key in ("1", "2", "3", "4", "5", "6", "1", "2", "3", "4", "5", "6", "tab", "end"):
            await pilot.press(key)
            await pilot.pause(0.05)
            _assert_clean(app, f"host screen after {key}")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        for key in ("1", "2", "3", "4", "g", "down", "up"):
            await pilot.press(key)
            await pilot.pause(0.05)
            _assert_clean(app, f"host triage after {key}")
        await pilot.press("escape", "escape")
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen))
        for key in ("1", "2", "3", "4"):
            await pilot.press(key)
            await pilot.pause(0.05)
            _assert_clean(app, f"fleet triage step {key}")
        await pilot.press("escape", "p")
        await pilot.pause(0.3)
        _assert_clean(app, "preflight")
        await pilot.press("escape", "question_mark")
        await pilot.pause(0.1)
        _assert_clean(app, "help")
        await pilot.press("escape")
        await pilot.pause(0.1)
        _assert_clean(app, "back on the fleet")
        assert app.is_running
    assert not [a for a in ran if "quit" in a], ran


def test_the_hostile_host_keeps_its_evidence_readable() -> None:
    """Sanitised, not erased: the operator can still read what the host tried."""
    items = _wire_items("evil-01", 1, hostile=True)
    lines = [i.line for i in items if type(i).__name__ == "LogEvent"]  # type: ignore[attr-defined]
    assert any("\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in ln and "<U+202E>" in ln for ln in lines)
    assert any(ln.endswith("in [/]") for ln in lines)  # markup is text, kept as written


def test_every_notification_in_the_console_is_plain_text() -> None:
    """``notify`` parses markup unless told not to; every call in tui/ must say so."""
    missing = []
    for path in Path("tui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "notify"):
                kw = {k.arg: k.value for k in node.keywords}
                value = kw.get("markup")
                if not (isinstance(value, ast.Constant) and value.value is False):
                    missing.append(f"{path}:{node.lineno}")
    assert missing == []


def _extreme_items(value: float) -> list[tuple[str, SessionItem]]:
    """The fake fleet with every number of one host's samples set to ``value``.

    Floats get ``value``; ints get the largest the decoder lets through (2**53), since a
    float cannot be an int and the decoder drops larger ones.
    """
    def fill(obj: Any) -> Any:
        return dataclasses.replace(obj, **{
            f.name: value if f.type == "float | None" else int(MAX_AMOUNT)
            for f in dataclasses.fields(obj) if f.type in ("float | None", "int | None")})

    out: list[tuple[str, SessionItem]] = []
    for host, item in fleet_items():
        if isinstance(item, HostSample) and host == "gpu-t02":
            disk = fill(DiskStats("nvme0n1"))
            item = dataclasses.replace(item, gpus=tuple(fill(g) for g in item.gpus),
                                       host=fill(item.host), disks=(disk,))
        out.append((host, item))
    return out


@pytest.mark.parametrize("value", [math.inf, math.nan, -1e308, 5e-324,
                                   float(2**53)], ids=repr)
async def test_no_widget_raises_on_any_float(value: float) -> None:
    """Past the decoder (a recording made before it, a bug upstream): still no exception."""
    backend = FakeBackend(fleet_specs(), _extreme_items(value))
    app = make_app(backend, ConsoleOptions(demo=True), clock=FrozenClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await backend.started.wait()
        await pilot.pause(0.3)
        app.refresh_view()
        for keys in (("w",), ("m",), ("m",), ("m",), ("w",), ("down", "enter"),
                     tuple("123456"), tuple("123456"), ("t",), ("escape", "escape", "p")):
            await pilot.press(*keys)
            await pilot.pause(0.05)
        assert app.is_running


async def test_markup_typed_into_the_fleet_filter_is_text() -> None:
    """The filter shows in the table's border title, which Textual parses as markup."""
    backend, clock = _hostile_fleet()
    app = make_app(backend, ConsoleOptions(demo=True), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await backend.started.wait()
        await pilot.pause(0.2)
        await pilot.press("slash")
        await pilot.press(*"[/]")
        await pilot.press("enter")
        await pilot.pause(0.2)
        app.refresh_view()
        await pilot.pause(0.1)
        assert app.is_running
        _assert_clean(app, "filter [/]")


def test_a_recording_made_before_sanitising_replays_clean() -> None:
    """Rows written before this fix still carry raw escapes; replay cleans them on read."""
    from probes.store.recording_format import Body, build_zdict
    from probes.wire.samples import LogEvent

    body = Body(build_zdict()[1])
    raw = LogEvent(T0, "kernel" + HOSTILE, "NVRM: Xid 79 " + HOSTILE)  # as an old console kept it
    _, packed = body.pack(raw)
    back = body.unpack(packed)
    assert isinstance(back, LogEvent)
    for text in (back.source, back.line):
        assert not FORBIDDEN.search(text) and "\x1b" not in text
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in back.line
