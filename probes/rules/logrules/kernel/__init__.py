"""Kernel-log rules (the ``syslog`` step, and PCIe link lines for the ``gpu`` step)."""

from probes.rules.logrules.kernel.rules import scan

__all__ = ["scan"]
