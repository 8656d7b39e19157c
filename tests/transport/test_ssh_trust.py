"""Host key trust without holes: hashed, pattern, negated, revoked and CA entries.

Review finding 3: with ``accept-new``, a changed key behind a hashed (``ssh-keygen -H``,
the Debian/Ubuntu default) or pattern entry was recorded and trusted, a ``@revoked`` key
was appended before the refusal, and strict mode said "no host key" for all of them.
Each case runs asyncssh's server on 127.0.0.1 presenting a key the file does not hold.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import asyncssh
import pytest

from probes.config.fleet import HostKeyChecking
from probes.transport.known_hosts import Marker, lookup
from probes.wire.events import Connected, Disconnected, SessionItem
from probes.wire.samples import HostSample
from tests.transport.test_ssh_faults import FAST, FaultServer, canned, replay, run_for, server

__all__ = ["canned", "server"]  # fixtures used by name

SLOW_RETRY = replace(FAST, backoff_cap_s=30.0)
BOTH = [HostKeyChecking.STRICT, HostKeyChecking.ACCEPT_NEW]


def _pub(key: asyncssh.SSHKey) -> str:
    return key.export_public_key().decode().strip()


def _hashed(path: Path, line: str) -> None:
    """Write ``line`` and hash it with OpenSSH's own ``ssh-keygen -H``."""
    path.write_text(line + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    Path(str(path) + ".old").unlink()
    assert path.read_text().startswith("|1|")


Writer = Callable[[Path, int, asyncssh.SSHKey], None]
CHANGED: dict[str, Writer] = {
    "hashed": lambda p, port, old: _hashed(p, f"[127.0.0.1]:{port} {_pub(old)}"),
    "question-mark": lambda p, port, old: p.write_text(f"[127.0.0.?]:{port} {_pub(old)}\n"),
    "star": lambda p, port, old: p.write_text(f"* {_pub(old)}\n"),
    "list-with-negation": lambda p, port, old: p.write_text(
        f"other.example,[127.0.0.*]:{port},![127.0.0.2]:{port} {_pub(old)}\n"),
    "plain-among-others": lambda p, port, old: p.write_text(
        f"# a comment\nbox.example {_pub(asyncssh.generate_private_key('ssh-ed25519'))}\n"
        f"[127.0.0.1]:{port} {_pub(old)}\n"),
}


async def _refused(server: FaultServer, checking: HostKeyChecking) -> Disconnected:
    """Run the session briefly: it must refuse, never connect, and leave the file alone."""
    before = server.known_hosts.read_text()
    items = await run_for(server.spec(host_key_checking=checking), 3, SLOW_RETRY,
                          until=lambda it: any(isinstance(i, Disconnected) for i in it))
    assert not any(isinstance(i, (Connected, HostSample)) for i in items)
    assert server.known_hosts.read_text() == before, "nothing may be recorded"
    [drop] = [i for i in items if isinstance(i, Disconnected)]
    assert drop.kind == "host-key-refused"
    assert "no host key" not in drop.reason and "ssh-keyscan" not in drop.reason
    return drop


@pytest.mark.parametrize("checking", BOTH)
@pytest.mark.parametrize("form", sorted(CHANGED))
async def test_a_changed_key_behind_any_entry_is_refused_as_changed(
        server: FaultServer, canned: list[bytes], form: str, checking: HostKeyChecking) -> None:
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    CHANGED[form](server.known_hosts, server.port,
                  asyncssh.generate_private_key("ssh-ed25519"))
    drop = await _refused(server, checking)
    assert drop.reason.startswith(f"host key changed for [127.0.0.1]:{server.port}")
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in drop.reason
    assert f"ssh-keygen -R '[127.0.0.1]:{server.port}' -f {server.known_hosts}" in drop.reason
    if form in ("question-mark", "star", "list-with-negation"):
        assert "edit line 1 by hand" in drop.reason
    if form == "hashed":
        assert "line 1, hashed" in drop.reason


async def test_ssh_keygen_R_removes_the_hashed_entry_the_message_names(
        server: FaultServer, canned: list[bytes]) -> None:
    """The fix the message gives works on the file as written: then accept-new records."""
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    CHANGED["hashed"](server.known_hosts, server.port,
                      asyncssh.generate_private_key("ssh-ed25519"))
    drop = await _refused(server, HostKeyChecking.ACCEPT_NEW)
    fix = drop.reason.split("If the change is expected: ")[1]
    subprocess.run(fix, shell=True, check=True, capture_output=True)
    items = await run_for(server.spec(host_key_checking=HostKeyChecking.ACCEPT_NEW), 5,
                          until=lambda it: any(isinstance(i, HostSample) for i in it))
    assert any(isinstance(i, HostSample) for i in items)
    assert server.known_hosts.read_text().strip().endswith(_pub(server.host_key))


async def test_a_negation_that_excludes_the_host_leaves_it_new(
        server: FaultServer, canned: list[bytes]) -> None:
    """``*,![127.0.0.1]:PORT,!127.0.0.1`` does not speak for this host: accept-new records.

    Both names are negated: asyncssh, when no line names ``[host]:port``, falls back to
    lines for the plain host (``*`` here), and the lookup follows asyncssh.
    """
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    old = asyncssh.generate_private_key("ssh-ed25519")
    server.known_hosts.write_text(f"*,![127.0.0.1]:{server.port},!127.0.0.1 {_pub(old)}\n")
    items = await run_for(server.spec(host_key_checking=HostKeyChecking.ACCEPT_NEW), 5,
                          until=lambda it: any(isinstance(i, HostSample) for i in it))
    assert any(isinstance(i, HostSample) for i in items)
    assert len(server.known_hosts.read_text().splitlines()) == 2


@pytest.mark.parametrize("checking", BOTH)
async def test_a_revoked_key_is_refused_and_never_appended(
        server: FaultServer, canned: list[bytes], checking: HostKeyChecking) -> None:
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    server.known_hosts.write_text(f"@revoked * {_pub(server.host_key)}\n")
    drop = await _refused(server, checking)
    assert drop.reason.startswith(f"host key REVOKED for [127.0.0.1]:{server.port}")
    assert len(server.known_hosts.read_text().splitlines()) == 1


@pytest.mark.parametrize("checking", BOTH)
async def test_a_plain_key_under_a_cert_authority_is_refused_clearly(
        server: FaultServer, canned: list[bytes], checking: HostKeyChecking) -> None:
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    ca = asyncssh.generate_private_key("ssh-ed25519")
    server.known_hosts.write_text(f"@cert-authority [127.0.0.1]:* {_pub(ca)}\n")
    drop = await _refused(server, checking)
    assert "@cert-authority" in drop.reason and "(line 1, a pattern)" in drop.reason


async def test_a_host_certificate_from_a_trusted_authority_is_honoured(
        server: FaultServer, canned: list[bytes]) -> None:
    ca = asyncssh.generate_private_key("ssh-ed25519")
    key = server.host_key
    cert = ca.generate_host_certificate(key, "rig", principals=["127.0.0.1"])
    server.host_key = (key, cert)  # type: ignore[assignment]  # asyncssh takes a key pair
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    server.known_hosts.write_text(f"@cert-authority [127.0.0.1]:* {_pub(ca)}\n")
    items = await run_for(server.spec(), 5,
                          until=lambda it: any(isinstance(i, HostSample) for i in it))
    assert any(isinstance(i, HostSample) for i in items)


@pytest.mark.parametrize("checking", BOTH)
async def test_every_proxyjump_hop_is_held_to_the_same_rules(
        server: FaultServer, canned: list[bytes], checking: HostKeyChecking) -> None:
    """The bastion's own key changed behind a hashed entry: refused at the hop."""
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    CHANGED["hashed"](server.known_hosts, server.port,
                      asyncssh.generate_private_key("ssh-ed25519"))
    spec = server.spec(host_key_checking=checking, jump=(f"ops@127.0.0.1:{server.port}",),
                       address="10.255.255.1", port=22)
    before = server.known_hosts.read_text()
    items: list[SessionItem] = await run_for(
        spec, 3, SLOW_RETRY, until=lambda it: any(isinstance(i, Disconnected) for i in it))
    [drop] = [i for i in items if isinstance(i, Disconnected)]
    assert drop.kind == "host-key-refused"
    assert drop.reason.startswith(f"host key changed for [127.0.0.1]:{server.port}")
    assert server.known_hosts.read_text() == before


def test_lookup_reads_each_form_as_asyncssh_does(tmp_path: Path) -> None:
    old, other = (asyncssh.generate_private_key("ssh-ed25519") for _ in range(2))
    path = tmp_path / "known_hosts"
    _hashed(path, f"[10.0.0.5]:2222 {_pub(old)}\nbox {_pub(other)}")
    path.write_text(path.read_text() + f"@revoked * {_pub(other)}\n!box,b* {_pub(old)}\n"
                    "garbage line\n")
    look = lookup(path, "10.0.0.5", 2222)
    assert [(e.line, e.marker, e.hashed) for e in look.entries] == [
        (1, Marker.HOST, True), (3, Marker.REVOKED, False)]
    assert look.known and look.revoked_entry(other) is not None
    assert look.revoked_entry(old) is None
    box = lookup(path, "box", 22)  # the negation on line 4 leaves only the hashed line 2
    assert [e.line for e in box.of(Marker.HOST)] == [2]
    assert [e.line for e in lookup(path, "bench", 22).of(Marker.HOST)] == [4]
    assert not lookup(tmp_path / "missing", "box", 22).entries


async def test_an_entry_for_the_hosts_address_counts_when_it_is_named(
        server: FaultServer, canned: list[bytes]) -> None:
    """asyncssh verifies against entries for the name and for the address it dialled; so
    accept-new must not record a key for ``[localhost]:PORT`` while ``[127.0.0.1]:PORT``
    holds another (asyncssh would then trust both, the attacker's included)."""
    server.handler = replay(canned, then="silent")
    await server.start(trust=False)
    CHANGED["hashed"](server.known_hosts, server.port,
                      asyncssh.generate_private_key("ssh-ed25519"))
    before = server.known_hosts.read_text()
    spec = server.spec(host_key_checking=HostKeyChecking.ACCEPT_NEW, address="localhost")
    items = await run_for(spec, 3, SLOW_RETRY,
                          until=lambda it: any(isinstance(i, Disconnected) for i in it))
    assert not any(isinstance(i, (Connected, HostSample)) for i in items)
    assert server.known_hosts.read_text() == before
    [drop] = [i for i in items if isinstance(i, Disconnected)]
    assert drop.kind == "host-key-refused"
    assert drop.reason.startswith(f"host key changed for [localhost]:{server.port}")
    assert drop.reason.endswith(f"ssh-keygen -R '[127.0.0.1]:{server.port}' -f "
                                f"{server.known_hosts}")
