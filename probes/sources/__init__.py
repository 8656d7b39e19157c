"""Sources: the fleet-level seam.  A source (``base.Backend``) emits every host's session
items; the console runs it live, ``snapshot`` and ``preflight`` read it once, the recorder
wraps it.  Agents in process (``agents``) or in collectors (``collectors``), a Prometheus
(``prometheus/``), a recording (``replay``); ``registry`` builds one from the command line.
One host's stream (ssh, local, the session) is ``probes.transport``'s."""
