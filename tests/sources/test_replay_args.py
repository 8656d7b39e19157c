"""The registry's recording entry asks the arguments before importing the replay module
(#38 item 5): it answers exactly as ``probes.sources.replay.from_args`` does — None, the
same error, or a source for the same file — for every command line tried.  Negative
control: a guard that looks at ``--recording`` alone is told apart (``rigwatch replay``)."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.errors import ConfigError
from probes.sources import replay, replay_args
from probes.sources.registry import SOURCES
from probes.sources.source import Source
from tui.cli import build_parser
from tui.settings import Settings

Answer = Callable[[argparse.Namespace, Settings], "Source | None"]


def _outcome(answer: Answer, args: argparse.Namespace) -> tuple[str, str]:
    try:
        got = answer(args, Settings())
    except ConfigError as exc:
        return "error", exc.msg
    except Exception as exc:  # what a hand-made namespace may raise: the same, or not
        return "raised", f"{type(exc).__name__}: {exc}"
    return ("none", "") if got is None else ("source", got.name)


def _command_lines(tmp: Path) -> list[list[str]]:
    garbage = tmp / "garbage.sqlite3"
    garbage.write_bytes(b"not a recording")
    names = ["nosuch", str(garbage), str(tmp / "missing.sqlite3")]
    lines: list[list[str]] = [[], ["--demo"], ["--no-record"], ["snapshot"], ["preflight"],
                              ["replay"]]
    for name in names:
        lines += [["replay", name], ["replay", name, "--speed", "2"],
                  ["snapshot", "--recording", name], ["preflight", "--recording", name],
                  ["snapshot", "--recording", name, "--demo"]]
    return [[*line, "--record-dir", str(tmp)] for line in lines]


def _namespaces(tmp: Path) -> list[argparse.Namespace]:
    parser = build_parser()
    out = []
    for line in _command_lines(tmp):
        try:
            out.append(parser.parse_args(line))
        except SystemExit:
            continue
    # by hand too: what another command (or a test) may hand the registry
    for command, file, recording in itertools.product(
            (None, "replay", "snapshot", "console"), (None, "nosuch"), (None, "nosuch", "")):
        ns = argparse.Namespace(record_dir=str(tmp))
        for key, value in (("command", command), ("file", file), ("recording", recording)):
            if value is not None:
                setattr(ns, key, value)
        out.append(ns)
    return out


def test_the_entry_is_the_light_one() -> None:
    assert ("recording", "probes.sources.replay_args") in SOURCES


def test_it_answers_as_the_replay_module_does(tmp_path: Path) -> None:
    spaces = _namespaces(tmp_path)
    assert len(spaces) > 30
    kinds = set()
    for args in spaces:
        want = _outcome(replay.from_args, args)
        assert _outcome(replay_args.from_args, args) == want, vars(args)
        kinds.add(want[0])
    assert {"none", "error"} <= kinds  # both answers met (a source: the next test)


def test_a_named_recording_is_the_same_source(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    def fake(args: argparse.Namespace, settings: Settings) -> Source | None:
        name = args.file if getattr(args, "command", None) == "replay" else getattr(
            args, "recording", None)
        made.append(str(name))
        return None if name is None else replay_from(args, settings)

    replay_from = replay.from_args
    monkeypatch.setattr(replay, "from_args", fake)
    args = build_parser().parse_args(["replay", "x", "--record-dir", str(tmp_path)])
    assert _outcome(replay_args.from_args, args) == _outcome(replay_from, args)
    assert made == ["x"]  # reached through the replay module, not answered by the guard


def test_negative_control_a_guard_on_recording_alone(tmp_path: Path) -> None:
    def recording_only(args: argparse.Namespace, settings: Settings) -> Source | None:
        if getattr(args, "recording", None) is None:
            return None
        return replay.from_args(args, settings)

    differs = [args for args in _namespaces(tmp_path)
               if _outcome(recording_only, args) != _outcome(replay.from_args, args)]
    assert differs
