"""Run one ONNX node through onnxruntime and through frame's kernel, and compare the results.

``run_node`` builds a one-node model with ``onnx.helper`` (every input a graph input, ``None`` for an
omitted optional input), runs it in onnxruntime, then runs the kernel exactly as the runtime would:
``bind_node`` (resolve + decode_attributes + attribute checks) and ``spec.fn(*inputs, **attrs)``.
Kernels registered in-place are run a second time with ``_reuse=True`` on copies of the inputs.
Nodes with graph attributes (If, Loop, Scan) run through the whole engine (``load_model`` on the
one-node model), since their bodies are bound and planned by the loader.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from frame.engine.ops import bind_node


def make_node(op_type: str, n_inputs: list[bool], n_outputs: int, **attrs: object) -> onnx.NodeProto:
    names = [f"in{i}" if present else "" for i, present in enumerate(n_inputs)]
    return helper.make_node(op_type, names, [f"out{i}" for i in range(n_outputs)], **attrs)


def one_node_model(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int) -> onnx.ModelProto:
    graph_inputs = [
        helper.make_tensor_value_info(f"in{i}", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for i, x in enumerate(inputs) if x is not None
    ]
    graph_outputs = [onnx.ValueInfoProto(name=name) for name in node.output]
    graph = helper.make_graph([node], "one_node", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    return model


def has_graph_attributes(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def engine_outputs(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    """The node run by the whole engine: written to a temporary file, loaded and run."""
    import tempfile

    from frame.engine import load_model

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/node.onnx"
        onnx.save_model(one_node_model(node, inputs, opset), path)
        with load_model(path) as model:
            results = model.run({f"in{i}": x for i, x in enumerate(inputs) if x is not None})
    return [results[name] for name in node.output]


def onnxruntime_outputs(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    model = one_node_model(node, inputs, opset)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {f"in{i}": x for i, x in enumerate(inputs) if x is not None}
    return session.run(None, feeds)


def kernel_outputs(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int,
                   reuse: bool = False) -> list[np.ndarray]:
    if has_graph_attributes(node):
        return engine_outputs(node, inputs, opset)
    spec, attrs = bind_node(node, opset)
    if reuse:
        attrs["_reuse"] = True
    args = list(inputs)
    while args and args[-1] is None:
        args.pop()
    result = spec.fn(*args, **attrs)
    outputs = list(result) if isinstance(result, tuple) else [result]
    return outputs[: len(node.output)]


def run_node(op_type: str, inputs: list[np.ndarray | None], opset: int = 17, n_outputs: int = 1,
             rtol: float = 1e-5, atol: float = 1e-6, outer: int = 0, **attrs: object) -> list[np.ndarray]:
    """Assert kernel == onnxruntime (values, dtype, shape) for one node; returns the kernel outputs.

    The last ``outer`` inputs are graph inputs the node does not take: values its bodies (If, Loop,
    Scan) read from the enclosing graph.
    """
    node = make_node(op_type, [x is not None for x in inputs[:len(inputs) - outer]], n_outputs, **attrs)
    expected = onnxruntime_outputs(node, inputs, opset)
    actual = kernel_outputs(node, inputs, opset)
    _compare(op_type, actual, expected, rtol, atol)
    spec, _ = bind_node(node, opset)
    if spec.inplace and not has_graph_attributes(node):
        copies = [None if x is None else x.copy() for x in inputs]
        _compare(op_type + " (_reuse)", kernel_outputs(node, copies, opset, reuse=True), expected, rtol, atol)
    return actual


def _compare(label: str, actual: list[np.ndarray], expected: list[np.ndarray], rtol: float, atol: float) -> None:
    assert len(actual) == len(expected), f"{label}: {len(actual)} outputs, onnxruntime gave {len(expected)}"
    for i, (got, want) in enumerate(zip(actual, expected)):
        assert isinstance(got, np.ndarray), f"{label} output {i}: {type(got).__name__}, not ndarray"
        assert got.dtype == want.dtype, f"{label} output {i}: dtype {got.dtype}, onnxruntime {want.dtype}"
        assert got.shape == want.shape, f"{label} output {i}: shape {got.shape}, onnxruntime {want.shape}"
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{label} output {i}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{label} output {i}")


def rand(*shape: int, dtype: type = np.float32, seed: int = 0, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)
