"""``--prometheus`` and its options on the console, ``snapshot`` and ``preflight``."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.errors import ConfigError
from probes.sources.prometheus.options import prometheus_options
from tui.cli import build_parser, main
from tui.settings import Settings, load_settings


def test_the_options_before_or_after_the_subcommand_mean_the_same(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    before = build_parser().parse_args(
        ["--prometheus", "https://prom:9090/", "--match", '{job="dcgm"}',
         "--bearer-token-file", str(token), "snapshot", "--json"])
    after = build_parser().parse_args(
        ["snapshot", "--json", "--prometheus", "https://prom:9090/", "--match", 'job="dcgm"',
         "--bearer-token-file", str(token)])
    for args in (before, after):
        opts = prometheus_options(args)
        assert opts is not None
        assert opts.endpoint.url == "https://prom:9090"
        assert opts.endpoint.bearer_token == "abc"
        assert opts.match.strip("{}") == 'job="dcgm"'
        assert opts.host_label == "Hostname" and opts.refresh_s == 15.0
    pre = build_parser().parse_args(["preflight", "--prometheus", "http://p:9090",
                                     "--host-label", "node", "--refresh", "30"])
    opts = prometheus_options(pre)
    assert opts is not None and opts.host_label == "node" and opts.refresh_s == 30.0
    assert prometheus_options(build_parser().parse_args(["snapshot"])) is None


def test_prometheus_with_demo_or_a_bad_url_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="cannot be used with --demo"):
        prometheus_options(build_parser().parse_args(["--demo", "--prometheus", "http://p"]))
    assert main(["snapshot", "--prometheus", "ftp://p"]) == 2
    assert "not an http(s) URL" in capsys.readouterr().err


def test_subcommand_help_still_renders(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["snapshot", "--help"])
    assert "--prometheus URL" in capsys.readouterr().out


def test_an_unreachable_prometheus_is_one_line_not_a_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.sshd import free_port

    assert main(["snapshot", "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rigwatch: http://127.0.0.1:") and "Traceback" not in err


def test_the_settings_file_can_name_the_prometheus(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("prometheus:\n  url: http://prom:9090\n  match: 'cluster=\"a\"'\n"
                        "  refresh_s: 30\n")
    opts = prometheus_options(build_parser().parse_args(["--settings", str(settings),
                                                         "snapshot"]), load_settings(settings))
    assert opts is not None and opts.endpoint.url == "http://prom:9090"
    assert opts.match == 'cluster="a"' and opts.refresh_s == 30.0
    # a fleet named on the command line wins; other commands never read it
    for argv in (["--settings", str(settings), "--demo"],
                 ["--settings", str(settings), "explain", "-"]):
        assert prometheus_options(build_parser().parse_args(argv),
                                  load_settings(settings)) is None
    assert prometheus_options(build_parser().parse_args(["snapshot"]), Settings()) is None
    settings.write_text("prometheus:\n  urll: http://prom:9090\n")
    with pytest.raises(ConfigError):
        load_settings(settings)


def test_the_parsers_default_refresh_is_the_sources() -> None:
    from probes.sources.prometheus import source as prometheus_source
    from tui import cli_prometheus

    assert cli_prometheus.DEFAULT_REFRESH_S == prometheus_source.DEFAULT_REFRESH_S
