"""The console's screens: fleet overview, one host, help."""
