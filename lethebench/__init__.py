"""LetheBench: the data model, dataset loaders/generator, chunking and dataset cards.

Knows nothing about methods; see DESIGN.md.
"""
