"""The host agent, as a package (one module for now)."""

from __future__ import annotations

from .main import *  # noqa: F403
from .main import AGENT_VERSION, PROTOCOL_VERSION, Simulator, parse_scenarios  # noqa: F401
