"""Lethe: the retrieval system under study, plus the shared building blocks (models, caches).

This package must not import dataset loaders, the runner or the analysis (see DESIGN.md).
"""

__version__ = "0.1.0"

from lethe.core.tool_homes import keep_tools_out_of_home

keep_tools_out_of_home()  # before any tool that would write under $HOME is imported
