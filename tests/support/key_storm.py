"""A randomized key storm for the console: what an operator's fingers and a slow SSH link do.

The plan is drawn from a seed: keys from every screen's bindings (read from the classes
themselves, so a key added anywhere is stormed too), ``:`` commands typed a character at a
time (``:host X``, ``:job N``, ``:filter …``, ``:theme …``, ``:sort …``, ``:window …``),
the palette, theme switches and terminal resizes.  Keys are sent in bursts without
yielding between them, as they arrive when a link stalls and then delivers what was typed,
and the bursts are separated by short, random gaps, so deferred work (timers, redraws after
refresh, screen pops) lands in every order against the next keys.

Shared by the suite's storm test and ``tests/bench/bench_key_storm.py``.  ``q`` and
``:quit`` are left out: leaving is not a crash and would end the storm.
"""

from __future__ import annotations

import asyncio
import random
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from textual import events
from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key
from textual.pilot import Pilot

from tui.app import HELP_SCREENS, RigwatchApp
from tui.commands import WINDOWS
from tui.screens.help import HelpScreen, own_bindings
from tui.screens.note import NoteScreen
from tui.typeahead import keys_in_flight
from tui.views.fleet_view import SORT_KEYS

NAVIGATION = ("up", "down", "pageup", "pagedown", "home", "end", "enter", "escape", "tab",
              "left", "right")
"""Keys every widget handles that no rigwatch binding declares."""
MOVES = ("t", "p", "w", "enter", "escape", "escape", "question_mark", "n")
"""Keys that open or leave a screen, drawn more often: a storm that stays on one screen
tests little."""
LEFT_OUT = frozenset({"q", "ctrl+q", "ctrl+c"})
"""Leaving the console ends the storm; it is not what is under test."""
SIZES = ((80, 24), (120, 40), (100, 30), (200, 50), (60, 20), (160, 45))
THEMES = ("dark", "light", "high-contrast", "colour-safe")
FILTERS = ("rack-a", "rack-b", "!healthy", "critical", "down", "gpu-b0", "job:48206",
           "leak !rack-b", "nothing-matches-this", "")
WATCH_S = 0.02
"""How often the storm notes which screen is showing."""
DRAIN_S = 60.0
"""The longest the storm waits, after its last key, for keys typed ahead to land."""
PALETTE_QUERIES = ("theme", "host gpu-a0", "sort", "window", "triage", "wall", "job")


def binding_keys(classes: Iterable[type[DOMNode]]) -> list[str]:
    """Every key the classes bind themselves, each once, ``LEFT_OUT`` aside."""
    keys: dict[str, None] = {}
    for cls in classes:
        for binding in own_bindings(cls):
            for key in binding.key.split(","):
                if key.strip() and key.strip() not in LEFT_OUT:
                    keys[key.strip()] = None
    return list(keys)


def all_keys() -> list[str]:
    """The app's keys, every screen's (the help's list of screens), the modals' and the
    navigation keys."""
    classes: list[type[DOMNode]] = [RigwatchApp, *(cls for _, cls in HELP_SCREENS),
                                    HelpScreen, NoteScreen]
    return list(dict.fromkeys([*binding_keys(classes), *NAVIGATION]))


def typed(text: str) -> list[str]:
    """``text`` as the key names a terminal would send, one per character."""
    return [_character_to_key(c) if len(c) == 1 and not c.isalnum() else c for c in text]


@dataclass(frozen=True)
class Burst:
    """Keys that arrive together, then a pause."""

    keys: tuple[str, ...]
    gap_s: float


@dataclass(frozen=True)
class Resize:
    """The terminal changes size (a window dragged, a tmux pane split)."""

    width: int
    height: int


Step = Burst | Resize


@dataclass(frozen=True)
class StormPlan:
    """The steps of one storm and how many keys they send."""

    seed: int
    steps: tuple[Step, ...]
    keys: int


def _command(rng: random.Random, hosts: Sequence[str], jobs: Sequence[str]) -> str:
    """One ``:`` command line, sometimes mistyped or naming nothing."""
    kind = rng.choice(("host", "host", "host", "job", "triage", "filter", "theme", "sort",
                       "window", "wall", "preflight", "help", "typo"))
    if kind == "host":
        name = rng.choice(hosts)
        return f"host {rng.choice((name, name[:-1], name, 'no-such-host'))}"
    if kind == "job":
        return f"job {rng.choice([*jobs, '1', '999999'])}"
    if kind == "filter":
        return f"filter {rng.choice(FILTERS)}".rstrip()
    if kind == "theme":
        return f"theme {rng.choice(THEMES)}"
    if kind == "sort":
        return f"sort {rng.choice(SORT_KEYS)}"
    if kind == "window":
        return f"window {rng.choice(list(WINDOWS))}"
    if kind == "typo":
        return rng.choice(("hots gpu-a01", "", "tri", "job abc", "window 7h", "sort nope"))
    return kind


