"""OnnxStream's model format: a folder of raw ``.bin`` weights described by ``model.txt``.

``load_model`` takes such a folder (or its model.txt, local or http(s)) like an ONNX file: the reader
here builds the same graph and WeightRefs the ONNX loader builds, and each ``.bin`` streams through
the usual providers. Modules: ``text`` (the grammar), ``names`` (name escaping), ``build`` (graph),
``refs`` (channels-last conv weights), ``dtypes`` (integer values), ``activations`` (W8A8 range
data), ``source`` (folders, URLs, file checks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.engine.onnxstream.source import OnnxStreamSource, is_onnxstream_source, read_structure

__all__ = ["OnnxStreamSource", "is_onnxstream_source", "read_structure"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "OnnxStreamSource": "frame.engine.onnxstream.source",
    "is_onnxstream_source": "frame.engine.onnxstream.source",
    "read_structure": "frame.engine.onnxstream.source",
})
