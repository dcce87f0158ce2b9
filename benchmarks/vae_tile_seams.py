"""Tiled against untiled VAE decode of the same latent on a full-size decoder: PSNR and max error.

    python benchmarks/vae_tile_seams.py --pipeline /tmp/sdxlfig/sdxl-turbo-uint8 --latent 64 \
        --layouts 32/8 36/8 34/4

Each layout is ``TILE/OVERLAP`` (square tiles of TILE latent pixels, the layout ``vae.tiles`` makes
for them); the latent is a seeded standard normal draw fed to the decoder as it is (a random-weight
export has no trained latent space to aim at). Prints CPU seconds per
decode beside wall seconds (the machine is shared).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from frame.diffusion import load_pipeline
from frame.diffusion.vae.decoder import decode_tiled, to_pixels
from frame.diffusion.vae.tiles import fixed_layout
from frame.engine import load_model


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def timed(fn):  # noqa: ANN001, ANN201
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--latent", type=int, default=64)
    parser.add_argument("--layouts", nargs="+", default=["32/8", "36/8"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pipe = load_pipeline(args.pipeline)
    size = args.latent
    latents = np.random.default_rng(args.seed).standard_normal((1, 4, size, size)).astype(np.float32)
    model = load_model(pipe.vae_source)
    whole, wall, cpu = timed(lambda: to_pixels(model.run({"latent_sample": latents})["sample"].astype(np.float32)))
    print(f"whole {size}x{size}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    for spec in args.layouts:
        tile, overlap = (int(v) for v in spec.split("/"))
        layout = fixed_layout((size, size), (tile, tile), overlap)
        tiled, wall, cpu = timed(lambda: to_pixels(decode_tiled(model, latents, layout)))  # noqa: B023
        error = np.abs(whole.astype(int) - tiled.astype(int))
        print(f"{layout.describe()}: PSNR {psnr(whole, tiled):.1f} dB against whole, max error {error.max()}, "
              f"mean {error.mean():.2f} (of 255); {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)


if __name__ == "__main__":
    main()
