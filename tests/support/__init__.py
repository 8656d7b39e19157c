"""Test helpers shared by several test files: fake fleets, widget apps, sshd fixtures."""
