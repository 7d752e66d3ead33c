"""Outputs: text report, recordings, Prometheus exporter."""
