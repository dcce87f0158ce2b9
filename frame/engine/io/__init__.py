"""The engine's I/O: byte sources (file, HTTP), the protobuf index, weight references, the HTTP weight cache.

Nothing here runs an op; the graph and the providers read a model through these modules.
"""
