"""Dumb reactive panels: each takes already-computed data and only formats it."""
