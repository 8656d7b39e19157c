"""Issue 38, the collector's memory: an identity file's key pairs are loaded once for all
the connections that use it (asyncssh read and parsed the file again for each: 2.7 KB a
host), each connection getting its own copy of the pairs (asyncssh sets the signature
algorithm it chose with a server on the pair), and loaded again when the files change.
What a connection authenticates with is what asyncssh loaded from the path itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from probes.config.fleet import HostSpec, SshOptions
from probes.transport import client_keys as ck
from probes.transport.ssh import SshTransport


def _facts(pairs: Any) -> list[tuple[Any, ...]]:
    return [(p.algorithm, p.sig_algorithm, tuple(p.sig_algorithms), p.public_data,
             p.has_cert, p.get_comment_bytes(), p.get_agent_private_key())
            for p in pairs]


def _asyncssh_own(keys: list[Any]) -> list[Any]:
    """The pairs asyncssh's connection options hold for ``client_keys`` (no ssh_config)."""
    opts = asyncssh.SSHClientConnectionOptions(client_keys=keys, known_hosts=None, config=None)
    assert opts.client_keys is not None
    return list(opts.client_keys)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ck._LOADED.clear()


@pytest.mark.parametrize("alg", ["ssh-ed25519", "ssh-rsa"])
def test_the_pairs_are_the_ones_asyncssh_loads_and_loaded_once(tmp_path: Path, alg: str) -> None:
    path = tmp_path / "id"
    key = asyncssh.generate_private_key(alg, comment="me@there")
    key.write_private_key(path)
    key.write_public_key(str(path) + ".pub")
    if alg == "ssh-rsa":  # with a certificate beside it: a pair with it, one without
        ca = asyncssh.generate_private_key("ssh-ed25519")
        ca.generate_user_certificate(key, "me").write_certificate(str(path) + "-cert.pub")
    first, second = ck.client_keys(str(path)), ck.client_keys(str(path))
    want = _asyncssh_own([str(path)])
    assert _facts(first) == _facts(want) == _facts(_asyncssh_own(second))
    assert len(first) == (2 if alg == "ssh-rsa" else 1)
    for a, b in zip(first, second, strict=True):
        assert a is not b and a._key is b._key  # the parsed key is shared, the pair is not
    if alg == "ssh-rsa":  # a pair's chosen signature algorithm stays its connection's
        plain = next(p for p in first if not p.has_cert)
        other = next(p for p in second if not p.has_cert)
        plain.set_sig_algorithm(b"ssh-rsa")
        other.set_sig_algorithm(b"rsa-sha2-512")
        assert plain.algorithm == b"ssh-rsa" and other.algorithm == b"rsa-sha2-512"
        assert plain.sign(b"x").startswith(b"\0\0\0\x07ssh-rsa")


def test_a_changed_file_is_loaded_again(tmp_path: Path) -> None:
    path = tmp_path / "id"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(path)
    old = ck.client_keys(str(path))
    assert ck.client_keys(str(path))[0]._key is old[0]._key
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    new = ck.client_keys(str(path))
    assert new[0].public_data != old[0].public_data
    assert _facts(new) == _facts(_asyncssh_own([str(path)]))


def test_what_asyncssh_refuses_is_left_to_it(tmp_path: Path) -> None:
    """A missing file, an encrypted key (no passphrase is given), a file without a key: the
    path goes to asyncssh, which raises at connect what it raised before."""
    missing = tmp_path / "none"
    assert ck.client_keys(str(missing)) == [str(missing)]
    locked = tmp_path / "locked"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(locked, "pkcs8-pem",
                                                                   passphrase="pw")
    assert ck.client_keys(str(locked)) == [str(locked)]
    junk = tmp_path / "junk"
    junk.write_text("not a key\n")
    assert ck.client_keys(str(junk)) == [str(junk)]
    for bad in (missing, locked, junk):
        with pytest.raises((OSError, asyncssh.KeyImportError, ValueError)):
            _asyncssh_own([str(bad)])
    assert ck._LOADED == {}


@pytest.mark.parametrize("ssh_config", [False, True])
def test_the_transport_hands_asyncssh_the_loaded_pairs(tmp_path: Path, ssh_config: bool) -> None:
    """Without ssh_config the connection gets the shared pairs; with it, the path (the user's
    config may say IdentitiesOnly or a CertificateFile, which asyncssh applies to it)."""
    path = tmp_path / "id"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(path)
    ssh = SshOptions(address="127.0.0.1", user="root", identity=str(path),
                     known_hosts=str(tmp_path / "known_hosts"), ssh_config=ssh_config)
    t = SshTransport(HostSpec(name="h", transport="ssh", ssh=ssh), [])
    keys = t._options("root")["client_keys"]
    if ssh_config:
        assert keys == [str(path)]
    else:
        assert _facts(keys) == _facts(_asyncssh_own([str(path)]))
        assert keys[0]._key is t._options("root")["client_keys"][0]._key
