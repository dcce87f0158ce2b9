"""Time frame's Conv kernel (new) against its previous version (old) and onnxruntime on SD 1.5 shapes.

Usage:  python benchmarks/conv_kernel.py [--repeat 2] [--threads 2] [--only SUBSTRING] [--skip-large]
                                        [--baseline im2col|f2]

Each case is a one-node Conv model with weights and bias as initializers, as in a real export.
onnxruntime runs with ``--threads`` intra-op threads and spinning disabled (its idle threads would
otherwise steal the cores from the numpy run that follows); frame's kernel runs through
``bind_node`` + ``spec.fn`` exactly as the engine does; "old" is the banded im2col kernel as it was
before this benchmark (16 MB column bands, kept here only as the baseline), or with ``--baseline f2``
frame's own kernel with Winograd F(4×4, 3×3) switched off (its 3×3 convs as F(2×2, 3×3), as before
F(4×4) was added; the upsampling cases: the fused kernel likewise), both sides then with BLAS on one
thread and the kernel splitting its products over the cores as in an engine run. Runs alternate between the
three sides and the best wall and CPU (all threads of the process) time of each is kept. The last two
columns are the peak memory each frame kernel allocates beyond its output, measured with tracemalloc
(numpy reports its buffers to it) in a separate untimed run.

Two versions of frame's kernel (before and after a change): run this script, with ``--baseline f2``,
alternately with ``PYTHONPATH`` set to each tree (``git archive`` of the older commit), and compare the
"new" columns (the tree's kernel as the engine runs it) and "new/ort CPU" (onnxruntime, unchanged, in
the same process: the load of a shared machine cancels). docs/benchmarks-conv.md has such runs.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from functools import partial

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from frame.engine import blas_threads
from frame.engine.ops import bind_node, conv_winograd
from frame.engine.ops.conv import spatial_params, upsample2x_conv3x3

OLD_COLUMN_BUDGET_BYTES = 16 << 20


def _old_padded_rows(x: np.ndarray, first: int, count: int, pads) -> np.ndarray:
    c, h, w = x.shape
    rows = np.zeros((c, count, pads[1] + w + pads[3]), dtype=x.dtype)
    top, bottom = max(first - pads[0], 0), min(first + count - pads[0], h)
    if bottom > top:
        rows[:, top + pads[0] - first:bottom + pads[0] - first, pads[1]:pads[1] + w] = x[:, top:bottom]
    return rows


def _old_conv_image(x, weight, stride, pads, out_hw, out) -> None:
    """The previous kernel (group 1, no dilation: all the benchmark needs): fixed 16 MB column bands."""
    m, cg, kh, kw = weight.shape
    ho, wo = out_hw
    sh, sw = stride
    depth = cg * kh * kw
    rows = int(max(1, min(ho, OLD_COLUMN_BUDGET_BYTES // (depth * wo * 4))))
    band = np.empty(depth * rows * wo, dtype=np.float32)
    kernel = weight.reshape(m, depth)
    for r0 in range(0, ho, rows):
        count = min(rows, ho - r0)
        source = _old_padded_rows(x, r0 * sh, (count - 1) * sh + kh, pads)
        columns = band[:depth * count * wo].reshape(cg, kh, kw, count, wo)
        for i in range(kh):
            for j in range(kw):
                columns[:, i, j] = source[:, i:i + (count - 1) * sh + 1:sh, j:j + (wo - 1) * sw + 1:sw]
        np.matmul(kernel, columns.reshape(depth, count * wo), out=out[:, r0:r0 + count].reshape(m, count * wo))


def old_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, kernel_shape, pads=None, strides=None) -> np.ndarray:
    strides, _, pads = spatial_params(w.shape[2:], x.shape[2:], strides, None, pads, "NOTSET")
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    ho = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    wo = (wd + pads[1] + pads[3] - kw) // strides[1] + 1
    out = np.empty((n, m, ho, wo), dtype=np.float32)
    if kh == kw == 1 and strides == [1, 1] and not any(pads):
        np.matmul(w.reshape(m, c), x.reshape(n, c, h * wd), out=out.reshape(n, m, h * wd))
    else:
        for i in range(n):
            _old_conv_image(x[i], w, strides, pads, (ho, wo), out[i])
    out += b.reshape(1, m, 1, 1)
    return out


def as_engine(fn: Callable[[], np.ndarray]) -> Callable[[], np.ndarray]:
    """``fn`` with BLAS on one thread and the kernel splitting its products itself, as the engine runs a
    Conv step (``blas_threads.fit_step``)."""
    def run() -> np.ndarray:
        blas_threads.shared().fit_step("Conv", [])
        try:
            return fn()
        finally:
            blas_threads.shared().restore()
    return run


def f2_only(fn: Callable[[], np.ndarray]) -> Callable[[], np.ndarray]:
    """``fn`` run with Winograd F(4×4) off: the planner takes F(2×2) (or im2col) as before it."""
    def run() -> np.ndarray:
        saved, conv_winograd.MIN_OUTPUTS_F4 = conv_winograd.MIN_OUTPUTS_F4, 1 << 30
        try:
            return fn()
        finally:
            conv_winograd.MIN_OUTPUTS_F4 = saved
    return run


def _extra_bytes(fn: Callable[[], np.ndarray]) -> int:
    """Peak bytes allocated while ``fn`` runs, minus its result's own bytes."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return max(peak - result.nbytes, 0)


