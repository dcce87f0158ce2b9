"""A built graph's weights: what it declares (``weight_specs``) and, for in-memory use, filling them in.

The importer streams each tensor from the checkpoint to the component's external-data file itself;
``attach_weights`` is for tests and small models (the tiny reference models, TAESD), where a
whole state dict fits in memory and onnxruntime or the engine should run the graph at once.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from frame.errors import FrameError


def weight_specs(model: onnx.ModelProto) -> list[tuple[str, tuple[int, ...]]]:
    """(state-dict key, shape) of every float32 weight the graph reads, in graph order."""
    return [(t.name, tuple(int(d) for d in t.dims)) for t in model.graph.initializer]


def attach_weights(model: onnx.ModelProto, weights: Mapping[str, np.ndarray], strict: bool = True
                   ) -> onnx.ModelProto:
    """A copy of ``model`` with every declared weight's data from ``weights`` (float32, embedded).

    Each key must be there with the declared shape; ``strict`` also refuses keys the graph does not
    read (a state dict with more in it means a config that does not match the checkpoint).
    """
    specs = dict(weight_specs(model))
    missing = [k for k in specs if k not in weights]
    if missing:
        raise FrameError(f"weights: {len(missing)} tensor(s) the graph needs are missing, e.g. {missing[0]}")
    if strict:
        unused = sorted(set(weights) - set(specs))
        if unused:
            raise FrameError(f"weights: {len(unused)} tensor(s) the graph does not read, e.g. {unused[0]}")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.initializer[:]
    for name, shape in specs.items():
        array = np.asarray(weights[name])
        if tuple(array.shape) != shape:
            raise FrameError(f"weights: {name} has shape {tuple(array.shape)}, the graph expects {shape}")
        out.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(array, np.float32), name))
    return out
