"""SD's two convs on the narrow-conv path (issue 14): their time, and the full-size VAE decoder's peak.

The narrow kernel (``ops.conv_im2col.narrow_conv2d``: dense, stride 1, at least ``NARROW_RATIO``
times more input than output channels) takes SD's output convs, UNet ``conv_out`` (320 -> 4) and VAE
``conv_out`` (128 -> 3). It pads the whole input, which the banded im2col kernel avoids, so this
checks both sides of the trade:

* ``--convs``: each conv called through ``ops.conv.conv`` with the narrow path on, then off
  (``NARROW_RATIO`` patched), wall and CPU seconds per call (process CPU time, all threads);
* ``--vae SIDE``: the full-size VAE decoder of ``benchmarks/engine_vs_onnxruntime.py`` decoding a
  SIDE x SIDE latent (32: one default tile; 64: a whole 512x512 picture) in a child process, one
  warm-up decode then one timed, its own VmHWM. ``--tree DIR`` runs the child on another checkout's
  ``frame`` (e.g. ``git archive e78ad0f | tar -x -C DIR``, the tree before issue 14).

    .venv/bin/python benchmarks/narrow_conv_sd.py --convs
    .venv/bin/python benchmarks/narrow_conv_sd.py --vae 32 [--tree DIR] [--cache /work/cache/sd15-full]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONVS = (("VAE conv_out", 128, 3, 512), ("UNet conv_out", 320, 4, 64))


def time_convs(repeat: int) -> None:
    import frame.engine.ops.conv as conv

    rng = np.random.default_rng(0)
    for name, c, m, side in CONVS:
        x = rng.standard_normal((1, c, side, side)).astype(np.float32)
        w = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
        outputs = {}
        for label, ratio in (("narrow", 4), ("im2col", 10**9)):
            conv.NARROW_RATIO = ratio
            for _ in range(repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                outputs[label] = conv.conv(x, w, pads=[1, 1, 1, 1])
                print(f"{name} {c}->{m} at {side}x{side}, {label}: {time.perf_counter() - wall:.3f} s wall, "
                      f"{time.process_time() - cpu:.3f} CPU-s", flush=True)
        np.testing.assert_allclose(outputs["narrow"], outputs["im2col"], rtol=1e-4, atol=1e-3)


def vae_child(model: str, side: int) -> None:
    from frame.engine import load_model

    latent = np.random.default_rng(0).standard_normal((1, 4, side, side)).astype(np.float32)
    with load_model(model) as vae:
        vae.run({"latent_sample": latent})
        wall, cpu = time.perf_counter(), time.process_time()
        vae.run({"latent_sample": latent})
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    status = Path("/proc/self/status").read_text().splitlines()
    hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    import frame

    print(json.dumps({"frame": str(Path(frame.__file__).parent), "latent": side, "peak_mb": round(hwm, 1),
                      "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--convs", action="store_true")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--vae", type=int, metavar="SIDE")
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout whose frame package runs the VAE")
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/sd15-full"))
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "SIDE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        vae_child(args.child[0], int(args.child[1]))
    if args.convs:
        time_convs(args.repeat)
    if args.vae:
        env = {**os.environ, "PYTHONPATH": str(args.tree.resolve())}
        model = str(args.cache / "vae_decoder" / "model.onnx")
        # run from / so that neither the current folder nor this script's shadows --tree's frame
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", model, str(args.vae)], env=env,
                       cwd="/", check=True)


if __name__ == "__main__":
    main()
