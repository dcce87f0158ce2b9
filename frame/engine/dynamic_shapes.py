"""Make a model exported at one fixed image size run at any size: ``frame model convert
--dynamic-shapes`` writes the result, and the diffusion pipeline applies it in memory when it loads a
VAE decoder whose fixed input would otherwise be decoded whole (``dynamic_structure``).

Static exports (``torch.onnx.export`` without dynamic axes) declare fixed input and output sizes and
fold every shape computation into constants. Most ops do not care, but a few bake the size in: the
attention blocks' ``Reshape`` to ``[1, C, H*W]`` and back to ``[1, C, H, W]``, and ``Resize`` to
constant ``sizes``. This pass rewrites those so that they follow the input:

1. the spatial dims (last two) of every rank-4 float input and output become symbolic;
2. ``probe`` the graph at another size; the first Reshape whose constant target no longer fits is
   rewritten from the alignment of its input and target dims at the exported size: groups of input
   dims that do not depend on the size keep their constants; a group that does and merges into one
   target dim becomes ``-1``; a group that stays one dim is copied from ``Shape(input)``; a group of
   fixed dims followed (or preceded) by size-dependent ones keeps its constants but the last (first)
   target dim becomes ``-1`` (GroupNorm's ``[N, G, C/G*H*W]`` → ``[N, C, H*W]``); a group of only
   size-dependent dims that is split (``H*W`` → ``H, W``) takes its dims from ``Shape()`` of the
   nearest earlier tensor that had exactly those dims at the exported size (the attention block's
   input). Repeat;
3. Resize with constant ``sizes`` becomes Resize by the constant ``scales`` they imply.

The result is checked by probing two other sizes; if some op still fixes the size, the conversion
stops with an error naming it (re-exporting with dynamic axes is then the only fix).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from frame.engine.io.http_settings import HttpSettings
from frame.engine.static_shapes import constant_values, fill_small_values, probe, tensor_dims
from frame.errors import UsageError

MAX_REWRITES = 64


def spatial_inputs(proto: onnx.ModelProto) -> dict[str, tuple[int, int]]:
    """Rank-4 float inputs with fixed spatial dims, by name: their declared (height, width)."""
    found = {}
    for value in proto.graph.input:
        dims = tensor_dims(value)
        if value.type.tensor_type.elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16) and dims and len(dims) == 4 \
                and all(isinstance(d, int) and d > 0 for d in dims[2:]):
            found[value.name] = (dims[2], dims[3])
    return found


def _set_symbolic(value: onnx.ValueInfoProto, prefix: str) -> None:
    dims = value.type.tensor_type.shape.dim
    if len(dims) == 4:
        for dim, name in zip(dims[2:], ("height", "width")):
            dim.Clear()
            dim.dim_param = f"{prefix}{name}"


def _inferred_shapes(proto: onnx.ModelProto, name: str, size: tuple[int, int]) -> dict[str, tuple | None]:
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    spec = next(v for v in model.graph.input if v.name == name)
    for dim, value in zip(spec.type.tensor_type.shape.dim[2:], size):
        dim.Clear()
        dim.dim_value = value
    del model.graph.value_info[:]
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    return {v.name: tensor_dims(v) for v in [*inferred.graph.value_info, *inferred.graph.input]}


def _groups(shape: tuple[int, ...], target: list[int]) -> list[tuple[list[int], list[int]]] | None:
    """Align input dims with target dims by equal running products: [(input dims, target dims), ...]."""
    groups, i, j = [], 0, 0
    while i < len(shape) or j < len(target):
        gi, gj = [i] if i < len(shape) else [], [j] if j < len(target) else []
        pi = shape[i] if gi else 1
        pj = target[j] if gj else 1
        i, j = i + len(gi), j + len(gj)
        while pi != pj:
            if pi < pj and i < len(shape):
                pi *= shape[i]
                gi.append(i)
                i += 1
            elif pj < pi and j < len(target):
                pj *= target[j]
                gj.append(j)
                j += 1
            else:
                return None
        groups.append((gi, gj))
    return groups


class _Builder:
    """New nodes and initializers for one rewritten Reshape target."""

    def __init__(self, graph: onnx.GraphProto, node: onnx.NodeProto) -> None:
        self.graph, self.node = graph, node
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.base = (node.name or node.output[0]).replace("/", "_").strip("_") + "_dynamic_shape"
        self.shapes: dict[str, str] = {}

    def constant(self, values: list[int]) -> str:
        name = f"{self.base}_c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def shape_slice(self, tensor: str, start: int, stop: int) -> str:
        if tensor not in self.shapes:
            self.shapes[tensor] = f"{self.base}_shape{len(self.shapes)}"
            self.nodes.append(helper.make_node("Shape", [tensor], [self.shapes[tensor]],
                                               name=self.shapes[tensor]))
        out = f"{self.base}_slice{len(self.nodes)}"
        self.nodes.append(helper.make_node("Slice", [self.shapes[tensor], self.constant([start]),
                                                     self.constant([stop])], [out], name=out))
        return out


def _rewrite_reshape(graph: onnx.GraphProto, index: int, at_export: dict, at_probe: dict) -> bool:
    """Replace Reshape ``graph.node[index]``'s constant target by one that follows its input."""
    node = graph.node[index]
    constants = constant_values(graph)
    target = [int(v) for v in constants[node.input[1]].reshape(-1)]
    shape, moved = at_export.get(node.input[0]), at_probe.get(node.input[0])
    if not shape or not moved or None in shape or None in moved or len(shape) != len(moved):
        return False
    resolved = [shape[i] if t == 0 and i < len(shape) else t for i, t in enumerate(target)]
    if -1 in resolved:
        known = math.prod(d for d in resolved if d != -1)
        resolved[resolved.index(-1)] = math.prod(shape) // known
    groups = _groups(tuple(shape), resolved)
    if groups is None:
        return False
    builder = _Builder(graph, node)
    pieces: list[str] = []
    merged = 0
    for dims_in, dims_out in groups:
        varies = any(shape[i] != moved[i] for i in dims_in)
        if not varies:
            pieces.append(builder.constant([resolved[j] for j in dims_out]))
        elif len(dims_out) == 1 and len(dims_in) == 1:
            pieces.append(builder.shape_slice(node.input[0], dims_in[0], dims_in[0] + 1))
        elif len(dims_out) == 1:
            merged += 1
            pieces.append(builder.constant([-1]))
        else:
            piece = _mixed_group(graph, index, builder, dims_in, [resolved[j] for j in dims_out], shape, moved,
                                 at_export, at_probe)
            if piece is None:
                return False
            pieces.append(piece[0])
            merged += piece[1]
    if merged > 1:
        return False
    new_target = f"{builder.base}_target"
    builder.nodes.append(helper.make_node("Concat", pieces, [new_target], name=new_target, axis=0))
    node.input[1] = new_target
    for offset, new in enumerate(builder.nodes):
        graph.node.insert(index + offset, new)
    graph.initializer.extend(builder.inits)
    return True


