"""Which hosts the agents source watches: an inventory, this machine, the demo, or a Slurm
job's nodes; and the agents source built from them (``from_args``, a registry entry).

Moved here from the CLI so that every source is built in one place (``registry``)."""

from __future__ import annotations

import argparse
import socket
import sys

from probes.config.fleet import (
    DEMO_SPEED,
    HostKeyChecking,
    HostSpec,
    TransportName,
    demo_fleet,
    local_has_nvidia_gpu,
    localhost_spec,
)
from probes.config.inventory import choose_inventory_path, load_inventory
from probes.config.slurm import SlurmJob, job_specs, query_job
from probes.errors import ConfigError
from probes.sources.base import Backend
from probes.sources.source import Source, SourceSettings


def fleet_of(args: argparse.Namespace) -> tuple[list[HostSpec], bool]:
    """The hosts to watch: an inventory (given, or the default file), else this machine if
    it has a GPU, else the demo fleet.

    Raises:
        InventoryError: the inventory cannot be used.
    """
    speed = getattr(args, "speed", DEMO_SPEED)
    if getattr(args, "demo", False):
        return demo_fleet(speed=speed), True
    path = choose_inventory_path(getattr(args, "inventory", None))
    if path is not None:
        return list(load_inventory(path).hosts), False
    if not local_has_nvidia_gpu():
        return demo_fleet(speed=speed), True
    return [localhost_spec()], False


def warn_insecure(specs: list[HostSpec]) -> None:
    """Say loudly, at every start, which hosts are not checked against known_hosts."""
    off = [s.name for s in specs if s.transport is TransportName.SSH
           and s.ssh.host_key_checking is HostKeyChecking.OFF]
    if off:
        shown = ", ".join(off[:5]) + (f" and {len(off) - 5} more" if len(off) > 5 else "")
        print(f"rigwatch: WARNING: host key checking is OFF for {shown}: these connections "
              "are not protected against interception", file=sys.stderr)


def slurm_job_of(args: argparse.Namespace) -> SlurmJob | None:
    """The job of ``--slurm-job ID`` as Slurm tells it, None without the option."""
    job_id = getattr(args, "slurm_job", None)
    return None if job_id is None else query_job(job_id)


def job_fleet(job: SlurmJob, args: argparse.Namespace) -> list[HostSpec]:
    """The job's nodes as hosts (the inventory's entries where it names them)."""
    path = choose_inventory_path(getattr(args, "inventory", None))
    inventory = list(load_inventory(path).hosts) if path is not None else []
    for note in job.notes:  # what of the job is left out, and why
        print(f"rigwatch: Slurm job {job.job_id}: {note}", file=sys.stderr)
    specs = job_specs(job, inventory, socket.gethostname().split(".", 1)[0])
    if not specs:
        raise ConfigError(f"rigwatch: Slurm job {job.job_id} has no nodes yet "
                          f"({job.state or 'state unknown'})")
    return specs


def from_args(args: argparse.Namespace, _settings: SourceSettings) -> Source:
    """The agents source: a Slurm job's nodes, else ``fleet_of``; in collector processes
    when ``--collectors`` (or the fleet's size) says so; a job's state polled beside it.
    Always answers: it is the registry's last entry, the default fleet."""
    from probes.sources.agents import AgentFleetBackend
    from probes.sources.collectors import CollectorBackend, auto_collectors

    job = slurm_job_of(args)
    specs, demo = (job_fleet(job, args), False) if job is not None else fleet_of(args)
    warn_insecure(specs)
    collectors = getattr(args, "collectors", None)
    if collectors is None:
        collectors = auto_collectors(len(specs))
    backend: Backend = (CollectorBackend(specs, collectors) if collectors > 0
                        else AgentFleetBackend(specs))
    path = None if demo or job is not None else choose_inventory_path(
        getattr(args, "inventory", None))
    if job is not None:  # its state polled beside the hosts, and recorded with them
        from probes.sources.job_watch import JobWatchBackend

        backend = JobWatchBackend(backend, job.job_id, job.batch_host or specs[0].name,
                                  nodes=job.nodes)
    name = ("demo" if demo else f"job-{job.job_id}" if job is not None
            else path.stem if path else specs[0].name)
    title = path.name if path else (f"Slurm job {job.job_id}" if job is not None else None)
    return Source(backend, name=name,
                  key=[f"{s.name} {s.transport}" for s in specs] + (["demo"] if demo else []),
                  demo=demo, resume=not demo, title=title, job=job)
