"""Tiny ONNX models built with onnx.helper for the runtime tests (no torch needed)."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT


def value(name: str, shape, elem=F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def save(proto: onnx.ModelProto, path, external: bool = False) -> str:
    """Write ``proto`` to ``path``; with ``external`` initializers over 64 bytes go to ``model.onnx_data``."""
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if external:
        onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(path) + "_data", size_threshold=64)
    else:
        onnx.save_model(proto, path)
    return path


def mlp(seed: int = 0, hidden: int = 64) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """x → MatMul w1 → Add b1 → Relu → MatMul w2 → Add b2 → Mul (w1 row sum) → y.

    ``w1`` is used twice (first and last use far apart); a Slice of the big ``w2`` tests view copying.
    """
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((32, hidden)).astype(np.float32)
    b1 = rng.standard_normal(hidden).astype(np.float32)
    w2 = rng.standard_normal((hidden, 16)).astype(np.float32)
    b2 = rng.standard_normal(16).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
              (("starts", [0]), ("ends", [1]), ("axes", [0]), ("sum_axes", [0]))]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="mm1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="mm2"),
        helper.make_node("Add", ["h3", "b2"], ["h4"], name="add2"),
        helper.make_node("Slice", ["w1", "starts", "ends", "axes"], ["w1row"], name="slice"),
        helper.make_node("ReduceSum", ["w1row", "sum_axes"], ["w1sum"], name="rowsum", keepdims=0),
        helper.make_node("Slice", ["w1sum", "starts", "ends", "axes"], ["scale"], name="slice2"),
        helper.make_node("Mul", ["h4", "scale"], ["y"], name="scale_out"),
    ]
    proto = model(nodes, [value("x", ["batch", 32])], [value("y", ["batch", 16])], inits)
    return proto, {"x": rng.standard_normal((3, 32)).astype(np.float32)}


def attention(variant: str, heads: int = 2, n: int = 24, m: int = 20, d: int = 8, seed: int = 0
              ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One attention block as an exporter writes it.

    variants: "div" (MatMul → Div(scale) → Softmax → MatMul, K pre-transposed), "sdpa" (TorchScript /
    dynamo SDPA: Transpose(K), Q and Kᵀ each × √scale), "mask" (scale on the left of Mul, additive
    mask, Dropout after Softmax).
    """
    rng = np.random.default_rng(seed)
    feeds = {"q": rng.standard_normal((1, heads, n, d)).astype(np.float32),
             "k": rng.standard_normal((1, heads, m, d)).astype(np.float32),
             "v": rng.standard_normal((1, heads, m, d)).astype(np.float32)}
    scale = np.array(1 / np.sqrt(d), np.float32)
    inits = [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(np.sqrt(scale), "sqrt_scale")]
    inputs = [value(k, list(v.shape)) for k, v in feeds.items()]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])]
    if variant == "div":
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["s0"]),
                  helper.make_node("Div", ["s0", "sqrt_scale"], ["s1"])]
    elif variant == "sdpa":
        nodes += [helper.make_node("Mul", ["q", "sqrt_scale"], ["qs"]),
                  helper.make_node("Mul", ["kt", "sqrt_scale"], ["kts"]),
                  helper.make_node("MatMul", ["qs", "kts"], ["s1"])]
    elif variant == "mask":
        feeds["mask"] = np.triu(np.full((n, m), -1e4, np.float32), 1)[None, None]
        inputs.append(value("mask", [1, 1, n, m]))
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["s0"]),
                  helper.make_node("Mul", ["scale", "s0"], ["s0b"]),
                  helper.make_node("Add", ["s0b", "mask"], ["s1"])]
    else:
        raise ValueError(variant)
    softmax_out = "p" if variant != "mask" else "p0"
    nodes.append(helper.make_node("Softmax", ["s1"], [softmax_out], axis=-1))
    if variant == "mask":
        nodes.append(helper.make_node("Dropout", ["p0"], ["p"]))
    nodes.append(helper.make_node("MatMul", ["p", "v"], ["y"]))
    proto = model(nodes, inputs, [value("y", [1, heads, n, d])], inits)
    return proto, feeds


def fp16_weights(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Optimum-style fp16 export: fp16 initializers, each Cast to float32 before use."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((16, 8)).astype(np.float16)
    b = rng.standard_normal(8).astype(np.float16)
    nodes = [helper.make_node("Cast", ["w"], ["w32"], to=F32), helper.make_node("Cast", ["b"], ["b32"], to=F32),
             helper.make_node("MatMul", ["x", "w32"], ["h"]), helper.make_node("Add", ["h", "b32"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    proto = model(nodes, [value("x", [2, 16])], [value("y", [2, 8])], inits)
    return proto, {"x": rng.standard_normal((2, 16)).astype(np.float32)}


def fp16_graph(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A fully fp16 graph: fp16 input, weights, constants, Cast-to-fp16 and output."""
    rng = np.random.default_rng(seed)
    f16 = TensorProto.FLOAT16
    w = (rng.standard_normal((16, 8)) / 4).astype(np.float16)
    half = helper.make_tensor("half", f16, [], np.array([0.5], np.float16).tobytes(), raw=True)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Constant", [], ["c"], value=half),
             helper.make_node("Mul", ["h", "c"], ["h2"]),
             helper.make_node("Cast", ["h2"], ["h3"], to=F32),
             helper.make_node("Sigmoid", ["h3"], ["h4"]),
             helper.make_node("Cast", ["h4"], ["y"], to=f16)]
    proto = model(nodes, [value("x", [2, 16], f16)], [value("y", [2, 8], f16)],
                  [numpy_helper.from_array(w, "w")])
    return proto, {"x": rng.standard_normal((2, 16)).astype(np.float16)}


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def ort_run(path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))
