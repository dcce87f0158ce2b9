"""Model conversion: ``frame model convert`` writes fp16 or 8-bit copies of ONNX models, streaming.

``files`` (one file or a diffusers folder, atomically), ``policy`` (which initializer becomes what),
``quantize`` (the 8-bit scheme), ``rewrite`` (graph edits, tensor by tensor), ``storage`` (chunked reads,
external-data writes), ``progress`` (the bar).
"""
