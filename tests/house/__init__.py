"""Tests of the house stage (issue #37 item 7: tests/ mirrors the house)."""
