"""Analysis: metrics, statistics, tables, figures and the report. Reads results folders and
processed datasets only; never re-runs retrieval."""
