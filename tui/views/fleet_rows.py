"""The console's fleet rows: kept per host and built again only when the host changed.

A view over the fold (``probes.fleet_state``), not part of it: which rows are on screen
(``focus``) and how long an off-screen row may keep its numbers are the console's concern.
The fold says which hosts changed (``FleetState.changed_since``) and which of them changed
beyond their numbers (``judged_since``): off screen only those are looked at, the others
marked as waiting (until their refresh slot, or until seen, ``_moved``).  A down or stale
host's ages are re-stamped on its kept row.  At a thousand hosts a redraw, a key press or a
burst of connects then costs the hosts that changed, not the whole fleet.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.analysis.findings import Finding
from probes.analysis.fleet_counts import count_rows, timeless
from probes.analysis.row_judge import renumbered
from probes.analysis.tick_gpus import tick_gpus
from probes.fleet_state import FleetRow, FleetState, HostState, HostStatus
from probes.triage import Severity

_new = object.__new__
_set = object.__setattr__

OFF_SCREEN_REFRESH_S = 5.0
"""How old an off-screen host's numbers may get in its fleet row (see ``FleetRows.focus``)."""
OFF_SCREEN_INTERVALS = 2.0
"""…or this many of the host's intervals: a host read every 15 s (Prometheus) changes every
15 s, so 5 s never spared a rebuild; at 10,000 such hosts the rebuilds were a tenth of a
core."""


@dataclass(frozen=True)
class _KeptRow:
    """A host's newest fleet row and what it was built from."""

    revision: int
    status: HostStatus
    row: FleetRow
    built_at: float
    marks: tuple[tuple[object, Severity], ...]
    found: list[Finding]
    """The host's findings as kept when the row was built (``HostState.findings_as_kept``):
    while they are the same list, the marks are the same (no need to compare them)."""
    due_at: float
    """Its host's first refresh slot after ``built_at`` (``_slot_after``): an off-screen
    row's numbers may wait until then."""
    answering: tuple[object, object, tuple[object, ...]]
    """What its GPUs' count answering read beyond the findings (``_answering``)."""
    findings_key: tuple[object, ...]
    """``HostState.findings_key`` as the row was built: while it holds, so do the findings
    (their memo's own test, without the memo's merge call)."""


def _marks(found: list[Finding]) -> tuple[tuple[object, Severity], ...]:
    """What of a host's findings its row shows: which there are and how bad."""
    return tuple((f.key, f.severity) for f in found)


def _answering(host: HostState) -> tuple[object, object, tuple[object, ...]]:
    """What a row's ``gpus_ok`` (the header's GPU total) reads beyond the host's findings:
    its hello and each GPU's state in the newest sample (the static half of a v2 tick, one
    object while the epoch holds)."""
    last = host.last
    fixed = tick_gpus(last)[1] if last is not None else ()
    return host.hello, fixed, tuple([g.state for g in fixed])


def _answers_as_built(host: HostState, kept: _KeptRow) -> bool:
    hello, fixed, states = kept.answering
    if host.hello is not hello:
        return False
    last = host.last
    now = tick_gpus(last)[1] if last is not None else ()
    return now is fixed or tuple([g.state for g in now]) == states


def _retimed(host: HostState, row: FleetRow, now: float) -> FleetRow:
    """``row`` with its age-dependent fields as of ``now``; the rest cannot have changed
    while the host's items and status did not.

    ``row`` itself when no age moved; else a copy of its fields with the ages set, not a
    ``dataclasses.replace`` (which checks and passes every field through ``__init__``: at a
    thousand hosts, tens of thousands a minute).  The row has no ``__post_init__``, so the
    copy is the row ``replace`` would make."""
    status = host.status_at(now)
    reach = host.reach
    stale_s = (now - reach.last_seen) if row.status is HostStatus.STALE and reach.last_seen \
        else None
    reason = reach.reason_at(now, status)
    last_seen_s = reach.last_seen_at(now, status)
    next_retry_s = reach.next_retry_at(now)
    if (stale_s == row.stale_s and reason == row.reason and last_seen_s == row.last_seen_s
            and next_retry_s == row.next_retry_s):
        return row
    values = row.__dict__.copy()
    values["stale_s"] = stale_s
    values["reason"] = reason
    values["last_seen_s"] = last_seen_s
    values["next_retry_s"] = next_retry_s
    out: FleetRow = _new(FleetRow)
    _set(out, "__dict__", values)
    return out


def _wait_s(host: HostState) -> float:
    return max(OFF_SCREEN_REFRESH_S, OFF_SCREEN_INTERVALS * host.spec.interval_s)


