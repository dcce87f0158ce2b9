"""Time frame's numpy kernels against onnxruntime on one-node models of the shapes that dominate SD 1.5.

Usage:  python benchmarks/ops_vs_onnxruntime.py [--repeat 5] [--threads 2]

Each case builds a one-node ONNX model (weights as initializers, as in a real export), runs it in
onnxruntime (``--threads`` intra-op threads, all optimisations) and runs the frame kernel through
``bind_node`` + ``spec.fn`` exactly as the engine does. Prints (as a Markdown table) the best wall
and CPU time of each side (runs alternate
so that load from other processes hits both alike), the ratio frame / onnxruntime and the largest
relative difference, so the runtime knows where time goes.
The numpy side uses however many BLAS threads OpenBLAS is given (OPENBLAS_NUM_THREADS).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from frame.engine.ops import bind_node


def _best_times(first: Callable[[], object], second: Callable[[], object], repeat: int):
    """Best wall and CPU time of each side, the runs alternating so load changes hit both alike.

    CPU time (all threads of this process) is the steadier figure on a shared, loaded machine.
    """
    wall, cpu = [float("inf")] * 2, [float("inf")] * 2
    results: list[object] = [None, None]
    for _ in range(repeat):
        for i, fn in enumerate((first, second)):
            start_cpu, start = time.process_time(), time.perf_counter()
            results[i] = fn()
            wall[i] = min(wall[i], time.perf_counter() - start)
            cpu[i] = min(cpu[i], time.process_time() - start_cpu)
    return wall, cpu, results


def _case(name: str, op: str, x: np.ndarray, weights: list[np.ndarray], attrs: dict, args: argparse.Namespace):
    """Build the one-node model, run both sides, print one line."""
    weight_names = [f"w{i}" for i in range(len(weights))]
    node = helper.make_node(op, ["x", *weight_names], ["y"], **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [onnx.ValueInfoProto(name="y")],
        initializer=[numpy_helper.from_array(w, n) for w, n in zip(weights, weight_names)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    # onnxruntime's threads spin after each run by default, which would steal the cores from the
    # frame run that follows; real pipelines run one engine at a time.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    spec, kernel_attrs = bind_node(node, 17)
    wall, cpu, ((want,), got) = _best_times(
        lambda: session.run(None, {"x": x}), lambda: spec.fn(x, *weights, **kernel_attrs), args.repeat)
    error = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
    print(f"| {name} | {wall[0] * 1e3:.1f} | {wall[1] * 1e3:.1f} | {wall[1] / wall[0]:.2f} | "
          f"{cpu[0] * 1e3:.0f} | {cpu[1] * 1e3:.0f} | {cpu[1] / max(cpu[0], 1e-9):.2f} | {error:.1e} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| case | onnxruntime ms | frame ms | ratio | ort CPU ms | frame CPU ms | CPU ratio | max rel diff |")
    print("|---|---|---|---|---|---|---|---|")

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32)

    conv3 = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    _case("Conv 3x3 320->320 on 1x320x64x64", "Conv", rand(1, 320, 64, 64),
          [rand(320, 320, 3, 3) * 0.02, rand(320)], conv3, args)
    _case("Conv 3x3 stride 2 320->320 on 1x320x64x64", "Conv", rand(1, 320, 64, 64),
          [rand(320, 320, 3, 3) * 0.02, rand(320)], conv3 | {"strides": [2, 2]}, args)
    _case("Conv 3x3 1280->1280 on 1x1280x8x8", "Conv", rand(1, 1280, 8, 8),
          [rand(1280, 1280, 3, 3) * 0.01, rand(1280)], conv3, args)
    _case("Conv 1x1 320->320 on 1x320x64x64", "Conv", rand(1, 320, 64, 64),
          [rand(320, 320, 1, 1) * 0.05, rand(320)], {"kernel_shape": [1, 1]}, args)
    _case("MatMul 1x4096x320 @ 320x320", "MatMul", rand(1, 4096, 320), [rand(320, 320) * 0.05], {}, args)
    _case("MatMul 1x4096x320 @ 320x2560 (GEGLU)", "MatMul", rand(1, 4096, 320), [rand(320, 2560) * 0.05], {}, args)
    _case("MatMul 8x4096x40 @ 8x40x4096 (scores)", "MatMul", rand(8, 4096, 40), [rand(8, 40, 4096)], {}, args)
    _case("MatMul 8x4096x4096 @ 8x4096x40 (values)", "MatMul", rand(8, 4096, 4096), [rand(8, 4096, 40)], {}, args)
    _case("Softmax 8x4096x4096", "Softmax", rand(8, 4096, 4096), [], {"axis": -1}, args)
    _case("InstanceNorm 1x32x40960 (GroupNorm 320ch)", "InstanceNormalization", rand(1, 32, 40960),
          [rand(32), rand(32)], {"epsilon": 1e-5}, args)
    _case("LayerNorm 1x4096x320", "LayerNormalization", rand(1, 4096, 320), [rand(320), rand(320)], {}, args)
    _case("Erf 1x4096x1280", "Erf", rand(1, 4096, 1280), [], {}, args)
    _case("Sigmoid 1x320x64x64", "Sigmoid", rand(1, 320, 64, 64), [], {}, args)
    _case("Mul 1x4096x1280 * 1x4096x1280", "Mul", rand(1, 4096, 1280), [rand(1, 4096, 1280)], {}, args)
    _case("Add 1x320x64x64 + 1x320x1x1", "Add", rand(1, 320, 64, 64), [rand(1, 320, 1, 1)], {}, args)
    _case("Resize nearest x2 1x640x32x32", "Resize", rand(1, 640, 32, 32),
          [np.array([], np.float32), np.array([1, 1, 2, 2], np.float32)],
          {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, args)


if __name__ == "__main__":
    main()
