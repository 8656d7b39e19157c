"""How many GPUs a host should have when the inventory does not say (no ``expect_gpus``):
as many as most of its peers with the same GPU model.  A host that lost a GPU before
anything watched it (before the agent started, before Prometheus first scraped it) lists
one fewer than its peers and has nothing else to show for it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from probes.wire.samples import Hello

MIN_PEERS = 3
"""Hosts of one model that must agree (a strict majority of them) on a count."""


@dataclass
class PeerCounts:
    """Each GPU model's hosts by how many GPUs they list, kept as hellos arrive (a hello
    costs a few dict updates, a question one ``most_common`` over a handful of counts)."""

    listed: dict[str, tuple[str, int]] = field(default_factory=dict)
    """host → (its model, GPUs its hello lists)."""
    by_model: dict[str, Counter[int]] = field(default_factory=dict)
    _norm: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    """Each model's answer, kept until a hello of that model arrives (asked every sample)."""
    version: int = 0
    """Hellos added so far: every answer of ``expected`` stands while it does (a quiet
    tick's judges ask it only when it moved, ``sample_judge._still_quiet``)."""

    def add(self, host: str, hello: Hello) -> None:
        """``host``'s newest GPU list (replacing its older one)."""
        self.version += 1
        old = self.listed.pop(host, None)
        if old is not None:
            self.by_model[old[0]][old[1]] -= 1
            self._norm.pop(old[0], None)
        gpus = hello.facts.gpus
        model = next((g.name for g in gpus if g.name), None)
        if model is not None:
            self.listed[host] = (model, len(gpus))
            self.by_model.setdefault(model, Counter())[len(gpus)] += 1
            self._norm.pop(model, None)

    def expected(self, host: str) -> tuple[int, int] | None:
        """(the GPUs a strict majority of ``host``'s model's hosts list, how many hosts
        list it); None when its model has fewer than ``MIN_PEERS`` hosts or no majority."""
        mine = self.listed.get(host)
        if mine is None:
            return None
        model = mine[0]
        if model not in self._norm:
            counts = self.by_model[model]
            total = sum(counts.values())
            count, n = counts.most_common(1)[0]
            self._norm[model] = (count, n) if total >= MIN_PEERS and 2 * n > total else None
        return self._norm[model]
