"""The advisor: pure rules over snapshots that return findings; no I/O."""
