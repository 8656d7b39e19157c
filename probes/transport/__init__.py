"""Transports: how the agent's source reaches a host and its stream comes back."""
