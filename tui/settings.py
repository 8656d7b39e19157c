"""The settings file: preflight thresholds and alert policy, strictly checked.

```yaml
preflight:
  mem_ratio_warn: 2.0
  require_ib: false
alerts:
  hook: [/usr/local/bin/page-oncall, --team, gpu]
  clear_after_s: 300
```

Like the inventory, it is read from YAML nodes so every problem names its file, line and
column, and unknown keys get a close match; nothing is silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
import yaml

from probes.analysis.alerts import AlertPolicy
from probes.analysis.limits import DetectorLimits, LadderLimits, PreflightLimits
from probes.config import inventory_values as v
from probes.errors import Problem, ProblemsError
from probes.rules.nccl_expect import NcclExpectations
from probes.triage import Severity

ENV_VAR = "RIGWATCH_SETTINGS"


class SettingsError(ProblemsError):
    """The settings file cannot be used; ``problems`` lists every reason."""

    title = "Settings error"


@dataclass(frozen=True)
class RecordingLimits:
    """Retention of recordings (``recording:`` section)."""

    max_age_days: float = 30.0
    max_size_gib: float = 20.0
    """Per recording file; over it the oldest whole samples become buckets first, then the
    oldest samples go (log lines, findings and hellos last)."""
    full_resolution_hours: float = 48.0
    """Whole samples for this much of the newest recording time; older, 15 s buckets."""
    bucket_15s_days: float = 7.0
    """15 s buckets this long; older, 5 min buckets (min, max and mean of each number)."""


@dataclass(frozen=True)
class PrometheusSettings:
    """Read the fleet from Prometheus (``prometheus:`` section): the command line's
    ``--prometheus`` and its options, used when no fleet is given on the command line."""

    url: str | None = None
    match: str | None = None
    bearer_token_file: str | None = None
    ca_file: str | None = None
    host_label: str | None = None
    refresh_s: float = 15.0


@dataclass(frozen=True)
class Settings:
    """Everything the settings file can set."""

    preflight: PreflightLimits = field(default_factory=PreflightLimits)
    alerts: AlertPolicy = field(default_factory=AlertPolicy)
    detectors: DetectorLimits = field(default_factory=DetectorLimits)
    recording: RecordingLimits = field(default_factory=RecordingLimits)
    nccl_tests: NcclExpectations = field(default_factory=NcclExpectations)
    """The bus bandwidth nccl-tests runs are judged against (``probes.rules.nccl_expect``)."""
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    ladder: LadderLimits = field(default_factory=LadderLimits)
    """``rigwatch ladder``'s ``good_efficiency``."""
    read_only: bool = False
    """``read_only: true``: no node actions anywhere (console keys, palette, help, and the
    ``rigwatch node`` commands), as ``--read-only`` says."""


