"""``FleetState.tick`` as it was before session 11 (branch issue38-redraw11): the reference
``test_fleet_tick_redraw11`` compares the fold's tick with (each host's shown status judged
again after its ``tick``)."""

from __future__ import annotations

from probes.fleet_state import FleetState, HostStatus


class FleetStateTickBefore(FleetState):
    """The fold with session 10's ``tick``."""

    def tick(self, now: float) -> bool:
        moved = self.take_scans()
        due = self._unticked
        due.update(n for n, t in self._stale_at.items() if t < now)
        self._unticked = set()
        for name in due:
            state = self.hosts[name]
            if state.tick(now):
                self._log.changed(name)
                moved = True
            seen = state.reach.last_seen
            if state.shown_status_at(now) is HostStatus.STREAMING and seen is not None:
                self._stale_at[name] = seen + state.stale_limit_s()
            else:
                self._stale_at.pop(name, None)
        return moved
