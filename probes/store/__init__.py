"""Recordings: the SQLite recorder, its reader and codec, and replay through the same
screens."""
