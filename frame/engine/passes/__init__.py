"""The engine's load-time graph passes: fusions, reorderings and weight-decoding rewrites.

Each module matches a pattern in the bound node list and replaces it (``model.py`` runs them in order).
"""