def _mixed_group(graph: onnx.GraphProto, index: int, builder: _Builder, dims_in: list[int], values: list[int],
                 shape: tuple, moved: tuple, at_export: dict, at_probe: dict) -> tuple[str, int] | None:
    """The target piece (and whether it holds a -1) for input dims ``dims_in`` that depend on the size
    becoming several target dims ``values``. The size-dependent input dims are a suffix (or a prefix)
    of the group; the target dims inside their span follow the size, the others are constants."""
    varying = [i for i in dims_in if shape[i] != moved[i]]
    reverse = varying != dims_in[-len(varying):]
    if reverse and varying != dims_in[:len(varying)]:
        return None
    ordered = values[::-1] if reverse else values
    span = math.prod(shape[i] for i in varying)
    inside = 0  # how many trailing (leading, if reversed) target dims lie inside the varying span
    while inside < len(ordered) and span % math.prod(ordered[len(ordered) - inside - 1:]) == 0:
        inside += 1
    while inside > 1 and ordered[len(ordered) - inside] == 1:
        inside -= 1  # a size-1 dim (batch, heads) is a constant, not part of the image size
    total = math.prod(moved[i] for i in dims_in)
    if inside <= 1:
        fixed = ordered[:-1]
        if total % max(1, math.prod(fixed)):
            return None
        return builder.constant((fixed + [-1]) if not reverse else ([-1] + fixed[::-1])), 1
    head, tail = ordered[:-inside], ordered[-inside:]
    tail = tail[::-1] if reverse else tail
    if total % max(1, math.prod(head)):
        return None
    donor = _donor(graph, index, tail, at_export, at_probe, total // max(1, math.prod(head)))
    if donor is None:
        return None
    donated = builder.shape_slice(*donor)
    if not head:
        return donated, 0
    constant = builder.constant(head[::-1] if reverse else head)
    both = f"{builder.base}_part{len(builder.nodes)}"
    builder.nodes.append(helper.make_node("Concat", [donated, constant] if reverse else [constant, donated], [both],
                                          name=both, axis=0))
    return both, 0


def _donor(graph: onnx.GraphProto, index: int, dims: list[int], at_export: dict, at_probe: dict, product: int
           ) -> tuple[str, int, int] | None:
    """(tensor, start, stop): the latest value produced before node ``index`` holding ``dims`` at
    positions start..stop at the exported size, whose dims there multiply to ``product`` at the probe size."""
    for node in reversed(list(graph.node)[:index]):
        for out in node.output:
            shape, moved = at_export.get(out), at_probe.get(out)
            if not shape or not moved or None in shape or None in moved or len(shape) != len(moved):
                continue
            for start in range(len(shape) - len(dims) + 1):
                stop = start + len(dims)
                if list(shape[start:stop]) == dims and math.prod(moved[start:stop]) == product:
                    return out, start, stop
    return None


def _resize_sizes_to_scales(graph: onnx.GraphProto, at_export: dict) -> None:
    constants = constant_values(graph)
    for node in graph.node:
        if node.op_type != "Resize" or len(node.input) < 4 or node.input[3] not in constants:
            continue
        sizes, shape = constants[node.input[3]].reshape(-1), at_export.get(node.input[0])
        if not sizes.size or not shape or None in shape or len(shape) != sizes.size:
            continue
        name = f"{node.name or node.output[0]}_scales".replace("/", "_").strip("_")
        scales = (sizes.astype(np.float64) / np.array(shape, np.float64)).astype(np.float32)
        graph.initializer.append(numpy_helper.from_array(scales, name))
        while len(node.input) < 3:
            node.input.append("")
        node.input[2] = name
        del node.input[3:]


def make_dynamic(proto: onnx.ModelProto, where: str = "model") -> onnx.ModelProto:
    """``proto`` (structure with small constants inline) rewritten to run at any spatial size."""
    inputs = spatial_inputs(proto)
    if not inputs:
        return proto
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    graph = out.graph
    name, exported = next(iter(inputs.items()))
    probe_size = (exported[0] + 8, exported[1] + 16)
    at_export = _inferred_shapes(out, name, exported)  # rewrites keep every value's exported shape
    _resize_sizes_to_scales(graph, at_export)
    for _ in range(MAX_REWRITES):
        at_probe = _inferred_shapes(out, name, probe_size)
        index = _first_baked_reshape(graph, at_probe)
        if index is None:
            break
        if not _rewrite_reshape(graph, index, at_export, at_probe):
            node = graph.node[index]
            raise UsageError(f"{where}: cannot make the input size dynamic: node {node.name or node.output[0]!r} "
                             "(Reshape) fixes it in a way this rewrite does not handle (re-export the model with "
                             "dynamic axes)")
    for size in ((max(8, exported[0] // 2), max(8, exported[1] // 2 + 8)), probe_size):
        check = probe(out, name, size)
        if not check.ok:
            raise UsageError(f"{where}: cannot make the input size dynamic: {'; '.join(check.baked)} (re-export "
                             "the model with dynamic axes)")
    for value in [*(v for v in graph.input if v.name in inputs), *graph.output]:
        _set_symbolic(value, "")
    del graph.value_info[:]
    used = {name for node in graph.node for name in node.input} | {v.name for v in graph.output}
    kept = [t for t in graph.initializer if t.name in used]  # the replaced constant targets go
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return out


def dynamic_structure(proto: onnx.ModelProto, weights: dict, http: HttpSettings | None = None) -> onnx.ModelProto:
    """``make_dynamic`` for ``load_model(transform=...)``: ``proto`` as the protobuf scanner reads it
    (initializers without data) and the model's weight references. Only the small constants (shapes,
    scales) are read; the rewrite adds a few Shape/Slice/Concat nodes and small constants, and every
    weight stays where it was, streamed as before. ``http``: how a URL's constants are read (bind it with
    ``functools.partial`` for a loader of URLs)."""
    return make_dynamic(fill_small_values(proto, weights, http))


def _first_baked_reshape(graph: onnx.GraphProto, at_probe: dict) -> int | None:
    constants = constant_values(graph)
    for index, node in enumerate(graph.node):
        if node.op_type != "Reshape" or node.input[1] not in constants:
            continue
        shape_in = at_probe.get(node.input[0])
        if not shape_in or None in shape_in:
            continue
        target = [int(v) for v in constants[node.input[1]].reshape(-1)]
        resolved = [shape_in[i] if t == 0 and i < len(shape_in) else t for i, t in enumerate(target)]
        known = math.prod(d for d in resolved if d != -1)
        count = math.prod(shape_in)
        if (count % known != 0) if -1 in resolved else count != known:
            return index
    return None