def _session(node: onnx.NodeProto, x: np.ndarray, weights: list[np.ndarray], threads: int):
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [onnx.ValueInfoProto(name="y")], initializer=[numpy_helper.from_array(w, n) for w, n in
                                                     zip(weights, ["w", "b"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _case(name: str, cin: int, cout: int, hw: int, kernel: int, stride: int, args: argparse.Namespace) -> None:
    """Build one Conv, time ORT / old / new, print one Markdown row."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, cin, hw, hw), dtype=np.float32)
    w = rng.standard_normal((cout, cin, kernel, kernel), dtype=np.float32) * float((cin * kernel * kernel) ** -0.5)
    b = rng.standard_normal(cout, dtype=np.float32)
    pad = kernel // 2
    attrs = {"kernel_shape": [kernel, kernel], "pads": [pad] * 4, "strides": [stride, stride]}
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    session = _session(node, x, [w, b], args.threads)
    spec, kernel_attrs = bind_node(node, 17)
    new = partial(spec.fn, x, w, b, **kernel_attrs)
    old = partial(old_conv, x, w, b, **attrs)
    if args.baseline == "f2":
        new, old = as_engine(new), as_engine(f2_only(new))
    sides = [lambda: session.run(None, {"x": x})[0], old, new]
    _print_row(name, sides, args)


def _upsample_case(name: str, cin: int, cout: int, hw: int, args: argparse.Namespace) -> None:
    """Resize(nearest x2) -> Conv 3x3: onnxruntime's two nodes, frame's two kernels, the fused kernel."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, cin, hw, hw), dtype=np.float32)
    w = rng.standard_normal((cout, cin, 3, 3), dtype=np.float32) * float((cin * 9) ** -0.5)
    b = rng.standard_normal(cout, dtype=np.float32)
    resize = helper.make_node("Resize", ["x", "", "scales"], ["up"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    conv = helper.make_node("Conv", ["up", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    scales = np.array([1, 1, 2, 2], np.float32)
    graph = helper.make_graph(
        [resize, conv], "up", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [onnx.ValueInfoProto(name="y")], initializer=[numpy_helper.from_array(a, n) for a, n in
                                                      zip([scales, w, b], ["scales", "w", "b"])])
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                                   .SerializeToString(), options, providers=["CPUExecutionProvider"])
    (resize_spec, resize_attrs), (conv_spec, conv_attrs) = bind_node(resize, 17), bind_node(conv, 17)

    def two_kernels() -> np.ndarray:
        return conv_spec.fn(resize_spec.fn(x, None, scales, **resize_attrs), w, b, **conv_attrs)

    new, old = partial(upsample2x_conv3x3, x, w, b), two_kernels
    if args.baseline == "f2":
        new, old = as_engine(new), as_engine(f2_only(new))
    sides = [lambda: session.run(None, {"x": x})[0], old, new]
    _print_row(name, sides, args)


def _print_row(name: str, sides: list[Callable[[], np.ndarray]], args: argparse.Namespace) -> None:
    """Time the three sides alternately, then print best wall/CPU, ratios, extra memory, difference."""
    wall, cpu, results = [float("inf")] * 3, [float("inf")] * 3, [None] * 3
    for _ in range(args.repeat):
        for i, fn in enumerate(sides):
            start_cpu, start = time.process_time(), time.perf_counter()
            results[i] = fn()
            wall[i] = min(wall[i], time.perf_counter() - start)
            cpu[i] = min(cpu[i], time.process_time() - start_cpu)
    want = results[0]
    error = max(float(np.max(np.abs(r - want)) / np.max(np.abs(want))) for r in results[1:])
    results.clear()
    old_mb, new_mb = (_extra_bytes(fn) / 2**20 for fn in sides[1:])
    ms = [f"{t * 1e3:.0f}" for t in wall] + [f"{t * 1e3:.0f}" for t in cpu]
    print(f"| {name} | {' | '.join(ms)} | {wall[2] / wall[0]:.2f} | {cpu[1] / cpu[0]:.2f} | "
          f"{cpu[2] / cpu[0]:.2f} | {old_mb:.0f} | {new_mb:.0f} | {error:.1e} |", flush=True)


# name, Cin, Cout, H=W, kernel, stride, large (VAE at 256/512: seconds per run)
CASES = [
    ("UNet 3x3 320->320 @64", 320, 320, 64, 3, 1, False),
    ("UNet 3x3 640->320 @64 (up)", 640, 320, 64, 3, 1, False),
    ("UNet 3x3 640->640 @32", 640, 640, 32, 3, 1, False),
    ("UNet 3x3 1280->1280 @16", 1280, 1280, 16, 3, 1, False),
    ("UNet 3x3 2560->1280 @16 (up)", 2560, 1280, 16, 3, 1, False),
    ("UNet 3x3 1280->1280 @8", 1280, 1280, 8, 3, 1, False),
    ("UNet 3x3 s2 320->320 @64 (down)", 320, 320, 64, 3, 2, False),
    ("UNet 3x3 s2 640->640 @32 (down)", 640, 640, 32, 3, 2, False),
    ("UNet 1x1 640->320 @64 (shortcut)", 640, 320, 64, 1, 1, False),
    ("UNet 1x1 2560->1280 @16 (shortcut)", 2560, 1280, 16, 1, 1, False),
    ("VAE 3x3 512->512 @64", 512, 512, 64, 3, 1, False),
    ("VAE 3x3 512->512 @128", 512, 512, 128, 3, 1, False),
    ("VAE 3x3 256->256 @256", 256, 256, 256, 3, 1, False),
    ("VAE 1x1 512->256 @256 (shortcut)", 512, 256, 256, 1, 1, False),
    # the decoder's 3x3 convs on a 36x36-latent tile (2x2 of them decode SDXL's 64x64 latent: 512²)
    ("VAE 3x3 512->512 @36 (tile)", 512, 512, 36, 3, 1, False),
    ("VAE 3x3 512->512 @72 (tile)", 512, 512, 72, 3, 1, False),
    ("VAE 3x3 512->256 @144 (tile)", 512, 256, 144, 3, 1, False),
    ("VAE 3x3 256->256 @144 (tile)", 256, 256, 144, 3, 1, False),
    ("VAE 3x3 256->128 @288 (tile)", 256, 128, 288, 3, 1, False),
    ("VAE 3x3 128->128 @288 (tile)", 128, 128, 288, 3, 1, False),
    ("VAE 3x3 256->256 @512", 256, 256, 512, 3, 1, True),
    ("VAE 3x3 256->128 @512", 256, 128, 512, 3, 1, True),
    ("VAE 3x3 128->128 @512", 128, 128, 512, 3, 1, True),
    ("VAE 3x3 128->3 @512 (conv_out)", 128, 3, 512, 3, 1, True),
]

UPSAMPLE_CASES = [
    ("VAE up x2+3x3 512->512 64->128", 512, 512, 64, False),
    ("VAE up x2+3x3 512->512 128->256", 512, 512, 128, False),
    ("VAE up x2+3x3 256->256 256->512", 256, 256, 256, True),
    ("UNet up x2+3x3 1280->1280 16->32", 1280, 1280, 16, False),
    ("UNet up x2+3x3 640->640 32->64", 640, 640, 32, False),
]


def _chosen(name: str, only: str) -> bool:
    return any(part in name for part in only.split(","))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default="", help="run only cases whose name contains this (or, comma-separated, "
                        "any of these)")
    parser.add_argument("--skip-large", action="store_true", help="skip the VAE 512x512 cases")
    parser.add_argument("--baseline", choices=["im2col", "f2"], default="im2col",
                        help="old: the 16 MB-band im2col kernel, or frame's kernel without Winograd F(4x4)")
    args = parser.parse_args()
    print("| case | ort ms | old ms | new ms | ort CPU ms | old CPU ms | new CPU ms | new/ort wall | "
          "old/ort CPU | new/ort CPU | old extra MB | new extra MB | max rel diff |")
    print("|---|" + "---|" * 12)
    for name, cin, cout, hw, kernel, stride, large in CASES:
        if _chosen(name, args.only) and not (large and args.skip_large):
            _case(name, cin, cout, hw, kernel, stride, args)
    # old = frame's Resize kernel then Conv kernel (what the runtime runs today), new = fused kernel
    for name, cin, cout, hw, large in UPSAMPLE_CASES:
        if _chosen(name, args.only) and not (large and args.skip_large):
            _upsample_case(name, cin, cout, hw, args)


if __name__ == "__main__":
    main()
