"""Adapters at the edges: Kubernetes, PD, MySQL protocol, metrics."""
