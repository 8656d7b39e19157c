"""Judgements: samples, history and rules become findings and verdicts (detectors,
incident review, alerts, preflight). Every verdict a screen shows is decided here."""
