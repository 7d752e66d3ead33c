"""The terminal app: renders snapshots, findings and probe results; it never reads the machine itself."""
