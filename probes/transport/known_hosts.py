"""Which known_hosts entries speak for a host: the trust decisions asyncssh leaves to us.

asyncssh verifies host keys itself, hashed entries (``|1|salt|hash``, HMAC-SHA1 of the
name, the Debian/Ubuntu default), patterns (``*``, ``?``, ``!negation``, ``[host]:port``,
CIDR), ``@revoked`` and ``@cert-authority`` included.  It has no ``accept-new``, though,
and its refusal does not say whether the host was unknown or its key changed.  Both
answers come from here, and they must never disagree with asyncssh: an entry that
asyncssh would verify against is an entry, so a host with one is never "new" (accepting a
key for it would be the MITM OpenSSH's accept-new refuses).  So each line is matched with
asyncssh's own matcher, one line at a time (which also gives the line numbers the
operator needs), with asyncssh's rule for ports: ``[host]:port`` entries first, plain host
entries only when no line names the port.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import asyncssh

PATTERN_CHARS = frozenset("*?!/")
"""A host field with any of these is a pattern (or CIDR): ``ssh-keygen -R`` leaves it."""


class Marker(str, Enum):
    """What a known_hosts line says about its key."""

    HOST = "host"
    """A trusted host key (no marker)."""
    REVOKED = "revoked"
    CERT_AUTHORITY = "cert-authority"


@dataclass(frozen=True)
class Entry:
    """One known_hosts line that matches the host."""

    line: int
    """1-based line number in the file."""
    marker: Marker
    key: asyncssh.SSHKey
    hashed: bool
    pattern: bool

    def where(self) -> str:
        """``line 3, hashed`` — how the operator finds it."""
        kind = ", hashed" if self.hashed else ", a pattern" if self.pattern else ""
        return f"line {self.line}{kind}"


@dataclass(frozen=True)
class Lookup:
    """Every entry of one known_hosts file that matches one host, as asyncssh would."""

    path: Path
    name: str
    """The host's known_hosts name: ``host``, or ``[host]:port`` when the port is not 22."""
    entries: tuple[Entry, ...]
    addr_name: str = ""
    """The same for the host's IP address when it was looked up too (asyncssh matches both)."""

    def of(self, marker: Marker) -> list[Entry]:
        """The matching entries with this marker, in file order."""
        return [e for e in self.entries if e.marker is marker]

    @property
    def known(self) -> bool:
        """The file vouches for this host (a key or an authority): it is never new."""
        return bool(self.of(Marker.HOST) or self.of(Marker.CERT_AUTHORITY))

    def revoked_entry(self, key: asyncssh.SSHKey) -> Entry | None:
        """The ``@revoked`` line that names this key, if any."""
        for e in self.of(Marker.REVOKED):
            if e.key.public_data == key.public_data:
                return e
        return None


def known_hosts_name(host: str, port: int) -> str:
    """The name known_hosts uses for a host: ``[host]:port`` unless the port is 22."""
    return host if port == 22 else f"[{host}]:{port}"


def _parse(text: str) -> asyncssh.SSHKnownHosts | None:
    try:
        return asyncssh.import_known_hosts(text)
    except (ValueError, asyncssh.KeyImportError):
        return None  # a line asyncssh cannot read is one it does not verify against


def _entry(number: int, text: str, host_keys: Sequence[asyncssh.SSHKey],
           ca_keys: Sequence[asyncssh.SSHKey], revoked: Sequence[asyncssh.SSHKey],
           *_x509: object) -> Entry | None:
    marker, keys = ((Marker.HOST, host_keys) if host_keys else
                    (Marker.CERT_AUTHORITY, ca_keys) if ca_keys else (Marker.REVOKED, revoked))
    if not keys:
        return None
    words = text.split()
    field = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    hashed = field.startswith("|")
    return Entry(number, marker, keys[0], hashed,
                 not hashed and any(c in PATTERN_CHARS for c in field))


def lookup(path: Path, host: str, port: int, addr: str = "") -> Lookup:
    """The entries of ``path`` that match ``host`` (and ``addr``, its IP when known).

    A missing or unreadable file has no entries.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
    parsed = [(n, line, kh) for n, line in lines
              if line and not line.startswith("#") and (kh := _parse(line)) is not None]

    def matches(*names: str) -> list[Entry]:
        # One name at a time as the host argument ("[addr]:port" is no IP for asyncssh).
        found = (_entry(n, line, *kh.match(name, "", None)) for n, line, kh in parsed
                 for name in names if name)
        seen: dict[int, Entry] = {}
        for e in found:
            if e is not None:
                seen.setdefault(e.line, e)
        return sorted(seen.values(), key=lambda e: e.line)

    entries: list[Entry] = []
    if port != 22:  # asyncssh: the ported name first, the plain one only when nothing names it
        entries = matches(f"[{host}]:{port}", f"[{addr}]:{port}" if addr else "")
    if not entries:
        entries = matches(host, addr)
    return Lookup(path, known_hosts_name(host, port), tuple(entries),
                  known_hosts_name(addr, port) if addr and addr != host else "")


def refusal(look: Lookup, port: int, host: str, reason: str = "",
            presented: asyncssh.SSHKey | None = None) -> str:
    """Why a host key was refused, and the one fix that is safe, for the operator.

    ``reason`` is asyncssh's own text ("Host key is revoked"), ``presented`` the key the
    server offered when we know it.  Never "no host key" when the file has an entry.
    """
    name, path = look.name, look.path
    revoked = look.revoked_entry(presented) if presented is not None else None
    if revoked is not None or "revoked" in reason.lower():
        where = f" ({revoked.where()})" if revoked else ""
        return (f"host key REVOKED for {name}: the key it offers is marked @revoked in "
                f"{path}{where}. Refused; it is never recorded. Get the host's new key from "
                "its owner.")
    trusted = look.of(Marker.HOST)
    if trusted:
        lines = "; ".join(e.where() for e in trusted)
        msg = (f"host key changed for {name} (REMOTE HOST IDENTIFICATION HAS CHANGED): the key "
               f"it offers is not the one in {path} ({lines}); someone may be intercepting, "
               f"or the host was reinstalled. Refused. If the change is expected: "
               f"ssh-keygen -R '{name}' -f {path}")
        if look.addr_name:
            msg += f" and ssh-keygen -R '{look.addr_name}' -f {path}"
        patterns = [str(e.line) for e in trusted if e.pattern]
        if patterns:
            msg += (f"; and edit line {', '.join(patterns)} by hand (a pattern, which "
                    "ssh-keygen -R does not remove)")
        return msg
    authorities = look.of(Marker.CERT_AUTHORITY)
    if authorities:
        lines = "; ".join(e.where() for e in authorities)
        return (f"host key refused for {name}: {path} trusts only a @cert-authority for it "
                f"({lines}) and the host offered no certificate that authority signed. "
                "Refused; a plain key is not recorded for a host under an authority.")
    return (f"no host key for {name} in {path}. Verify it, then: "
            f"ssh-keyscan -p {port} {host} >> {path}; or set host_key_checking: accept-new")
