"""A source as the command line built it: its backend and what the commands around it need
to know of it (how its recording is named, the console's title, a Slurm job it follows)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from probes.analysis.limits import DetectorLimits
from probes.config.slurm import SlurmJob
from probes.sources.base import Backend


class PrometheusSettingsLike(Protocol):
    """The settings file's ``prometheus:`` section, as the Prometheus source reads it."""

    @property
    def url(self) -> str | None: ...
    @property
    def match(self) -> str | None: ...
    @property
    def bearer_token_file(self) -> str | None: ...
    @property
    def ca_file(self) -> str | None: ...
    @property
    def host_label(self) -> str | None: ...
    @property
    def refresh_s(self) -> float: ...


class SourceSettings(Protocol):
    """What of the operator's settings a source is built from."""

    @property
    def detectors(self) -> DetectorLimits: ...
    @property
    def prometheus(self) -> PrometheusSettingsLike: ...


@dataclass
class Source:
    """One fleet source, built once from the command line (``registry.build_source``)."""

    backend: Backend
    name: str
    """A new recording's name (``demo``, the inventory's stem, ``prometheus-…``)."""
    key: list[str] = field(default_factory=list)
    """What identifies this fleet, so a console resumes a recent recording of it."""
    demo: bool = False
    resume: bool = True
    """False: a new recording each time (a demo's clock is simulated)."""
    records: bool = True
    """False for a recording played back: it is not recorded again."""
    title: str | None = None
    job: SlurmJob | None = None
    """The Slurm job whose nodes these are (``--slurm-job``)."""
    about: Callable[[], Mapping[str, Any]] | None = None
    """Where the numbers came from and what they cost, for ``snapshot``'s ``source``, asked
    after the read (None: agents, nothing to add)."""
