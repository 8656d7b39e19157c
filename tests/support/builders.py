"""Typed items for feeding the fold by hand: a host's hello, a GPU's sample, a host's sample.

Healthy by default (an 8-GPU H100 host at work); a test overrides only the fields it is about.
"""

from __future__ import annotations

from probes.wire.samples import GpuInfo, GpuSample, Hello, HostFacts, HostSample


def hello(n: int = 8) -> Hello:
    """Host ``h``'s hello with ``n`` H100s (bus ids ``0000:<i>:00.0``)."""
    gpus = tuple(GpuInfo(i, f"GPU-{i}", f"0000:{i:02x}:00.0", "H100", 81559.0) for i in range(n))
    facts = HostFacts("h", None, None, None, "550", "12.4", None, 8, 8, 1, 0, gpus)
    return Hello(ts=0.0, protocol=1, agent_version="0.1.0", facts=facts)


def gpu(i: int, **kw: object) -> GpuSample:
    """GPU ``i`` busy and healthy, with ``kw`` in place of any field."""
    base: dict[str, object] = dict(mem_used_mib=40000.0, mem_total_mib=80000.0, util_pct=95.0,
                                   temp_c=60.0, power_w=600.0, power_limit_w=700.0,
                                   sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0, pcie_gen=5,
                                   pcie_gen_max=5, pcie_width=16, pcie_width_max=16)
    base.update(kw)
    return GpuSample(index=i, **base)  # type: ignore[arg-type]


def sample(gpus: tuple[GpuSample, ...], ts: float = 100.0, disks: tuple = ()) -> HostSample:
    """A host sample of these GPUs (and disks) at ``ts``."""
    return HostSample(ts=ts, seq=1, gpus=gpus, disks=disks)


def sample_of_8(ts: float) -> HostSample:
    """Eight healthy GPUs at ``ts``."""
    return sample(tuple(gpu(i) for i in range(8)), ts=ts)
