"""The VAE phase of a night with the full AutoencoderKL and with TAESD, counted at the Pi's constants.

Builds, in a scratch folder, full-size random-weight VAEs with frame's own import (no torch): SD's
AutoencoderKL (widths 128/256/512/512, the decoder SD 1.5 and SDXL share) swapped into a copy of the
bundled demo model with ``frame model import --into``, and TAESD (64 channels, madebyollin's single-file
layout) with ``frame model import --tiny-vae``, both in ``--weights`` precision; then runs ``frame
estimate``'s ``estimate_config`` on that model at ``--size`` with the full VAE and with
``model.vae_decoder: taesd`` and prints the VAE decode and its peak, here and on a Raspberry Pi Zero 2
W. The UNet and text phases are the demo's and mean nothing here: the figure to carry over to a full
model's night is the VAE phase (its decoder graph, latent size, tiles and precision are the night's).
TAESDXL has TAESD's architecture, so its count is the same.

    PYTHONPATH=$PWD python benchmarks/tiny_vae_night.py --weights uint8 --size 512x512
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SD_VAE = {"block_out_channels": [128, 256, 512, 512], "layers_per_block": 2, "latent_channels": 4,
          "norm_num_groups": 32, "in_channels": 3, "out_channels": 3}


def _safetensors(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    from tests.convert.checkpoint.helpers import write_safetensors

    return write_safetensors(path, tensors)


def _random(specs, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {k: (0.02 * rng.standard_normal(s)).astype(np.float16) for k, s in specs}


def build(work: Path, weights: str) -> tuple[Path, Path]:
    """(model folder with the full-size AutoencoderKL, state folder with models/taesd)."""
    from frame.cli.program import main
    from frame.convert.graphs import (
        TinyVaeConfig,
        VaeConfig,
        build_taesd_decoder,
        build_taesd_encoder,
        build_vae_decoder,
        build_vae_encoder,
        weight_specs,
    )
    from frame.models import demo_model_path

    rng = np.random.default_rng(0)
    model = work / "demo-full-vae"
    shutil.copytree(demo_model_path(), model)
    config = {**json.loads((model / "vae_decoder" / "config.json").read_text()), **SD_VAE}
    for graph in ("vae_decoder", "vae_encoder"):
        (model / graph / "config.json").write_text(json.dumps(config))
    cfg = VaeConfig.from_diffusers(config)
    kl = _random(weight_specs(build_vae_decoder(cfg)) + weight_specs(build_vae_encoder(cfg, "parameters")), rng)
    src = _safetensors(work / "vae.safetensors", kl)
    assert main(["model", "import", str(src), "--into", str(model), "--weights", weights]) == 0
    tiny = TinyVaeConfig()
    decoder = _random(weight_specs(build_taesd_decoder(tiny)), rng)
    published = {f"{int(k.split('.')[2]) + 1}.{'.'.join(k.split('.')[3:])}": v for k, v in decoder.items()}
    _safetensors(work / "taesd_decoder.safetensors", published)
    encoder = _random(weight_specs(build_taesd_encoder(tiny)), rng)
    _safetensors(work / "taesd_encoder.safetensors", {k[len("encoder.layers."):]: v for k, v in encoder.items()})
    state = work / "state"
    assert main(["model", "import", "--tiny-vae", "--weights", weights, str(work / "taesd_decoder.safetensors"),
                 str(state / "models" / "taesd")]) == 0
    return model, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", choices=("fp32", "fp16", "uint8"), default="uint8")
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--measure-seconds", type=float, default=3.0)
    parser.add_argument("--keep", metavar="DIR", help="build into DIR and keep it (default: a temporary folder)")
    args = parser.parse_args()
    from frame.config import load_config
    from frame.estimate.configured import estimate_config
    from frame.estimate.report import lines

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tiny-vae-night-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        model, state = build(work, args.weights)
        base = load_config(None, environ={})
        config = replace(base, state_dir=str(state),
                         model=replace(base.model, source=str(model), size=args.size, steps=1, guidance=0.0))
        result = estimate_config(config, measure_seconds=args.measure_seconds, texts=0)
        for line in lines(result):
            if line.startswith(("model:", "VAE:", "peak memory")):
                print(line)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
