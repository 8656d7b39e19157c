"""The audit trail: one JSON line per node action attempted, refused, failed or done.

Appended, never rewritten, to a file only its owner can read or write (mode 0600 in a 0700
directory, never through a symlink, never a file someone else owns), and ``fsync``'d before
the caller goes on: the "attempted" line is on disk before ``scontrol`` runs (a console
killed mid-action leaves the attempt on record), and the "done" line before the console says
done.  An action whose record cannot be written is not taken.

Each line: when (ISO 8601 and epoch), who (the local user, its uid, ``SUDO_USER`` as sudo set
it, the machine), the node and its host, the action and outcome, the reason, the evidence
finding with its incident id, the command (argv), its exit status and output (cut), the
node's state as Slurm showed it afterwards, and for a resume what still failed and the
operator's override.  One action's lines share an ``action_id``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import socket
import stat
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import BinaryIO

import platformdirs

from probes.actions.errors import AuditError
from probes.actions.evidence import Evidence
from probes.actions.slurm_node import NodeState
from probes.wire.sanitize import clean_text

AUDIT_VERSION = 1
ENV_VAR = "RIGWATCH_AUDIT"
FILE_MODE = 0o600
DIR_MODE = 0o700
MAX_OUTPUT_CHARS = 2000
"""A command's output kept in a record: its end says why."""
MAX_LINE_BYTES = 64 * 1024
"""A line longer than this is not ours: reported, not parsed."""


class Outcome(str, Enum):
    """What became of an action; ``attempted`` is written before the command runs."""

    ATTEMPTED = "attempted"
    REFUSED = "refused"
    FAILED = "failed"
    DONE = "done"


class NodeAction(str, Enum):
    """What rigwatch can do to a node."""

    DRAIN = "drain"
    RESUME = "resume"


@dataclass(frozen=True)
class Actor:
    """Who acted: the local user (as the OS says), ``SUDO_USER`` (as sudo set it), where."""

    user: str
    uid: int
    sudo_user: str | None = None
    machine: str = ""

    @classmethod
    def here(cls, environ: Mapping[str, str] | None = None) -> Actor:
        """The user running this process, and whoever sudo says ran sudo."""
        env = os.environ if environ is None else environ
        try:  # the password database, not $USER (getpass reads the environment first)
            user = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            user = str(os.getuid())
        sudo = env.get("SUDO_USER")
        return cls(clean_text(user)[:64], os.getuid(),
                   clean_text(sudo)[:64] if sudo else None,
                   clean_text(socket.gethostname())[:255])

    def __str__(self) -> str:
        return self.user + (f" (sudo: {self.sudo_user})" if self.sudo_user else "")

    def to_json(self) -> dict[str, object]:
        """The ``who`` object of a record."""
        return {"user": self.user, "uid": self.uid, "sudo_user": self.sudo_user,
                "machine": self.machine}


@dataclass(frozen=True)
class AuditRecord:
    """One line of the trail."""

    when: float
    action_id: str
    outcome: Outcome
    action: NodeAction
    node: str
    actor: Actor
    reason: str = ""
    """For a drain, the reason given to Slurm; for a resume, why (the override's reason)."""
    host: str | None = None
    evidence: Evidence | None = None
    command: tuple[str, ...] = ()
    exit_status: int | None = None
    output: str = ""
    verified: NodeState | None = None
    """The node as ``sinfo`` showed it after the command."""
    why: str = ""
    """One line: Slurm's answer said plainly, or why it was refused."""
    override: bool = False
    """A resume done although the recheck still found the fault (the operator's call)."""
    still_failing: tuple[str, ...] = ()
    via: str = "console"
    """``console`` or ``cli``."""

    def to_json(self) -> dict[str, object]:
        """The record as its JSON line holds it."""
        return {"v": AUDIT_VERSION, "when": _iso(self.when), "ts": round(self.when, 3),
                "action_id": self.action_id, "outcome": self.outcome.value,
                "action": self.action.value, "node": self.node, "host": self.host,
                "who": self.actor.to_json(), "reason": self.reason,
                "evidence": self.evidence.to_json() if self.evidence else None,
                "command": list(self.command), "exit": self.exit_status,
                "output": self.output[-MAX_OUTPUT_CHARS:],
                "verified": self.verified.to_json() if self.verified else None,
                "why": self.why, "override": self.override,
                "still_failing": list(self.still_failing), "via": self.via}

    def line(self) -> str:
        """One line for ``rigwatch node audit`` and the console."""
        text = (f"{_iso(self.when)}  {self.actor}  {self.action.value} {self.node}  "
                f"{self.outcome.value.upper()}")
        if self.override:
            text += " (override)"
        if self.reason:
            text += f'  reason "{self.reason}"'
        if self.verified is not None:
            text += f"  → {self.verified.state}"
        if self.why:
            text += f"  — {self.why}"
        return text


def new_action_id() -> str:
    """An id shared by one action's lines (attempted, then done or failed)."""
    return uuid.uuid4().hex[:12]


