"""One exception tree: every error rigwatch raises on purpose is a ``RigwatchError`` with a title.

The console shows ``title`` and the message, and the CLI catches ``ConfigError`` once for an
exit code; an error class outside the tree would escape both as a traceback.  Private classes
(``_Wrong``, a validator's ``Bad``) are control flow inside one module and stay out.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from probes.errors import (
    ConfigError,
    DisconnectKind,
    InventoryError,
    ProblemsError,
    RigwatchError,
    TransportError,
)
from tui.settings import SettingsError

PACKAGES = ("probes", "tui", "widgets")
INTERNAL = frozenset({"Bad", "Refused"})
"""Public-looking names that never leave their module (inventory_values' validation signal;
the wire fast path's "let the checked path judge this line")."""


def _error_classes() -> list[type[BaseException]]:
    out: list[type[BaseException]] = []
    for top in PACKAGES:
        pkg = importlib.import_module(top)
        for info in pkgutil.walk_packages(pkg.__path__, f"{top}."):
            if info.name.startswith("probes.agent"):
                continue  # the host side is stdlib-only and raises nothing of ours
            mod = importlib.import_module(info.name)
            out += [c for _, c in inspect.getmembers(mod, inspect.isclass)
                    if issubclass(c, BaseException) and c.__module__ == info.name
                    and not c.__name__.startswith("_") and c.__name__ not in INTERNAL]
    return out


def test_every_public_error_is_a_rigwatch_error_with_its_own_title() -> None:
    found = _error_classes()
    names = {c.__name__ for c in found}
    assert {"RecordingError", "ReplayError", "CodecError", "HostlistError",
            "CommandError", "SettingsError", "InventoryError"} <= names
    assert [c.__qualname__ for c in found if not issubclass(c, RigwatchError)] == []
    plain = RigwatchError.title
    assert [c.__qualname__ for c in found if c.title == plain and c is not RigwatchError] == []


@pytest.mark.parametrize("name", ["CodecError", "HostlistError", "CommandError"])
def test_errors_callers_catch_as_value_error_still_are(name: str) -> None:
    (cls,) = [c for c in _error_classes() if c.__name__ == name]
    assert issubclass(cls, ValueError)


def test_settings_and_inventory_share_problems_but_are_not_each_other() -> None:
    assert issubclass(SettingsError, ProblemsError) and issubclass(InventoryError, ProblemsError)
    assert not issubclass(SettingsError, InventoryError)
    assert issubclass(ProblemsError, ConfigError)


def test_a_transport_error_says_why_the_stream_ended() -> None:
    assert TransportError("x").kind is DisconnectKind.DOWN
    assert {k.value for k in DisconnectKind} == {
        "unreachable", "auth-failed", "host-key-refused", "agent-failed", "stalled", "garbled",
        "down"}
    assert [k for k in DisconnectKind if k.refused] == [DisconnectKind.AUTH_FAILED,
                                                        DisconnectKind.HOST_KEY_REFUSED]
