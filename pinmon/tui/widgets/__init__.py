"""Small widgets, one per file; each draws a ``ViewState`` and reads nothing else."""
