"""The baselines Lethe is compared against. They may reuse building blocks of ``lethe``
(its embedder, its BM25) but never import ``experiments`` or ``analysis``."""
