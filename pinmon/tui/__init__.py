"""The terminal app: renders snapshots, findings and probe results; it never reads the machine itself.

``view/`` holds what the app shows, without Textual; ``widgets/`` and ``screens/`` draw it, and the
modules here run the app (its layout, keys and workers)."""
