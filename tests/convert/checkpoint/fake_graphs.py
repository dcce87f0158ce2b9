"""Stand-in graph builders for the writer's tests: every weight of a graph declared as a structure-only
initializer named by its diffusers key and consumed (MatMul/Conv where the rank allows, so uint8 has
per-channel axes to quantize; ReduceSum otherwise), one scalar output. What the writer must get right
(names, shapes, streaming, conversion, files) does not depend on the graph computing Stable Diffusion."""

from __future__ import annotations

from onnx import TensorProto, helper

from frame.convert.importer.writer import VAE_PARTS


def _graph(name: str, shapes: dict[str, tuple[int, ...]]):
    nodes, initializers, sums, inputs = [], [], [], []
    for i, (key, shape) in enumerate(sorted(shapes.items())):
        tensor = TensorProto()
        tensor.name, tensor.data_type = key, TensorProto.FLOAT
        tensor.dims.extend(shape)
        initializers.append(tensor)
        used = key
        if len(shape) == 2:  # a linear layer's weight: MatMul reads it with an output-channel axis
            inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, shape[0]]))
            nodes.append(helper.make_node("MatMul", [f"x{i}", key], [f"m{i}"]))
            used = f"m{i}"
        nodes.append(helper.make_node("ReduceSum", [used], [f"r{i}"], keepdims=0))
        sums.append(f"r{i}")
    nodes.append(helper.make_node("Sum", sums, ["total"]))
    graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
                              initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def builders(found) -> dict:
    """A builder per graph of ``found``'s components (``config`` ignored: shapes come from the mapping)."""
    out = {}
    for component in found.components:
        shapes = component.shapes()
        if component.name == "vae":
            for graph, prefixes in VAE_PARTS.items():
                part = {k: s for k, s in shapes.items() if k.startswith(prefixes)}
                out[graph] = lambda config, part=part, graph=graph: _graph(graph, part)
        else:
            out[component.name] = lambda config, shapes=shapes, name=component.name: _graph(name, shapes)
    return out