def _gap(rng: random.Random) -> float:
    """Mostly typing speed, sometimes a stalled link's burst, sometimes a reader's pause."""
    roll = rng.random()
    if roll < 0.45:
        return 0.0
    if roll < 0.9:
        return rng.uniform(0.01, 0.12)
    return rng.uniform(0.2, 0.6)


def plan_storm(seed: int, keys: int, hosts: Sequence[str],
               jobs: Sequence[str] = ()) -> StormPlan:
    """Draw about ``keys`` key presses' worth of steps from ``seed``."""
    rng = random.Random(seed)
    pool = all_keys()
    steps: list[Step] = []
    sent = 0
    while sent < keys:
        roll = rng.random()
        if roll < 0.22:
            burst = ["colon", *typed(_command(rng, hosts, jobs)), "enter"]
            if rng.random() < 0.15:  # a double Enter, or Esc right after: fingers do that
                burst.append(rng.choice(("enter", "escape")))
        elif roll < 0.25:
            burst = ["T"]
        elif roll < 0.27:
            steps.append(Resize(*rng.choice(SIZES)))
            continue
        elif roll < 0.29:
            burst = ["ctrl+p", *typed(rng.choice(PALETTE_QUERIES)),
                     rng.choice(("escape", "down", "enter")), "escape"]
        elif roll < 0.31:
            burst = ["slash", *typed(rng.choice(FILTERS)), rng.choice(("enter", "escape"))]
        else:
            burst = [rng.choice(MOVES) if rng.random() < 0.3 else rng.choice(pool)
                     for _ in range(rng.randint(1, 6))]
        steps.append(Burst(tuple(burst), _gap(rng)))
        sent += len(burst)
    return StormPlan(seed, tuple(steps), sent)


def _key_event(key: str) -> events.Key:
    """The event a terminal's key press becomes (as ``Pilot.press`` builds it)."""
    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    char: str | None
    try:
        char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    return events.Key(key, char)


@dataclass
class StormResult:
    """What a storm did: keys sent, steps, seconds, screens seen, and where it fell over."""

    keys: int = 0
    steps: int = 0
    seconds: float = 0.0
    screens: dict[str, int] = field(default_factory=dict)
    stopped_at: int | None = None
    """The step after which the app was no longer running (None: it ran to the end)."""


async def play(pilot: Pilot[None], plan: StormPlan) -> StormResult:
    """Send the plan's steps to the running app; stop at the first step after which it is
    no longer running (it fell over: the caller re-raises its exception).

    ``screens`` counts what was on screen every ``WATCH_S`` while the storm ran.
    """
    app = pilot.app
    result = StormResult()
    started = time.monotonic()
    driver = app._driver
    assert driver is not None
    watcher = asyncio.create_task(_watch_screens(pilot, result.screens))
    try:
        for i, step in enumerate(plan.steps):
            if not app.is_running or app._exception is not None:
                result.stopped_at = i
                break
            if isinstance(step, Resize):
                await pilot.resize_terminal(step.width, step.height)
            else:
                for key in step.keys:  # together: nothing runs between them
                    event = _key_event(key)
                    event.set_sender(app)
                    driver.send_message(event)
                result.keys += len(step.keys)
                await asyncio.sleep(step.gap_s)
            result.steps += 1
        # let what was sent land before the caller leaves: keys still queued when the
        # app exits would meet an empty screen stack (the harness's doing, not the app's)
        deadline = time.monotonic() + DRAIN_S
        while app.is_running and time.monotonic() < deadline:
            await pilot.pause(0.2)
            if not keys_in_flight(app):
                break
        await pilot.pause(0.2)
    finally:
        watcher.cancel()
    result.seconds = time.monotonic() - started
    return result


async def _watch_screens(pilot: Pilot[None], seen: dict[str, int]) -> None:
    app = pilot.app
    while True:
        if app.screen_stack:
            name = type(app.screen).__name__
            seen[name] = seen.get(name, 0) + 1
        await asyncio.sleep(WATCH_S)


def is_storm_key(binding: Binding) -> bool:
    """Whether the storm sends this binding's keys (tests check the pool is complete)."""
    return any(k.strip() not in LEFT_OUT for k in binding.key.split(","))
