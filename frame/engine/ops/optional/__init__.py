"""Kernels for ops no frame model has: recurrent layers, control flow, dynamic quantisation, selection.

Third-party models (``frame engine``, the voice-activity, OCR and detection models from Python
wheels) use them; SD 1.5 / SDXL graphs, frame's converters and the OnnxStream importer never
produce them. Nothing imports this package as a whole: ``frame.engine.ops.lookup`` imports one of its
modules the first time a graph's node asks for an op it provides (``OPTIONAL_MODULES``), so a
render worker never loads them. The modules register their kernels exactly as the core ones do.
"""
