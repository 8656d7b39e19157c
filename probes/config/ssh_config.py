"""What ``~/.ssh/config`` adds to a host with ``ssh_config: true``, as asyncssh will read it.

The transport hands the config to asyncssh at connect time; this module reads it the
same way (``asyncssh.config.SSHClientConfig``) ahead of time, so ``rigwatch
check-inventory`` can show the address, user, port and jumps a host will really use.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
from pathlib import Path

from probes.config.fleet import HostSpec, SshOptions
from probes.errors import ConfigError


def resolve_ssh_config(spec: HostSpec, config_path: str | Path | None = None) -> SshOptions:
    """The host's SSH options with the ssh config's HostName, User, Port, ProxyJump and
    IdentityFile filled in where the inventory leaves them unset (the inventory wins,
    as it does when asyncssh connects).

    Args:
        spec: the host; returned unchanged unless ``spec.ssh.ssh_config`` is on.
        config_path: the config file; default ``~/.ssh/config``. A missing file adds nothing.

    Raises:
        ConfigError: the config file cannot be parsed (asyncssh's message, with its line).
    """
    o = spec.ssh
    path = Path(os.path.expanduser(config_path or "~/.ssh/config"))
    if not o.ssh_config or not os.access(path, os.R_OK):
        return o
    from asyncssh.config import ConfigParseError, SSHClientConfig

    try:
        local_user = getpass.getuser()
    except (KeyError, OSError):
        local_user = ""
    host = o.address or spec.name
    try:
        cfg = SSHClientConfig.load(None, [path], False, False, False, local_user,
                                   o.user or (), host, o.port or ())
    except (ConfigParseError, OSError) as exc:
        raise ConfigError(f"cannot read ssh config: {exc}") from None
    proxy = cfg.get("ProxyJump")
    hops = tuple(h.strip() for h in str(proxy).split(",") if h.strip()) \
        if proxy and str(proxy).lower() != "none" else ()
    keys = cfg.get("IdentityFile")
    identity = str(keys[0]) if isinstance(keys, (list, tuple)) and keys else None
    port = cfg.get("Port")
    return dataclasses.replace(
        o,
        address=str(cfg.get("Hostname", host)),
        user=o.user or (str(cfg.get("User")) if cfg.get("User") else None),
        port=o.port or (int(port) if isinstance(port, int) else None),
        jump=o.jump or hops,
        identity=o.identity or identity)
