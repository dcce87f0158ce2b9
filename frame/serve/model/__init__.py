"""``frame serve-model``: a read-only, range-capable HTTP server for a model folder on a NAS or desktop."""
