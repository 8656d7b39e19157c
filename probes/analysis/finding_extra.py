"""Typed reads of what a rule put in ``Finding.extra``: a reader never spells a string key.

``extra`` stays a plain mapping (it is written by the rules, recorded as JSON and read
back from older recordings), so every accessor checks the value's type and answers None
(or nothing) for a value of another shape, as the readers' own ``isinstance`` tests did.
"""

from __future__ import annotations

from collections.abc import Mapping


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _float(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _ints(v: object) -> tuple[int, ...] | None:
    """The ints of a list or tuple (others dropped); None when it is not one."""
    if not isinstance(v, list | tuple):
        return None
    return tuple(i for i in v if isinstance(i, int) and not isinstance(i, bool))


def _items(v: object) -> tuple[object, ...]:
    """A list's items as written (nothing when it is not a list)."""
    return tuple(v) if isinstance(v, list) else ()


class FindingExtra:
    """One finding's details, typed (``Finding.details``)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: Mapping[str, object]) -> None:
        self._raw = raw

    # where a job's rank runs (``job_ranks.placed``)
    @property
    def rank(self) -> int | None:
        """The rank a job-log finding is about."""
        return _int(self._raw.get("rank"))

    @property
    def ranks(self) -> tuple[int, ...] | None:
        """The ranks it names (None: it names no list of ranks)."""
        return _ints(self._raw.get("ranks"))

    @property
    def nranks(self) -> int | None:
        """How many ranks the job's communicator has, as its log said."""
        return _int(self._raw.get("nranks"))

    @property
    def rank_host(self) -> str | None:
        """The host the rank runs on, once placed."""
        return _str(self._raw.get("rank_host"))

    @property
    def rank_gpu(self) -> int | None:
        """The GPU the placed rank runs on."""
        return _int(self._raw.get("rank_gpu"))

    @property
    def rank_bus_id(self) -> str | None:
        """That GPU's PCI bus id."""
        return _str(self._raw.get("rank_bus_id"))

    @property
    def rank_serial(self) -> str | None:
        """That GPU's serial number."""
        return _str(self._raw.get("rank_serial"))

    @property
    def job(self) -> str | None:
        """The Slurm job it belongs to."""
        return _str(self._raw.get("job"))

    @property
    def comm(self) -> str | None:
        """The NCCL communicator its log initialised."""
        return _str(self._raw.get("comm"))

    @property
    def last_completed(self) -> dict[int, int]:
        """Each rank's last completed collective sequence number, as the watchdog told."""
        told = self._raw.get("last_completed")
        done: dict[int, int] = {}
        if isinstance(told, dict):
            for k, v in told.items():
                try:
                    done[int(k)] = int(v)
                except (TypeError, ValueError):
                    continue
        return done

    # what a finding names on its host or in its fleet
    @property
    def gpus(self) -> tuple[int, ...]:
        """The GPUs a host's finding names (a spin, a fabric port's near GPUs)."""
        return tuple(i for i in _items(self._raw.get("gpus"))
                     if isinstance(i, int) and not isinstance(i, bool))

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts a grouped finding names (a switch, a rack, a source)."""
        return tuple(h for h in _items(self._raw.get("hosts")) if isinstance(h, str))

    @property
    def ports(self) -> tuple[str, ...]:
        """The fabric ports it names (``mlx5_0/1``)."""
        return tuple(p for p in _items(self._raw.get("ports")) if isinstance(p, str))

    @property
    def switch(self) -> str | None:
        """The leaf switch a switch-suspect names."""
        return _str(self._raw.get("switch"))

    @property
    def rack(self) -> str | None:
        """The rack a rack-suspect names."""
        return _str(self._raw.get("rack"))

    # what one finding measured
    @property
    def xid_name(self) -> str | None:
        """The Xid's name in the catalog."""
        return _str(self._raw.get("xid_name"))

    @property
    def answering(self) -> int | None:
        """GPUs that answer (a short host)."""
        return _int(self._raw.get("answering"))

    @property
    def expected(self) -> int | None:
        """GPUs that should answer."""
        return _int(self._raw.get("expected"))

    @property
    def temp_c(self) -> float | None:
        """The temperature it judged."""
        return _float(self._raw.get("temp_c"))

    @property
    def recovers(self) -> str | None:
        """The code a recovery notice says has cleared."""
        return _str(self._raw.get("recovers"))
