"""What crosses the link from a host's agent: typed samples, the NDJSON protocol that carries
them (``PROTOCOL.md``), and the items a session adds (connects, disconnects)."""