def default_settings_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$RIGWATCH_SETTINGS``, else ``~/.config/rigwatch/settings.yaml`` when it exists."""
    env = os.environ if environ is None else environ
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR])
    path = Path(platformdirs.user_config_dir("rigwatch")) / "settings.yaml"
    return path if path.exists() else None


def _reader(kind: Any) -> Callable[[yaml.Node], Any]:
    if kind in (float, "float", "float | None"):
        return v.number("a number ≥ 0", zero_ok=True)
    if kind in (int, "int"):
        return v.integer(0)
    if kind in (bool, "bool"):
        return v.boolean
    if kind in ("str | None",):
        return v.text
    if kind in ("tuple[str, ...]",):
        return v.text_list
    if kind in ("Severity",):
        choose = v.choice(*(s.value for s in Severity))
        return lambda node: Severity(choose(node))
    raise TypeError(f"no settings reader for {kind!r}")


def _readers(cls: type) -> dict[str, Callable[[yaml.Node], Any]]:
    return {f.name: _reader(f.type) for f in dataclasses.fields(cls)}


MAX_HOOKS_AT_ONCE = 64
"""Alert hooks running at once: each is a process group, and a burst of alerts must not
fork a thousand (the security review's F2 set 100,000,000)."""
MAX_HOOKS_WAITING = 4096

SECTIONS: dict[str, tuple[type, dict[str, Callable[[yaml.Node], Any]]]] = {
    "preflight": (PreflightLimits, _readers(PreflightLimits)),
    "alerts": (AlertPolicy, {**_readers(AlertPolicy),
                             "hook_at_once": v.integer(1, MAX_HOOKS_AT_ONCE),
                             "hook_waiting": v.integer(0, MAX_HOOKS_WAITING)}),
    "detectors": (DetectorLimits, _readers(DetectorLimits)),
    "recording": (RecordingLimits, _readers(RecordingLimits)),
    "nccl_tests": (NcclExpectations, _readers(NcclExpectations)),
    "prometheus": (PrometheusSettings, _readers(PrometheusSettings)),
    "ladder": (LadderLimits, _readers(LadderLimits)),
}
"""Each section of the file: the dataclass it fills and a reader per field."""


def load_settings(path: str | Path) -> Settings:
    """Read and check a settings file.

    Raises:
        SettingsError: with every problem found, each with its line and column.
    """
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError([Problem(name, 0, 0, None, f"cannot read: {exc.strerror}")]) \
            from exc
    except UnicodeDecodeError:
        raise SettingsError([Problem(name, 0, 0, None, "not UTF-8 text")]) from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SettingsError([Problem(name, mark.line + 1 if mark else 0,
                                     mark.column + 1 if mark else 0, None,
                                     f"not valid YAML: {getattr(exc, 'problem', exc)}")]) \
            from None
    problems: list[Problem] = []

    def add(node: yaml.Node, key: str | None, message: str, hint: str = "") -> None:
        problems.append(Problem(name, node.start_mark.line + 1, node.start_mark.column + 1,
                                key, message, hint))

    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    if root is None:
        return Settings()
    if not isinstance(root, yaml.MappingNode):
        add(root, None, "the settings file must be a mapping of sections (preflight, alerts)")
        raise SettingsError(problems)
    read_only = False
    for knode, vnode in root.value:
        key = knode.value
        if key == "read_only":  # a top-level switch, not a section
            try:
                read_only = v.boolean(vnode)
            except v.Bad as bad:
                add(vnode, key, bad.message or f"'read_only' must be {bad.expected}, got "
                    f"{v.got(vnode)}")
            continue
        if key not in SECTIONS:
            close = difflib.get_close_matches(str(key), SECTIONS, n=1)
            add(knode, key, f"unknown section '{key}'", f"did you mean '{close[0]}'?" if close
                else "expected: " + ", ".join((*SECTIONS, "read_only")))
            continue
        if not isinstance(vnode, yaml.MappingNode):
            add(vnode, key, f"'{key}' must be a mapping of setting: value")
            continue
        readers = SECTIONS[key][1]
        for k2, v2 in vnode.value:
            read = readers.get(k2.value)
            if read is None:
                close = difflib.get_close_matches(str(k2.value), readers, n=1)
                add(k2, k2.value, f"unknown {key} setting '{k2.value}'",
                    f"did you mean '{close[0]}'?" if close else "")
                continue
            try:
                values[key][k2.value] = read(v2)
            except v.Bad as bad:
                add(bad.node or v2, k2.value, bad.message or f"'{k2.value}' must be "
                    f"{bad.expected}, got {v.got(bad.node or v2)}", bad.hint)
    if problems:
        raise SettingsError(problems)
    limits = PreflightLimits(**values["preflight"])
    if limits.mem_ratio_fail > limits.mem_ratio_warn:
        raise SettingsError([Problem(name, 0, 0, "mem_ratio_fail",
                                     "mem_ratio_fail must not exceed mem_ratio_warn")])
    return Settings(preflight=limits, alerts=AlertPolicy(**values["alerts"]),
                    detectors=DetectorLimits(**values["detectors"]),
                    recording=RecordingLimits(**values["recording"]),
                    nccl_tests=NcclExpectations(**values["nccl_tests"]),
                    prometheus=PrometheusSettings(**values["prometheus"]),
                    ladder=LadderLimits(**values["ladder"]), read_only=read_only)
