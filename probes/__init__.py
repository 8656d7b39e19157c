"""The headless core of rigwatch: agent, transports, wire protocol, samples, findings.

Nothing here imports Textual or Rich (``tests/house/test_import_hygiene.py`` enforces it),
so scripts, ``rigwatch snapshot`` and ``rigwatch explain`` run without a terminal.
Data flows one way, and each stage may import only what its line names
(``tests/house/test_layers.py`` holds the exact table)::

    stage        holds                                              may import
    agent        host side, shipped as source; stdlib only          nothing of ours
    errors       the RigwatchError tree, DisconnectKind, Problem    nothing of ours
    triage       triage steps, severities, finding Codes            nothing of ours
    wire         samples, the line protocol, session events         errors
    config       inventory, host lists, ssh_config                  errors, agent, wire
    transport    local and SSH transports, sessions, fleet backend  errors, agent, wire, config
    rules        text parsers, log rules, Xid catalog (pure)        errors, triage, wire
    history      per-host time series                               wire
    analysis     findings, detectors, incident, alerts, preflight   the above but transport
    fleet_state  the fleet as the console sees it                   analysis and the above
    store        recording, replay, codec                           wire, config, transport,
                                                                    analysis
    outputs      export, metrics, report, manifest, snapshot        every stage above
    explain      the ``rigwatch explain`` command                   errors, triage, rules
"""

import warnings as _warnings

# Recent cryptography releases warn, at import, that DSA is deprecated wherever asyncssh
# names its DSA types; on a console's stderr that reads as a fault, and a command's output
# is data.  rigwatch offers no DSA keys of its own, so only asyncssh's warning is silenced.
_warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")
