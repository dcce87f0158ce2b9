"""Can a model exported with a fixed input size run at another size? Answered without running it.

A VAE decoder exported with a static input (say 1×4×64×64) declares that size, but most of its ops
work at any size: convs, norms, resizes by a scale. It can be decoded in 32×32 tiles, which is what
keeps a 512×512 render inside a Pi's memory, as long as no op *bakes* the size in: a Reshape to a
constant ``[1, 512, 4096]`` (the mid-block attention of most static exports), a Resize to constant
``sizes``, an Expand to a constant shape. ``probe`` answers by ONNX shape inference at the new size:
the structure (no weights are read, only small constant tensors) with the input's spatial dims
replaced, then every Reshape whose element count no longer matches its constant target is a
baked size, and the output must come out at the new size times the model's scale factor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.weights import WeightRef
from frame.engine.model import read_structure
from frame.engine.providers.prefetch import NoCache

SMALL_BYTES = 4096  # constant tensors read back for shape inference (shapes, axes, scales)


@dataclass
class ProbeResult:
    """``ok``: the model computes an output of the expected size at the probed input size.
    ``baked``: nodes whose constants fix the declared size (one line each)."""

    declared: tuple[int, ...] | None
    probed: tuple[int, int]
    ok: bool
    baked: list[str] = field(default_factory=list)
    output_shape: tuple | None = None


def tensor_dims(value: onnx.ValueInfoProto) -> tuple | None:
    if not value.type.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim)


def structure_with_small_values(source: str, http: HttpSettings | None = None) -> onnx.ModelProto:
    """The model without its large weights (dims kept) but with every small constant tensor filled in
    (a URL read with ``http``; None: the defaults)."""
    structure = read_structure(source, http=http)
    return fill_small_values(structure.proto, structure.weights, http)


def fill_small_values(proto: onnx.ModelProto, weights: dict, http: HttpSettings | None = None) -> onnx.ModelProto:
    """``proto`` (from the protobuf scanner: initializers without data) with the data of every
    initializer of at most ``SMALL_BYTES`` read back in, in place (URLs read with ``http``); returns ``proto``."""
    values = read_small_values((weights[tensor.name] for tensor in proto.graph.initializer), http)
    for tensor in proto.graph.initializer:
        if tensor.name in values:
            tensor.CopyFrom(numpy_helper.from_array(values[tensor.name], tensor.name))
    return proto


def read_small_values(refs: Iterable[WeightRef], http: HttpSettings | None = None,
                      limit: Callable[[WeightRef], int] = lambda ref: SMALL_BYTES) -> dict[str, np.ndarray]:
    """The values, by name, of the stored weights among ``refs`` of at most ``limit(ref)`` bytes: the
    shape targets, axes and scalars shape inference needs, a few bytes each. Read as a provider reads
    them (from the weight cache too, when it is on; URLs with ``http``); weights with a value are skipped."""
    small = [ref for ref in refs if ref.value is None and ref.location is not None and ref.length <= limit(ref)]
    if not small:
        return {}
    provider = NoCache(http=http)
    try:
        return {ref.name: provider.read(ref).copy() for ref in small}
    finally:
        provider.close()


def constant_values(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer if t.raw_data or t.int64_data
              or t.float_data or t.int32_data}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _reshape_mismatches(graph: onnx.GraphProto, shapes: dict[str, tuple | None]) -> list[str]:
    """Reshapes with a constant target whose element count differs from their input's (inferred) one."""
    constants = constant_values(graph)
    found = []
    for node in graph.node:
        if node.op_type != "Reshape" or node.input[1] not in constants:
            continue
        shape_in = shapes.get(node.input[0])
        if not shape_in or any(d is None for d in shape_in):
            continue
        target = [int(v) for v in constants[node.input[1]].reshape(-1)]
        resolved = [shape_in[i] if t == 0 and i < len(shape_in) else t for i, t in enumerate(target)]
        count = math.prod(shape_in)
        known = math.prod(d for d in resolved if d != -1)
        fits = count % known == 0 if -1 in resolved and known else count == known
        if not fits:
            found.append(f"node {node.name or node.output[0]!r} (Reshape) reshapes to the constant {target}, "
                         f"made for the exported size")
    return found


def _resize_sizes(graph: onnx.GraphProto) -> list[str]:
    constants = constant_values(graph)
    return [f"node {n.name or n.output[0]!r} (Resize) resizes to the constant sizes "
            f"{constants[n.input[3]].tolist()}" for n in graph.node
            if n.op_type == "Resize" and len(n.input) > 3 and n.input[3] in constants and constants[n.input[3]].size]


def probe(source: str | onnx.ModelProto, input_name: str, size: tuple[int, int], output_name: str | None = None
          ) -> ProbeResult:
    """Would the model run with ``input_name``'s last two dims set to ``size``?"""
    proto = structure_with_small_values(source) if isinstance(source, str) else _copy(source)
    graph = proto.graph
    spec = next((v for v in graph.input if v.name == input_name), None)
    if spec is None:
        raise ValueError(f"the model has no input {input_name!r}")
    declared = tensor_dims(spec)
    if not declared or len(declared) < 2:
        return ProbeResult(declared, size, True)
    output = next((v for v in graph.output if v.name == output_name), graph.output[0])
    declared_out = tensor_dims(output)
    for dim, value in zip(spec.type.tensor_type.shape.dim[-2:], size):
        dim.Clear()
        dim.dim_value = value
    del graph.value_info[:]
    for value in graph.output:
        value.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    values = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    shapes = {v.name: tensor_dims(v) for v in values}
    baked = _reshape_mismatches(inferred.graph, shapes) + _resize_sizes(inferred.graph)
    out_shape = shapes.get(output.name)
    ok = not baked and _scaled_as_declared(declared, declared_out, size, out_shape)
    if not ok and not baked:
        baked.append(f"output {output.name!r} does not follow the input size (inferred {out_shape}): an op "
                     "fixes the size")
    return ProbeResult(declared, size, ok, baked, out_shape)


def _scaled_as_declared(declared_in, declared_out, size, out_shape) -> bool:
    if not out_shape or len(out_shape) < 2 or any(d is None for d in out_shape[-2:]):
        return False
    if not declared_out or any(not isinstance(d, int) or d <= 0 for d in (*declared_in[-2:], *declared_out[-2:])):
        return True  # no declared output size to compare with: inference went through
    return all(o * d_in == s * d_out for o, s, d_in, d_out in
               zip(out_shape[-2:], size, declared_in[-2:], declared_out[-2:]))


def _copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy
