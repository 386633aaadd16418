"""Loaders that turn upstream dataset files into the data model (:class:`lethebench.schema.Dataset`)."""
