"""Tests of the e2e stage (issue #37 item 7: tests/ mirrors the house)."""