def _iso(ts: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (OverflowError, OSError, ValueError):
        return "?"


def default_audit_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$RIGWATCH_AUDIT``, else ``<user data dir>/rigwatch/audit.jsonl``."""
    env = os.environ if environ is None else environ
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR]).expanduser()
    return Path(platformdirs.user_data_dir("rigwatch")) / "audit.jsonl"


@dataclass
class AuditLog:
    """The append-only trail at ``path``."""

    path: Path = field(default_factory=default_audit_path)

    def append(self, record: AuditRecord) -> None:
        """Append one line and ``fsync`` it (and the directory, when the file is new).

        Raises:
            AuditError: the directory or file cannot be made or written, the path is a
                symlink or not a regular file, or another user owns the file.
        """
        line = (json.dumps(record.to_json(), ensure_ascii=True, separators=(",", ":"))
                + "\n").encode("ascii")
        path = self.path
        try:
            path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            new = not os.path.lexists(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_CLOEXEC, FILE_MODE)
        except OSError as exc:
            raise AuditError(_why(path, exc)) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise AuditError(f"{path}: not a regular file: no action without its record")
            if info.st_uid != os.geteuid():
                raise AuditError(f"{path}: belongs to uid {info.st_uid}, not to this user: "
                                 "no action without a trail only its owner can write")
            if stat.S_IMODE(info.st_mode) != FILE_MODE:
                os.fchmod(fd, FILE_MODE)
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            raise AuditError(_why(path, exc)) from None
        finally:
            os.close(fd)
        if new:
            _sync_dir(path.parent)

    def records(self) -> Iterator[AuditRecord | str]:
        """Every line in order: a record, or a one-line problem naming the file and line.

        Raises:
            AuditError: the file cannot be opened (a missing file has no records).
        """
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed below, lines are streamed
        except FileNotFoundError:
            return
        except OSError as exc:
            raise AuditError(_why(self.path, exc)) from None
        with fh:
            for n, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), 1):
                if len(raw) > MAX_LINE_BYTES:
                    yield f"{self.path}:{n}: a line over {MAX_LINE_BYTES} bytes: skipped"
                    _skip_rest(fh)
                    continue
                if not raw.strip():
                    continue
                try:
                    yield parse_record(json.loads(raw.decode("utf-8", "replace")))
                except (ValueError, TypeError, KeyError, RecursionError) as exc:
                    yield f"{self.path}:{n}: not an audit record ({clean_text(str(exc))[:120]})"


def _skip_rest(fh: BinaryIO) -> None:
    """Read on to the end of an overlong line."""
    while True:
        chunk = fh.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _why(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"{path}: is a symlink: the audit trail is never written through one"
    return f"{exc.filename or path}: cannot write the audit trail: {exc.strerror or exc}"


def _sync_dir(directory: Path) -> None:
    """Make a new file's name durable too (its directory entry)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def parse_record(data: object) -> AuditRecord:
    """A record from its JSON line; every string cleaned (the file is data when read).

    Raises:
        ValueError, TypeError, KeyError: not a record of this trail.
    """
    if not isinstance(data, dict):
        raise TypeError("not an object")
    who = data.get("who") or {}
    if not isinstance(who, dict):
        raise TypeError("'who' is not an object")

    def text(obj: Mapping[str, object], key: str) -> str:
        v = obj.get(key)
        return clean_text(v) if isinstance(v, str) else ""

    ev, seen = data.get("evidence"), data.get("verified")
    exit_status = data.get("exit")
    uid = who.get("uid")
    return AuditRecord(
        when=float(data["ts"]), action_id=text(data, "action_id"),
        outcome=Outcome(data["outcome"]), action=NodeAction(data["action"]),
        node=text(data, "node"),
        actor=Actor(text(who, "user"), uid if isinstance(uid, int) else -1,
                    text(who, "sudo_user") or None, text(who, "machine")),
        reason=text(data, "reason"), host=text(data, "host") or None,
        evidence=Evidence.from_json(ev) if isinstance(ev, dict) else None,
        command=tuple(clean_text(str(c)) for c in data.get("command") or ()),
        exit_status=exit_status if isinstance(exit_status, int) else None,
        output=text(data, "output"),
        verified=NodeState(text(seen, "node"), text(seen, "state"),
                           text(seen, "reason") or None, text(seen, "by") or None,
                           text(seen, "since") or None) if isinstance(seen, dict) else None,
        why=text(data, "why"), override=data.get("override") is True,
        still_failing=tuple(clean_text(str(s)) for s in data.get("still_failing") or ()),
        via=text(data, "via") or "?")


def last_drain(records: Iterable[AuditRecord], node: str) -> AuditRecord | None:
    """The drain of ``node`` rigwatch last completed, if no resume completed after it: the
    finding a resume must see gone."""
    found = None
    for r in records:
        if r.node != node or r.outcome is not Outcome.DONE:
            continue
        found = r if r.action is NodeAction.DRAIN else None
    return found


def unfinished(records: Iterable[AuditRecord]) -> set[str]:
    """Action ids attempted with no outcome after: the console or script died mid-action
    (Slurm may or may not have taken the command: ``sinfo`` tells)."""
    open_ids: set[str] = set()
    for r in records:
        if r.outcome is Outcome.ATTEMPTED:
            open_ids.add(r.action_id)
        else:
            open_ids.discard(r.action_id)
    return open_ids


def relevant(records: Iterable[AuditRecord], incidents: Iterable[str],
             hosts: Iterable[str], since: float | None = None) -> list[AuditRecord]:
    """The records a report lists: those of its incidents, or on its hosts (by host or
    node name) from ``since`` on."""
    ids, names = set(incidents), set(hosts)
    return [r for r in records
            if (r.evidence is not None and r.evidence.incident in ids)
            or ((r.host in names or r.node in names)
                and (since is None or r.when >= since))]


def report_actions(log: AuditLog, incidents: Iterable[str], hosts: Iterable[str],
                   since: float | None = None) -> list[AuditRecord]:
    """What a report lists of the trail (:func:`relevant`); an unreadable trail lists none
    (the report is still written)."""
    try:
        records = [r for r in log.records() if isinstance(r, AuditRecord)]
    except AuditError:
        return []
    return relevant(records, incidents, hosts, since)