def _slot_after(built_at: float, wait_s: float, phase: float) -> float:
    """The first of a host's refresh slots after ``built_at``: one every ``wait_s``, at its
    own ``phase`` (a fraction of ``wait_s``).  Never more than ``wait_s`` after it."""
    return built_at + wait_s - (built_at - phase * wait_s) % wait_s


class FleetRows:
    """The rows of one ``FleetState``, kept between redraws (the console's, one per fold)."""

    def __init__(self, fleet: FleetState) -> None:
        self.fleet = fleet
        self.focus: frozenset[str] | None = None
        """The hosts whose rows are on screen, None for all of them.  A row is rebuilt
        whenever its host's items change, except that an off-screen host whose status and
        findings are unchanged keeps its row (its numbers) up to ``OFF_SCREEN_REFRESH_S``:
        at a thousand hosts, building every row every second was most of the UI's tick,
        for rows nobody could see.  Status, findings, counts and verdicts are never late."""
        self.numbers_read = True
        """Whether the screen reads the off-screen rows' numbers and moving verdicts (a
        numeric sort order, a filter's words).  While it does not, an off-screen row whose
        status and findings are unchanged keeps its numbers until it comes on screen, not
        ``OFF_SCREEN_REFRESH_S``: at a thousand busy hosts the slots rebuilt four rows off
        screen for every row on it, each second, for numbers nobody read.  Counts and
        status never wait (the header's totals read only those)."""
        self.only_numbers_read = False
        """Whether what the screen reads off screen is only the rows' numbers (a numeric
        order, no filter; with ``numbers_read``).  Then a row due at its refresh slot whose
        status, findings and GPUs answering are as built gets its numbers afresh on the kept
        row (``renumbered``), not a full build: the order is the one those builds would
        give, at a fraction of their cost (issue 38)."""
        self._was_read = True
        self._read_since = float("-inf")
        """When the screen last started reading off-screen numbers (``_due``)."""
        self.row_builds = 0
        """Rows brought up to their host's revision so far, in full or renewed (tests and
        benches count them)."""
        self.row_renewals = 0
        """Of those, rows renewed from the kept one (``HostState.row_renewed``): the host's
        findings, hello and shown status as the kept row was built, only its sample and
        the clock moved."""
        self.row_renumbers = 0
        """Kept rows given fresh numbers instead (``only_numbers_read``)."""
        self._rows: tuple[tuple[object, ...], list[FleetRow]] | None = None
        self._totals: tuple[tuple[float, int], dict[str, int]] | None = None
        self._kept: dict[str, _KeptRow] = {}
        """Each host's newest row and what it was built from."""
        self._list: list[FleetRow] = []
        """The newest rows in inventory order (``rows`` hands out copies)."""
        self._place = {name: i for i, name in enumerate(fleet.hosts)}
        self._phase = {name: i / max(1, len(fleet.hosts)) for i, name in enumerate(fleet.hosts)}
        """Each host's place in the off-screen refresh cycle (``_slot_after``): hosts that
        connected together spread their refreshes evenly over it, so a tick rebuilds a
        fifth of the off-screen rows each second, not all of them every fifth second (at a
        thousand hosts a 150-200 ms tick that held a key press)."""
        self._seen = fleet.version
        """The fold's version at the last ``rows``: hosts changed after it are looked at."""
        self._waiting: dict[str, float] = {}
        """Off-screen hosts whose new numbers wait, each until when (``_may_wait``)."""
        self._timed: set[str] = set()
        """Hosts whose rows carry ages (stale, down): re-stamped each time."""
        self._stale_at: dict[str, float] = {}
        """When each streaming host's row turns stale unless an item comes first."""
        self._visited_at: float | None = None
        self._loose: set[str] = set()
        """Off-screen hosts whose kept row last waited while the screen read numbers, when
        its GPUs answering were not compared (``_may_wait``): once nobody reads numbers,
        they are looked at even when only their numbers moved (``_moved``)."""
        self._renumbered: set[str] = set()
        """Hosts whose kept row took fresh numbers on older verdicts (``_renumbers``)."""

    def row(self, host: HostState, now: float) -> FleetRow:
        """``host``'s row as of ``now``: the kept one (re-stamped) unless it changed."""
        name = host.name
        status = host.status_at(now)
        shown = host.reach.shown(status)  # ``shown_status_at(now)``
        kept = self._kept.get(name)
        row: FleetRow | None = None
        if kept is not None and kept.status is shown:
            if kept.revision == host.revision:
                row = kept.row
                self._waiting.pop(name, None)
                self._loose.discard(name)
            elif self._may_wait(host, kept, now, status):
                row = kept.row
                self._waiting[name] = self._due(host, kept)
                if self.numbers_read:
                    self._loose.add(name)
                else:
                    self._loose.discard(name)
            elif self._renumbers(host, kept, now, status):
                row = renumbered(kept.row, host.last)
                self.row_renumbers += 1
                self._kept[name] = kept = _KeptRow(
                    kept.revision, shown, row, now, kept.marks, kept.found,
                    _slot_after(now, _wait_s(host), self._phase[name]), kept.answering,
                    kept.findings_key)
                self._waiting[name] = self._due(host, kept)
                self._loose.discard(name)
                self._renumbered.add(name)
            else:
                found = host.findings_as_kept(status)
                if found is kept.found and host.hello is kept.answering[0]:
                    # what a build reads beyond the sample and the clock holds: the row
                    # ``host.row(now)`` gives, from the kept one (``row_renewed``)
                    fresh = host.row_renewed(kept.row, now, found)
                    self.row_builds += 1
                    self.row_renewals += 1
                    self._kept[name] = _KeptRow(
                        host.revision, shown, fresh, now, kept.marks, found,
                        _slot_after(now, _wait_s(host), self._phase[name]),
                        _answering(host), kept.findings_key)
                    return self._built(host, name, fresh, shown)
        if row is not None:
            timed = not timeless(row)
            if timed:
                row = _retimed(host, row, now)
                timed = not timeless(row)
        else:
            row = host.row(now)
            self.row_builds += 1
            found = host.findings_as_kept(status)
            self._kept[name] = _KeptRow(host.revision, shown, row, now, _marks(found), found,
                                        _slot_after(now, _wait_s(host), self._phase[name]),
                                        _answering(host), host.findings_key(status))
            return self._built(host, name, row, shown)
        self._note(host, name, row, shown, timed)
        return row

    def _built(self, host: HostState, name: str, row: FleetRow, shown: HostStatus) -> FleetRow:
        """``row`` just built for ``host``'s revision: nothing about it waits."""
        self._waiting.pop(name, None)
        self._loose.discard(name)
        self._renumbered.discard(name)
        self._note(host, name, row, shown, not timeless(row))
        return row

    def _note(self, host: HostState, name: str, row: FleetRow, shown: HostStatus,
              timed: bool) -> None:
        """Whether ``row`` carries ages (re-stamped each visit) and when it turns stale."""
        if timed:
            self._timed.add(name)
        else:
            self._timed.discard(name)
        seen = host.reach.last_seen
        if shown is HostStatus.STREAMING and seen is not None:
            self._stale_at[name] = seen + host.stale_limit_s()
        else:
            self._stale_at.pop(name, None)

    def _may_wait(self, host: HostState, kept: _KeptRow, now: float,
                  status: HostStatus) -> bool:
        """Off screen, before the host's next refresh slot (at most ``OFF_SCREEN_REFRESH_S``,
        or two of the host's intervals, after its row was built), same findings (``status``:
        the host's as of ``now``).  While no one reads the numbers off screen: until it
        comes on screen, as long as what its GPUs' count answering reads holds too (the
        header counts them)."""
        if self.focus is None or host.name in self.focus or now < kept.built_at:
            return False
        if self.numbers_read:
            if now >= self._due(host, kept):
                return False
        elif not _answers_as_built(host, kept):
            return False
        if host.findings_key(status) == kept.findings_key:
            return True
        found = host.findings_as_kept(status)
        return found is kept.found or kept.marks == _marks(found)

    def _renumbers(self, host: HostState, kept: _KeptRow, now: float,
                   status: HostStatus) -> bool:
        """Whether ``kept`` (its host's revision moved, the row not kept by
        ``_may_wait``) may take fresh numbers instead of a full build: off screen while
        only its numbers are read, past its slot (``_may_wait`` said no only for that),
        with its findings and GPUs answering as built: its status, counts, findings and
        GPUs answering are then what a build would give; what reads numbers beyond the
        order (temp level, memory mark, GPU verdicts) may be older (``renumbered_among``)."""
        if (not self.only_numbers_read or not self.numbers_read or self.focus is None
                or host.name in self.focus or now < kept.built_at):
            return False
        if not _answers_as_built(host, kept):
            return False
        if host.findings_key(status) == kept.findings_key:
            return True
        found = host.findings_as_kept(status)
        return found is kept.found or kept.marks == _marks(found)

    def _due(self, host: HostState, kept: _KeptRow) -> float:
        """When ``kept``'s numbers are due while the screen reads them: its refresh slot,
        or, for a row that waited past it while no one read them, its first slot after
        the screen started reading them (the rows that waited are rebuilt over one refresh
        period, a share each tick, not all in the tick after a key: ~0.1 s at a thousand
        hosts)."""
        due = kept.due_at
        since = self._read_since
        if due <= since:
            due = _slot_after(since, _wait_s(host), self._phase[host.name])
        return due

    def rows(self, now: float) -> list[FleetRow]:
        """One row per host, in inventory order.

        Only the hosts that may have moved are looked at: those that changed in the fold,
        whose row carries an age, that turn stale by now, or whose waiting numbers are due
        or came on screen.  At 10,000 hosts read every 15 s that is a few hundred a second,
        where a loop over every host was a tenth of a core.  A redraw asks for rows and for
        totals at the same ``now``: they are computed once.
        """
        if self.numbers_read and not self._was_read:  # since the last visit, at most
            self._read_since = now if self._visited_at is None else self._visited_at
        self._was_read = self.numbers_read
        key = (now, self.fleet.version, self.focus, self.numbers_read)
        if self._rows is None or self._rows[0] != key:
            self._rows = (key, self._refreshed(now))
        return self._rows[1]

    def _refreshed(self, now: float) -> list[FleetRow]:
        fleet = self.fleet
        if not self._list or self._visited_at is None or now < self._visited_at:
            # first call, or the clock went back (a replay's seek): look at every host
            self._list = [self.row(h, now) for h in fleet.hosts.values()]
        else:
            focus = self.focus
            hosts, place, out = fleet.hosts, self._place, self._list
            due = self._moved(now) | self._timed
            due.update(self._stale_by(now))
            read = self.numbers_read
            due.update(n for n, t in self._waiting.items()
                       if (read and t <= now) or focus is None or n in focus)
            for name in due:
                out[place[name]] = self.row(hosts[name], now)
        self._seen = fleet.version
        self._visited_at = now
        return list(self._list)

    def _moved(self, now: float) -> set[str]:
        """The hosts changed in the fold since the last visit that need a look: all but
        those off screen whose sample moved only numbers (``FleetState.judged_since``) and
        whose kept row may keep them (``_may_wait``'s test, the findings and GPUs answering
        known to hold): those are only marked as waiting, as a look would have."""
        fleet, seen, focus = self.fleet, self._seen, self.focus
        changed = fleet.changed_since(seen)
        if focus is None:
            return set(changed)
        judged = set(fleet.judged_since(seen))
        hosts, kept_rows, timed, waiting = fleet.hosts, self._kept, self._timed, self._waiting
        loose = self._loose
        read = self.numbers_read
        due = judged
        for name in changed:
            if name in judged:
                continue
            if name in focus or name in timed or (not read and name in loose):
                due.add(name)
                continue
            if name in waiting:  # due no earlier than when last marked: looked at then
                continue
            kept = kept_rows.get(name)
            if kept is None or now < kept.built_at:
                due.add(name)
                continue
            at = self._due(hosts[name], kept)
            if read and now >= at:
                due.add(name)
            else:
                waiting[name] = at
        return due

    def _stale_by(self, now: float) -> list[str]:
        """Streaming hosts whose rows may read stale by ``now``; the others' times are
        moved to their newest item's (a numbers-only sample is not looked at: ``_moved``)."""
        stale_at, hosts = self._stale_at, self.fleet.hosts
        out = []
        for name, at in stale_at.items():
            if at < now:
                reach = hosts[name].reach
                seen = reach.last_seen
                if seen is not None and seen + reach.stale_limit_s() >= now:
                    stale_at[name] = seen + reach.stale_limit_s()
                else:
                    out.append(name)
        return out

    def waiting_among(self, names: frozenset[str]) -> bool:
        """Whether any of ``names`` shows numbers that wait for a rebuild (a row scrolled
        on screen since the last redraw)."""
        waiting = self._waiting
        return any(n in waiting for n in names)

    def renumbered_among(self, names: frozenset[str]) -> bool:
        """Whether any of ``names`` shows verdicts older than its last slot (fresh numbers
        on a kept row, ``_renumbers``): scrolled on screen, a temperature whose colour is
        from an older build is drawn again at once, not at the next tick."""
        kept = self._renumbered
        return any(n in kept for n in names)

    def totals(self, now: float) -> dict[str, int]:
        """Counts for the header: hosts by status, GPUs, findings by severity."""
        key = (now, self.fleet.version)
        if self._totals is not None and self._totals[0] == key:
            return dict(self._totals[1])
        out = count_rows(self.rows(now))
        self._totals = (key, out)
        return dict(out)
