"""Moved to :mod:`lethebench.provenance` (one layer down, so the analysis' studies can record it too).

Only ``experiments/runner.py`` still imports it from here; it is being refactored and switches to
``lethebench.provenance`` with it, after which this module goes.
"""

from lethebench.provenance import git_info, hardware, load_average, package_versions, peak_rss_mb

__all__ = ["git_info", "hardware", "load_average", "package_versions", "peak_rss_mb"]
