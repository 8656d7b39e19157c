"""``make_app`` takes everything a console starts with (issue #37 item 5, review §4.3): one
typed ``ConsoleOptions``; the CLI writes no attribute of the app afterwards."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from probes.analysis.alerts import AlertPolicy
from probes.analysis.job_watch import JobWatch
from probes.errors import ConfigError
from tests.support.paths import REPO
from tests.support.tui_fakes import fake_fleet
from tui.app import make_app
from tui.console_options import ConsoleOptions


def test_every_option_reaches_the_console(tmp_path: Path) -> None:
    backend, clock = fake_fleet()
    watch = JobWatch.of("48211", {"gpu-t01"}, {0: ("gpu-t01", 0)})
    policy = AlertPolicy(notify=False)
    app = make_app(backend, ConsoleOptions(
        demo=True, title="inventory.yaml", alerts=policy, job_watch=watch,
        metrics_textfile=tmp_path / "m.prom", metrics_port=0, ascii_glyphs=True,
        theme="rigwatch-light", read_only=True, audit_path=tmp_path / "audit.jsonl"),
        clock=clock)
    assert app.subtitle == "inventory.yaml · demo fleet"
    assert app.alert_policy is policy and app.job_watch is watch
    assert (app.metrics_textfile, app.metrics_port) == (tmp_path / "m.prom", 0)
    assert app.ascii_glyphs and app.theme == "rigwatch-light"
    assert app.read_only and app.audit_path == tmp_path / "audit.jsonl"
    plain = make_app(backend, clock=clock)
    assert not plain.read_only and plain.job_watch.job is None and plain.theme != app.theme


def test_an_unknown_theme_is_refused_naming_the_known_ones() -> None:
    backend, clock = fake_fleet()
    with pytest.raises(ConfigError, match=r"unknown theme 'mauve' \(available: .*rigwatch-light"):
        make_app(backend, ConsoleOptions(theme="mauve"), clock=clock)


def _app_writes(path: Path) -> list[str]:
    """``app.X = …`` (and ``app.fleet.X = …``) statements in ``path``, as ``file:line``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            base = t.value if isinstance(t, ast.Attribute) else None
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id == "app":
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_the_cli_writes_no_attribute_of_the_app(tmp_path: Path) -> None:
    clis = sorted((REPO / "tui").glob("cli*.py"))
    assert len(clis) > 3 and [w for p in clis for w in _app_writes(p)] == []
    # and the check sees such writes where there are some (as cli.py had them)
    before = tmp_path / "cli_before.py"
    before.write_text("app = make_app(backend)\napp.metrics_port = 9400\n"
                      "app.fleet.watched_job = job\nother.theme = 'x'\n")
    assert _app_writes(before) == ["cli_before.py:2", "cli_before.py:3"]
