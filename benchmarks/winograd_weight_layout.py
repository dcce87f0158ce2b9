"""F(4×4, 3×3)'s weight transform at the UNet's small sizes: today's layout against a prototype.

``conv_winograd.transform_weight`` writes U as (36, M, C): one GEMM Kᵀ (36 × 9) @ gᵀ (9 × M·C) whose
inner dimension is 9, which BLAS runs far below its rate (1280 → 640 channels at 32×32: 34 ms of the
conv's 116). The prototype writes U as (M, 36, C) instead — per output channel one (36 × 9) @ (9 × C)
product, batched — and the GEMMs read U[:, ξ, :] (rows 36·C apart: still a BLAS matrix); it also
splits the input channels into blocks of ``--block`` (U of 64 outputs × 128 inputs is 1.2 MB, in
cache while its GEMMs read it; the results are summed). Input and output transforms are
``conv_winograd``'s own. Each conv runs today's kernel (``winograd_conv3x3`` with ``plan``'s
layout: F(4×4) at 32×32, F(2×2) at 16×16) and the prototype, interleaved, ``--runs`` times; medians
of process CPU time. The prototype's output is checked against today's.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/winograd_weight_layout.py --runs 5

This was the investigation; the engine's chunk layout now builds U this way
(``conv_winograd.transform_weight_block``, blocks of ``WEIGHT_BLOCK`` = 128 input channels where a band
has at most 128 tiles), so "today" here is that kernel and the ratio is about 1. The before/after
measurement is in docs/benchmarks-conv.md ("Transformed weight in blocks").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frame.engine.ops import conv_winograd as cw  # noqa: E402
from frame.engine.ops.conv_winograd import (  # noqa: E402
    G4,
    input_scratch,
    output_scratch,
    transform_input,
    transform_output,
    weight_transform_t,
)

KT = weight_transform_t(G4)  # (36, 9)
CONVS = [(640, 640, 32), (1280, 640, 32), (1280, 1280, 32), (1280, 1280, 16), (2560, 1280, 16)]
CHUNK = 64


def prototype(x: np.ndarray, w: np.ndarray, out: np.ndarray, block: int) -> None:
    """F(4×4) of x (C, H, W) with w (M, C, 3, 3), padding 1, stride 1, into out (M, H, W): one band."""
    c, h, wd = x.shape
    m = w.shape[0]
    th, tw = -(-h // 4), -(-wd // 4)
    padded = np.zeros((c, 4 * th + 2, 4 * tw + 2), np.float32)
    padded[:, 1:h + 1, 1:wd + 1] = x
    width = padded.shape[2]
    v = np.empty((36, c, th * tw), np.float32)
    transform_input(4, padded, (th, tw), v, np.empty(input_scratch(4, c, th, width, tw), np.float32))
    mo = np.empty((36, CHUNK, th * tw), np.float32)
    part = np.empty_like(mo)
    u = np.empty((CHUNK, 36, block), np.float32)
    out_scratch = np.empty(output_scratch(4, CHUNK, th * tw), np.float32)
    for m0 in range(0, m, CHUNK):
        m1 = min(m0 + CHUNK, m)
        for c0 in range(0, c, block):
            c1 = min(c0 + block, c)
            ub = u[:m1 - m0, :, :c1 - c0]
            np.matmul(KT, w[m0:m1, c0:c1].reshape(m1 - m0, c1 - c0, 9).transpose(0, 2, 1), out=ub)
            target = mo[:, :m1 - m0] if c0 == 0 else part[:, :m1 - m0]
            np.matmul(ub.transpose(1, 0, 2), v[:, c0:c1], out=target)
            if c0:
                np.add(mo[:, :m1 - m0], target, out=mo[:, :m1 - m0])
        transform_output(4, mo[:, :m1 - m0], (th, tw), out[m0:m1], out_scratch)


def cpu_ms(run, *args) -> float:
    start = time.process_time()
    run(*args)
    return (time.process_time() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--block", type=int, default=128, help="input channels per U block of the prototype")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| conv | today's layout | today ms CPU | prototype F(4×4) ms CPU | prototype / today | max error / scale |")
    print("|---|---|---|---|---|---|")
    for c, m, hw in CONVS:
        x = rng.standard_normal((c, hw, hw)).astype(np.float32)
        w = (rng.standard_normal((m, c, 3, 3)) * 0.02).astype(np.float32)
        layout = cw.plan(c, m, (hw, hw), 64 << 20, 1)
        today, proto = np.empty((m, hw, hw), np.float32), np.empty((m, hw, hw), np.float32)
        times: dict[str, list[float]] = {"today": [], "proto": []}
        for _ in range(args.runs):
            times["today"].append(cpu_ms(cw.winograd_conv3x3, x, w, [1, 1, 1, 1], today, layout))
            times["proto"].append(cpu_ms(prototype, x, w, proto, args.block))
        error = float(np.abs(proto - today).max() / np.abs(today).max())
        a, b = statistics.median(times["today"]), statistics.median(times["proto"])
        print(f"| {c} → {m} at {hw}×{hw} | F({layout.tile}×{layout.tile}), chunk {layout.chunk} | {a:.1f} | "
              f"{b:.1f} | {b / a:.2f} | {error:.1e} |", flush=True)


if __name__ == "__main__":
    main()
