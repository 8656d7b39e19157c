"""Everything a console is started with (issue #37: ``make_app`` takes it all, the callers
write no attribute of the app afterwards): one typed value, built by the CLI from its
arguments and settings, by tests with what they vary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from probes.analysis.alerts import AlertPolicy
from probes.analysis.job_watch import NO_JOB, JobWatch
from probes.analysis.limits import DetectorLimits, PreflightLimits
from probes.rules.parsers.ibnetdiscover import IbTopology


@dataclass(frozen=True)
class ConsoleOptions:
    """How the console watches, judges, shows and exports (all defaulted: a plain console)."""

    demo: bool = False
    """Whether the fleet is the built-in simulated one; the header says so."""
    title: str | None = None
    """What is being watched (an inventory name, a Slurm job), shown next to "rigwatch"."""
    alerts: AlertPolicy | None = None
    """How findings become notifications and hook runs (None: the default policy)."""
    detectors: DetectorLimits | None = None
    """The soak detectors' thresholds (``settings.yaml``)."""
    preflight: PreflightLimits | None = None
    """Preflight's thresholds (also the host panel's cores per GPU)."""
    scan_logs_apart: bool = False
    """Run the log rules on a worker thread, off the UI loop (the CLI's consoles; tests that
    step a fake clock keep them on the loop, deterministic)."""
    job_watch: JobWatch = NO_JOB
    """The Slurm job watched from the start (``--slurm-job``)."""
    topology: IbTopology | None = None
    """The fabric as ``ibnetdiscover`` showed it (``--ibnetdiscover``)."""
    metrics_textfile: Path | None = None
    """Where to write Prometheus text (node_exporter's textfile collector), if anywhere."""
    metrics_port: int | None = None
    """Serve ``/metrics`` on 127.0.0.1 at this port (0: any free one), if set."""
    ascii_glyphs: bool = False
    """Draw plain ASCII instead of braille, blocks and boxes (``--ascii``)."""
    theme: str | None = None
    """The theme to start in (``--theme``; None: the default); an unknown one is refused."""
    read_only: bool = False
    """No node actions (``--read-only``, ``read_only: true``; a replay is always read-only)."""
    audit_path: Path | None = None
    """Where node actions are recorded (``--audit``); None is the user's data dir."""

    @property
    def subtitle(self) -> str:
        """The header's note: the title, and "demo fleet" for the built-in one."""
        return " · ".join(p for p in (self.title, "demo fleet" if self.demo else None) if p)
