"""The graph under construction: nodes, weight declarations and small constants, with unique names.

A ``GraphBuilder`` is what every layer function in this package writes into. Weights are declared by
their state-dict key and shape only (structure, no data): the importer streams the data in later, one
tensor at a time, so a builder never holds a weight. Small constants (shape targets, scales, the ones
and zeros of InstanceNormalization) are ``Constant`` nodes, not initializers, so the initializers are
exactly the checkpoint's tensors and ``weight_specs`` needs no filter. The engine's constant folding
makes the Constant nodes inline values at load, which is also what its fusion passes read their
scalars from (``frame.engine.passes.gelu``: "the scalars must be inline constants").

Opset 17: the lowest with ``LayerNormalization`` (one node instead of seven, for onnxruntime and for
the engine) and below ``GroupNormalization`` (18), which the engine's GroupNorm → SiLU → Conv fusion
does not read; GroupNorm is written as exporters write it (``norm_conv``'s pattern).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
FLOAT = TensorProto.FLOAT


class GraphBuilder:
    """Collects nodes, declared weights and graph inputs/outputs; ``model()`` makes the ModelProto."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.weights: dict[str, tuple[int, ...]] = {}
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._used: set[str] = set()
        self._constants: dict[tuple, str] = {}

    # ------------------------------------------------------------------ names, inputs, outputs
    def fresh(self, hint: str) -> str:
        """A value or node name not used yet, derived from ``hint``."""
        name, k = hint, 1
        while name in self._used:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    def input(self, name: str, elem_type: int, shape: Sequence[int | str]) -> str:
        self._used.add(name)
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(self, value: str, name: str, elem_type: int, shape: Sequence[int | str]) -> None:
        """Expose ``value`` as graph output ``name`` (an Identity when the names differ)."""
        if value != name:
            self._used.add(name)
            self.nodes.append(helper.make_node("Identity", [value], [name], name=f"{name}/identity"))
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    # ------------------------------------------------------------------ weights and constants
    def weight(self, key: str, shape: Sequence[int]) -> str:
        """Declare the float32 weight ``key`` (a state-dict key) of ``shape``; returns its name."""
        shape = tuple(int(d) for d in shape)
        known = self.weights.get(key)
        if known is not None and known != shape:
            raise ValueError(f"weight {key} declared twice with shapes {known} and {shape}")
        if key in self._used and known is None:
            raise ValueError(f"weight {key} clashes with a value of the same name")
        self.weights[key] = shape
        self._used.add(key)
        return key

    def const(self, value: np.ndarray | Sequence | float | int, dtype: type = np.float32, hint: str = "const") -> str:
        """A ``Constant`` node holding ``value`` (deduplicated by value)."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        found = self._constants.get(key)
        if found is not None:
            return found
        name = self.fresh(hint)
        self.nodes.append(helper.make_node("Constant", [], [name], name=f"{name}/constant",
                                           value=numpy_helper.from_array(array, name)))
        self._constants[key] = name
        return name

    def ints(self, values: Sequence[int], hint: str = "shape") -> str:
        return self.const(list(values), np.int64, hint)

    # ------------------------------------------------------------------ nodes
    def op(self, op_type: str, inputs: Sequence[str], hint: str, outputs: int = 1, **attrs) -> str | list[str]:
        """Append one node; returns its output name (a list when ``outputs`` > 1)."""
        names = [self.fresh(hint if outputs == 1 else f"{hint}.{i}") for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=self.fresh(f"{hint}/{op_type}"),
                                           **attrs))
        return names[0] if outputs == 1 else names

    # ------------------------------------------------------------------ the result
    def model(self, doc: str = "") -> onnx.ModelProto:
        """The ModelProto: weights as data-less float32 initializers (``weights.attach_weights`` fills
        them for in-memory use; the importer writes them as external data)."""
        initializers = []
        for key, shape in self.weights.items():
            tensor = TensorProto()
            tensor.name, tensor.data_type = key, FLOAT
            tensor.dims.extend(shape)
            initializers.append(tensor)
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, initializers, doc_string=doc)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="frame.convert.graphs")
        model.ir_version = 8  # opset 17's IR: onnxruntime releases of the last years all read it
        return model
