"""Small ONNX graphs that make the engine run one step signature, for the throughput measurement.

A probe is the signature's op with its real channel counts, kernel, attributes and weight storage
(fp16 weights behind ``Cast``, 8-bit ones behind ``DequantizeLinear``, so the engine fuses the
decoding exactly as in the model), but with the parallel dimension cut down to stay within
``max_macs``: the output rows of a conv, the query rows of an attention, the token rows of a
projection. Those dimensions only repeat the same inner work, so the rate per multiply-add barely
changes while a probe takes a fraction of a second instead of several, as long as the probe keeps
one whole unit of the kernel's own blocking: a conv at least one im2col band of output rows
(``frame.engine.ops.conv.band_rows``: a thinner band is a narrower, slower GEMM), an attention at
least one block of query rows (``AttentionConfig.block``), a projection at least 512 token rows.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from frame.engine.blas_threads import SINGLE_THREAD_WORK
from frame.engine.ops.conv import band_rows
from frame.engine.passes.sliced_attention import AttentionConfig
from frame.estimate.signature import Signature

FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
Probe = tuple[onnx.ModelProto, dict[str, np.ndarray]]
MIN_TOKENS = 512


def probe_model(nodes: list, inputs: dict[str, tuple[int, ...]], output: str, weights: dict[str, np.ndarray]
           ) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "probe", [helper.make_tensor_value_info(n, FLOAT, list(s)) for n, s in inputs.items()],
        [helper.make_tensor_value_info(output, FLOAT, None)],
        [numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def stored_weight(shape: tuple[int, ...], storage: str, axis: int, rng: np.random.Generator
                  ) -> tuple[list, dict[str, np.ndarray]]:
    """Nodes producing float weight ``w`` from its stored form, and the initializers they read."""
    if storage == "uint8":
        channels = shape[axis]
        return ([helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=axis)],
                {"wq": rng.integers(0, 256, shape, dtype=np.uint8), "ws": np.full(channels, 0.003, np.float32),
                 "wz": np.full(channels, 128, np.uint8)})
    values = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    if storage == "fp16":
        return [helper.make_node("Cast", ["wh"], ["w"], to=FLOAT)], {"wh": values.astype(np.float16)}
    return [], {"w": values}


def _rows(total: int, per_row: int, max_macs: int, minimum: int = 1) -> int:
    return max(minimum, min(total, max_macs // max(per_row, 1)))


def _threads(work: int) -> bool:
    """Whether the engine runs a product of ``work`` multiply-adds on all BLAS threads
    (``frame.engine.blas_threads``): a probe must land on the same side as its step."""

    return work >= SINGLE_THREAD_WORK


def _same_threads(rows: int, total: int, work_per_row: int) -> int:
    """``rows`` grown until a probe of them is threaded like the whole step (at most ``total``)."""
    while rows < total and _threads(rows * work_per_row) != _threads(total * work_per_row):
        rows = min(total, rows * 2)
    return rows


def conv_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    (n, c, h, w_in), w_shape = sig.shapes
    m, cg, kh, kw = w_shape
    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in sig.attrs}
    upsample = sig.op == "upsample_conv"
    out_w = w_in * (2 if upsample else 1) // int((attrs.get("strides") or [1, 1])[1])
    stride = int((attrs.get("strides") or [1, 1])[0])
    if upsample:  # each output phase is a 2x2 conv of the small image
        band = band_rows((h, w_in), cg * 4)
    else:
        band = band_rows((max(1, h // stride), out_w), cg * kh * kw) * stride
    rows_in = max(_rows(h, m * cg * kh * kw * out_w * (4 if upsample else 1) // stride, max_macs, kh),
                  min(h, band))
    rows_in = _same_threads(rows_in, h, w_in * m * cg * kh * kw)  # blas_threads.gemm_work: input positions
    x_shape = (1, c, rows_in, w_in)
    nodes, weights = stored_weight(w_shape, sig.storage, 0, rng)
    source = "x"
    if upsample:
        weights["scales"] = np.array([1, 1, 2, 2], np.float32)
        nodes.append(helper.make_node("Resize", ["x", "", "scales"], ["u"], mode="nearest",
                                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
        source = "u"
    nodes.append(helper.make_node("Conv", [source, "w"], ["y"], **attrs))
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    return probe_model(nodes, {"x": x_shape}, "y", weights), feeds


def matmul_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    x, (k, n_out) = sig.shapes
    total = math.prod(x[:-1])
    tokens = _same_threads(max(_rows(total, k * n_out, max_macs), min(total, MIN_TOKENS)), total, k * n_out)
    nodes, weights = stored_weight((k, n_out), sig.storage, 1, rng)
    nodes.append(helper.make_node("MatMul", ["x", "w"], ["y"]))
    feeds = {"x": rng.standard_normal((1, tokens, k)).astype(np.float32)}
    return probe_model(nodes, {"x": (1, tokens, k)}, "y", weights), feeds


def attention_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    if sig.op == "activation_matmul":
        return activation_matmul_probe(sig, max_macs, rng)
    q, kt, v = sig.shapes
    lead = q[:-2]
    heads = math.prod(lead) if lead else 1
    dim, keys, out_dim = q[-1], kt[-1], v[-1]
    block_heads, block = AttentionConfig().block(heads, q[-2], keys, 4)
    rows = max(_rows(q[-2], heads * keys * (dim + out_dim), max_macs), min(q[-2], block))
    if rows >= q[-2] or block_heads > 1:  # whole heads per block: keep them all
        probe_heads = heads
    else:  # blocks of one head's rows: a few heads repeat the same blocks
        probe_heads = max(1, min(heads, max_macs // max(rows * keys * (dim + out_dim), 1)))
        # as many as it takes for the engine to pick the same BLAS threads as for the real step
        while probe_heads < heads and _threads(probe_heads * rows * dim * keys) != _threads(math.prod(q) * keys):
            probe_heads += 1
    shapes = {"q": (1, probe_heads, rows, dim), "kt": (1, probe_heads, dim, keys),
              "v": (1, probe_heads, keys, out_dim)}
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["t"]),
             helper.make_node("Softmax", ["t"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return probe_model(nodes, shapes, "y", {"scale": np.array(dim ** -0.5, np.float32)}), feeds


def activation_matmul_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    """``a @ b`` with both operands activations (attention products the engine did not fuse)."""
    a, b = sig.shapes[:2]
    lead = a[:-2]
    heads = math.prod(lead) if lead else 1
    rows = _rows(a[-2] if len(a) > 1 else 1, heads * a[-1] * b[-1], max_macs)
    shapes = {"a": (1, heads, rows, a[-1]), "b": (1, heads, b[-2], b[-1])}
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return probe_model([helper.make_node("MatMul", ["a", "b"], ["y"])], shapes, "y", {}), feeds


def build_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    if sig.op in ("conv", "upsample_conv"):
        return conv_probe(sig, max_macs, rng)
    if sig.op == "matmul":
        return matmul_probe(sig, max_macs, rng)
    return attention_probe(sig, max_macs, rng)
