"""The Xid catalog covers what Ampere, Hopper and Blackwell report, and judges it sensibly."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from probes.rules.xid_catalog import XID_CATALOG, Category, XidInfo, lookup
from probes.triage import Severity

REQUIRED = (13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120,
            121, 123, *range(136, 151), 154, 8, 44, 56, 57, 58, 59, 65, 66, 67)
"""Codes the data-centre catalog lists for A100/H100/B100/GB200, plus common older ones."""

CATEGORIES = set(typing.get_args(Category))


@pytest.mark.parametrize("code", REQUIRED)
def test_required_code_is_present_with_every_field(code: int) -> None:
    info = XID_CATALOG[code]
    assert info.code == code
    for name in ("name", "meaning", "action", "investigate"):
        assert getattr(info, name).strip(), name
    assert info.category in CATEGORIES
    assert isinstance(info.severity, Severity)
    assert lookup(code) is info


def test_every_entry_is_well_formed() -> None:
    assert len(XID_CATALOG) >= 150
    for code, info in XID_CATALOG.items():
        assert code == info.code
        assert info.category in CATEGORIES
        assert info.name and info.meaning and info.action and info.investigate


def test_entries_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        XID_CATALOG[79].name = "x"  # type: ignore[misc]


@pytest.mark.parametrize("code", [79, 48, 64, 74, 92, 95, 109, 119, 120, 140, 143, 145, 149])
def test_gpu_or_node_must_be_reset_is_critical(code: int) -> None:
    assert XID_CATALOG[code].severity is Severity.CRITICAL


@pytest.mark.parametrize("code", [13, 31, 43, 45, 94])
def test_application_side_codes_are_warnings(code: int) -> None:
    assert XID_CATALOG[code].severity is Severity.WARNING


def test_informational_codes_are_info() -> None:
    assert XID_CATALOG[121].severity is Severity.INFO
    assert XID_CATALOG[106].severity is Severity.INFO


@pytest.mark.parametrize(("code", "category"), [
    (13, "application"), (31, "application"), (48, "memory"), (63, "memory"), (74, "nvlink"),
    (79, "bus"), (119, "gsp"), (120, "gsp"), (145, "nvlink"), (54, "thermal-power")])
def test_categories(code: int, category: str) -> None:
    assert XID_CATALOG[code].category == category


def test_actions_name_the_catalog_bucket() -> None:
    assert "[RESTART_BM]" in XID_CATALOG[79].action
    assert "[RESET_GPU]" in XID_CATALOG[119].action
    assert "[WORKFLOW_XID_13]" in XID_CATALOG[13].investigate
    assert "[WORKFLOW_NVLINK5_ERR]" in XID_CATALOG[149].action


def test_unknown_code_gets_a_generic_entry() -> None:
    info = lookup(9999)
    assert isinstance(info, XidInfo)
    assert info.code == 9999
    assert info.name == "Xid 9999 (not in the catalog)"
    assert info.severity is Severity.WARNING
    assert info.category == "other"
    assert info.action and info.investigate
    assert 9999 not in XID_CATALOG


def test_lookup_never_raises_on_odd_codes() -> None:
    for code in (0, -1, 10**9):
        assert lookup(code).code == code
