"""``CompactStream._sample`` as it was before session 12's lazy ``host``/``disks`` (main at
a5ee06b), kept as the reference of tests/wire/test_lazy_host_disks_s12.py: a row sample
with its ``HostStats`` and ``DiskStats`` built at once (its GPUs built when read)."""

from __future__ import annotations

from msgspec.structs import asdict

from probes.wire import structs
from probes.wire.compact import _DISK_NAME, CompactStream, SampleRow, _fill_host
from probes.wire.samples import DiskStats, GpuSample, HostSample, HostStats

_new = object.__new__
_set = object.__setattr__


def sample_before(self: CompactStream, s: SampleRow, gpus: tuple[GpuSample, ...] | None
                  ) -> HostSample:
    host = _fill_host(self._host_base, s.host)
    stats = _new(HostStats)
    _set(stats, "__dict__", host)
    disks = []
    for d in s.disks:
        disk = _new(DiskStats)
        _set(disk, "__dict__", asdict(d))
        disks.append(disk)
    if len(set(map(_DISK_NAME, s.disks))) != len(disks):
        raise structs.Refused("a disk named twice")  # v1's object keeps the last
    pcie = None if s.pcie is None else structs.chains(s.pcie)
    if gpus is not None:
        return structs.sample(s.seq or 0, s.ts, gpus, stats, tuple(disks), self._epoch,
                              pcie=pcie)
    obj = _new(HostSample)  # no "gpus": ``HostSample.gpus`` builds them when read
    _set(obj, "__dict__", {"ts": s.ts, "seq": s.seq or 0, "host": stats,
                           "disks": tuple(disks), "pcie": pcie,
                           "static_epoch": self._epoch, "wire_row": s})
    return obj
