"""Small ONNX graphs that make the engine run one step signature, for the throughput measurement.

A probe is the signature's op with its real channel counts, kernel, attributes and weight storage
(fp16 weights behind ``Cast``, 8-bit ones behind ``DequantizeLinear``, so the engine fuses the
decoding exactly as in the model), but with the parallel dimension cut down to stay within
``max_macs``: the output rows of a conv, the query rows of an attention, the token rows of a
projection. Those dimensions only repeat the same inner work, so the rate per multiply-add barely
changes while a probe takes a fraction of a second instead of several, as long as the probe keeps
one whole unit of the kernel's own blocking: a conv at least one im2col band of output rows
(``frame.engine.ops.conv.band_rows``: a thinner band is a narrower, slower GEMM) and one band of its
Winograd layout (``_winograd_rows``), an attention at
least one block of query rows (``AttentionConfig.block``), a projection at least 512 token rows.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from frame.engine.blas_threads import SINGLE_THREAD_WORK
from frame.engine.ops.conv import band_rows, winograd_layout
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


def stored_weight(shape: tuple[int, ...], storage: str, axis: int, rng: np.random.Generator, name: str = "w"
                  ) -> tuple[list, dict[str, np.ndarray]]:
    """Nodes producing float weight ``name`` from its stored form, and the initializers they read."""
    if storage == "uint8":
        channels = shape[axis]
        return ([helper.make_node("DequantizeLinear", [f"{name}q", f"{name}s", f"{name}z"], [name], axis=axis)],
                {f"{name}q": rng.integers(0, 256, shape, dtype=np.uint8),
                 f"{name}s": np.full(channels, 0.003, np.float32), f"{name}z": np.full(channels, 128, np.uint8)})
    values = rng.standard_normal(shape, dtype=np.float32)  # float32 from the start: a probe of a big weight
    values *= 0.02                                          # (2560x1280x3x3) must not hold float64 copies
    if storage == "fp16":
        return [helper.make_node("Cast", [f"{name}h"], [name], to=FLOAT)], {f"{name}h": values.astype(np.float16)}
    return [], {name: values}


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


def _conv_input(sig: Signature, max_macs: int) -> tuple[int, int, int, int]:
    """The probe's input: the signature's with its rows cut to ``max_macs`` (at least one band)."""
    (n, c, h, w_in), w_shape = sig.shapes
    m, cg, kh, kw = w_shape
    attrs = dict(sig.attrs)
    upsample = sig.op == "upsample_conv"
    out_w = w_in * (2 if upsample else 1) // int((attrs.get("strides") or [1, 1])[1])
    stride = int((attrs.get("strides") or [1, 1])[0])
    if upsample:  # each output phase is a 2x2 conv of the small image
        band = band_rows((h, w_in), cg * 4)
    else:
        band = band_rows((max(1, h // stride), out_w), cg * kh * kw) * stride
    rows_in = max(_rows(h, m * cg * kh * kw * out_w * (4 if upsample else 1) // stride, max_macs, kh),
                  min(h, band), _winograd_rows(sig))
    rows_in = _same_threads(rows_in, h, w_in * m * cg * kh * kw)  # blas_threads.gemm_work: input positions
    return (1, c, rows_in, w_in)


def _winograd_rows(sig: Signature) -> int:
    """Input rows of one whole band of the Winograd layout the engine runs the full conv with (0: not
    Winograd). Its weight transform is made once per band (chunks: once per image), so a probe of fewer
    rows would pay it over fewer tiles: F(4×4)'s U, 36 values per weight's 9, made the 512-channel
    probe at 64×64 (22 of 64 rows) look barely faster than F(2×2)."""
    (_, c, h, w_in), (m, cg, kh, kw) = sig.shapes
    attrs = dict(sig.attrs)
    if (sig.op == "upsample_conv" or (kh, kw) != (3, 3) or c != cg
            or any(int(v) != 1 for v in (*(attrs.get("strides") or ()), *(attrs.get("dilations") or ())))):
        return 0
    layout = winograd_layout(cg, m, (h, w_in), 1)  # pads 1: the output is the input's size
    return 0 if layout is None else min(h, getattr(layout, "tile", 2) * layout.tile_rows)


def _conv_attrs(sig: Signature) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in sig.attrs if k != "act"}


def conv_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    x_shape = _conv_input(sig, max_macs)
    nodes, weights = stored_weight(sig.shapes[1], sig.storage, 0, rng)
    source = "x"
    if sig.op == "upsample_conv":
        weights["scales"] = np.array([1, 1, 2, 2], np.float32)
        nodes.append(helper.make_node("Resize", ["x", "", "scales"], ["u"], mode="nearest",
                                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
        source = "u"
    nodes.append(helper.make_node("Conv", [source, "w"], ["y"], **_conv_attrs(sig)))
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    return probe_model(nodes, {"x": x_shape}, "y", weights), feeds


def norm_conv_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    """GroupNorm as exported (Reshape, InstanceNormalization, Reshape to Shape(x), Mul, Add), SiLU if
    the step has it, then the conv: the engine fuses it into GroupNormStats + NormConv as in the model,
    so the probe times the normalisation the conv applies band by band too."""
    x_shape = _conv_input(sig, max_macs)
    c = x_shape[1]
    groups = math.gcd(c, 32)
    nodes, weights = stored_weight(sig.shapes[1], sig.storage, 0, rng)
    weights.update({"g_shape": np.array([0, groups, -1], np.int64), "ones": np.ones(groups, np.float32),
                    "zeros": np.zeros(groups, np.float32), "gamma": np.ones((c, 1, 1), np.float32),
                    "beta": np.zeros((c, 1, 1), np.float32)})
    nodes += [helper.make_node("Reshape", ["x", "g_shape"], ["g"]),
              helper.make_node("InstanceNormalization", ["g", "ones", "zeros"], ["n"], epsilon=1e-5),
              helper.make_node("Shape", ["x"], ["x_shape"]),
              helper.make_node("Reshape", ["n", "x_shape"], ["r"]),
              helper.make_node("Mul", ["r", "gamma"], ["m"]),
              helper.make_node("Add", ["m", "beta"], ["a"])]
    source = "a"
    if sig.attr("act"):
        nodes += [helper.make_node("Sigmoid", ["a"], ["sg"]), helper.make_node("Mul", ["a", "sg"], ["silu"])]
        source = "silu"
    nodes.append(helper.make_node("Conv", [source, "w"], ["y"], **_conv_attrs(sig)))
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


def geglu_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    """The transformer's feed-forward as exported: ``x @ W1 + b1``, its two halves, the exact GELU of
    the second (Div, Erf, Add, Mul, Mul), their product ``@ W2``: the engine fuses it into GegluFF."""
    x, (k, wide), w2 = sig.shapes
    half = wide // 2
    total = math.prod(x[:-1])
    per_row = k * wide + half * w2[1]
    tokens = _same_threads(max(_rows(total, per_row, max_macs), min(total, MIN_TOKENS)), total, k * wide)
    first, weights = stored_weight((k, wide), sig.storage, 1, rng, "w1")
    second, more = stored_weight(tuple(w2), sig.storage, 1, rng, "w2")
    weights.update(more)
    weights.update({"b1": np.zeros(wide, np.float32), "starts0": np.array([0], np.int64),
                    "mid": np.array([half], np.int64), "end": np.array([wide], np.int64),
                    "axis": np.array([-1], np.int64), "sqrt2": np.array(2 ** 0.5, np.float32),
                    "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32)})
    nodes = [*first, *second,
             helper.make_node("MatMul", ["x", "w1"], ["p"]), helper.make_node("Add", ["p", "b1"], ["pb"]),
             helper.make_node("Slice", ["pb", "starts0", "mid", "axis"], ["hidden"]),
             helper.make_node("Slice", ["pb", "mid", "end", "axis"], ["gate"]),
             helper.make_node("Div", ["gate", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["gate", "e1"], ["ge"]),
             helper.make_node("Mul", ["ge", "half"], ["gelu"]),
             helper.make_node("Mul", ["hidden", "gelu"], ["prod"]), helper.make_node("MatMul", ["prod", "w2"], ["y"])]
    feeds = {"x": rng.standard_normal((1, tokens, k)).astype(np.float32)}
    proto = probe_model(nodes, {"x": (1, tokens, k)}, "y", weights)
    if sig.attr("blas_one_thread"):
        _hold_blas_on_one_thread(proto, feeds)
    return proto, feeds


def _hold_blas_on_one_thread(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """Run a tiny MatMul on a weight first (a self-splitting step: the engine puts BLAS on one thread),
    as the model's steps before the probed one left it; its result is a second output, so it stays."""
    graph = proto.graph
    graph.initializer.append(numpy_helper.from_array(np.eye(8, dtype=np.float32), "one_thread_w"))
    graph.input.append(helper.make_tensor_value_info("one_thread_x", FLOAT, [1, 8]))
    graph.output.append(helper.make_tensor_value_info("one_thread_y", FLOAT, None))
    graph.node.insert(0, helper.make_node("MatMul", ["one_thread_x", "one_thread_w"], ["one_thread_y"]))
    feeds["one_thread_x"] = np.ones((1, 8), np.float32)


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
    scaled = "Mul" in sig.attr("score_ops", ("Mul",))  # as the model's scores (a folded scale: none)
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             *([helper.make_node("Mul", ["s", "scale"], ["t"])] if scaled else []),
             helper.make_node("Softmax", ["t" if scaled else "s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return probe_model(nodes, shapes, "y", {"scale": np.array(dim ** -0.5, np.float32)} if scaled else {}), feeds


def activation_matmul_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    """``a @ b`` with both operands activations (attention products the engine did not fuse)."""
    a, b = sig.shapes[:2]
    lead = a[:-2]
    heads = math.prod(lead) if lead else 1
    rows = _rows(a[-2] if len(a) > 1 else 1, heads * a[-1] * b[-1], max_macs)
    shapes = {"a": (1, heads, rows, a[-1]), "b": (1, heads, b[-2], b[-1])}
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return probe_model([helper.make_node("MatMul", ["a", "b"], ["y"])], shapes, "y", {}), feeds


DECODE_SHAPE = (4096, 2048, 1, 1)  # 8 M values: 16 MB as fp16 (read block by block), 2 float32 blocks


def decode_probe(storage: str, rng: np.random.Generator) -> Probe:
    """A 1×1 conv of a one-pixel image with a big ``storage`` weight: all but nothing of its time is
    the engine reading and decoding the weight's blocks (``weight_decoding``), as every DecodedWeight
    step does once per call whatever its compute; the measured cost per decoded value."""
    nodes, weights = stored_weight(DECODE_SHAPE, storage, 0, rng)
    nodes.append(helper.make_node("Conv", ["x", "w"], ["y"]))
    x_shape = (1, DECODE_SHAPE[1], 1, 1)
    return probe_model(nodes, {"x": x_shape}, "y", weights), {"x": rng.standard_normal(x_shape).astype(np.float32)}


def build_probe(sig: Signature, max_macs: int, rng: np.random.Generator) -> Probe:
    if sig.op in ("conv", "upsample_conv"):
        return conv_probe(sig, max_macs, rng)
    if sig.op == "norm_conv":
        return norm_conv_probe(sig, max_macs, rng)
    if sig.op == "matmul":
        return matmul_probe(sig, max_macs, rng)
    if sig.op == "geglu":
        return geglu_probe(sig, max_macs, rng)
    return attention_probe(sig, max_macs, rng)
