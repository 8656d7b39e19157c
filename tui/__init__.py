"""The rigwatch console: app factory, screens, workers, CLI."""
