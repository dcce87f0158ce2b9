"""The engine's I/O: byte sources (file, HTTP), the protobuf index, weight references, the HTTP weight cache,
and the readers of files frame did not write (``safetensors``, ``torch_pickle``), which treat every file
as hostile.

Nothing here runs an op; the graph and the providers read a model through these modules.
"""
