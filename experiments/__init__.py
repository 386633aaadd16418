"""Experiments: Hydra entry points, the runner, caches, results folders and provenance."""
