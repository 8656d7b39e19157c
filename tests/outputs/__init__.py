"""Tests of the outputs stage (issue #37 item 7: tests/ mirrors the house)."""
