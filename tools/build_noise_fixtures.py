"""Reference draws and seeded renders for frame's noise sources (``frame.diffusion.noise``).

Dev-only (torch, diffusers, onnxruntime). Writes ``tests/fixtures/noise/``:

* ``torch_cpu.npz``: for each seed, the draws ``torch.randn(shape, generator=g)`` gives one after
  another from one ``torch.Generator().manual_seed(seed)`` for the shapes a render draws (a latent,
  step noise of the same shape, a size that is not a multiple of 16, sizes under 16), so CI without
  torch still checks frame's numpy copy bit for bit;
* ``a1111_nv.npz``: the same draws from frame's ``PhiloxNoise`` (a regression record: its check
  against A1111's own ``rng_philox.py`` output is in tests/diffusion/test_noise_sources.py and the
  commit that added it);
* ``seeded_<kind>.npz``: diffusers' euler_a render of the tiny pipeline fixture
  (tests/fixtures/pipelines/<kind>/model) from a seed alone: ``randn_tensor`` with
  ``generator=torch.Generator().manual_seed(seed)`` for the latent, as ``prepare_latents`` draws
  it, and ``EulerAncestralDiscreteScheduler.step(..., generator=generator)`` for the step noise, with
  the UNet and VAE run by onnxruntime from the export (the same route ``onnx_reference_pipeline``
  takes, which the pipeline fixtures check against diffusers' torch render).

    /work/main/.venv/bin/python tools/build_noise_fixtures.py [--out tests/fixtures/noise]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import onnx_export as ox  # noqa: E402
import onnx_reference_pipeline as orp  # noqa: E402
import pipeline_cases as pc  # noqa: E402

from frame.diffusion.noise.philox import PhiloxNoise  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEEDS = (0, 7, 42, 123456789, 2**32 - 1)
# a 96x64 latent, its step noise, a latent whose size is no multiple of 16, then sizes under 16
# (torch's double-precision path, whose second value waits in the generator for the next draw)
SHAPES = ((1, 4, 8, 12), (1, 4, 8, 12), (1, 4, 9, 7), (3,), (5,), (1,), (2, 3), (16,), (17,), (1, 4, 8, 12))
RENDER = {"sd15": dict(seed=1234, steps=6, guidance=7.5, width=96, height=64),
          "sdxl": dict(seed=99, steps=5, guidance=6.0, width=96, height=64)}
PROMPT = "a lighthouse on a cliff at dusk, oil painting, 4k"
NEGATIVE = "blurry, low quality"


def torch_draws(seed: int) -> list[np.ndarray]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator).numpy() for shape in SHAPES]


def philox_draws(seed: int) -> list[np.ndarray]:
    noise = PhiloxNoise(seed)
    return [noise.normal(shape) for shape in SHAPES]


def draws_file(path: Path, make) -> None:
    arrays = {f"s{seed}_d{i}": draw for seed in SEEDS for i, draw in enumerate(make(seed))}
    np.savez(path, seeds=np.array(SEEDS, dtype=np.uint64), **arrays)


def seeded_render(kind: str) -> dict[str, np.ndarray]:
    """diffusers' euler_a sampling from a seed alone (see the module docstring)."""
    from diffusers.utils.torch_utils import randn_tensor

    spec = RENDER[kind]
    model = REPO / "tests" / "fixtures" / "pipelines" / kind / "model"
    index = json.loads((model / "model_index.json").read_text())
    case = pc.Case(f"seeded_{kind}", "euler_a", PROMPT, NEGATIVE, spec["steps"], spec["guidance"], spec["width"],
                   spec["height"], "")
    scheduler = pc.make_scheduler(case, json.loads((model / "scheduler" / "scheduler_config.json").read_text()))
    scheduler.set_timesteps(case.steps)
    cond = orp._conditioning(model, case, "text_encoder_2" in index, index.get("force_zeros_for_empty_prompt", False))
    generator = torch.Generator().manual_seed(spec["seed"])
    shape = (1, 4, case.height // 8, case.width // 8)
    start = randn_tensor(shape, generator=generator, device=torch.device("cpu"), dtype=torch.float32)
    latents = start * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        x = scheduler.scale_model_input(torch.cat([latents] * 2), t)
        feeds = {"sample": x.numpy().astype(np.float32), "timestep": np.array([float(t)], np.float32), **cond}
        eps = ox.run_ort(model / "unet" / "model.onnx", feeds)["out_sample"]
        eps = eps[:1] + case.guidance * (eps[1:] - eps[:1])
        latents = scheduler.step(torch.from_numpy(eps), t, latents, generator=generator).prev_sample
    image = orp._decode(model, latents)
    return {"image": image.astype(np.float32), "start_noise": start.numpy(), "latents": latents.numpy(),
            "settings": np.array(json.dumps({**spec, "prompt": PROMPT, "negative_prompt": NEGATIVE,
                                             "sampler": "euler_a"}))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "noise")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    draws_file(args.out / "torch_cpu.npz", torch_draws)
    draws_file(args.out / "a1111_nv.npz", philox_draws)
    for kind in RENDER:
        np.savez(args.out / f"seeded_{kind}.npz", **seeded_render(kind))
    print(f"wrote {sorted(p.name for p in args.out.iterdir())} "
          f"({sum(p.stat().st_size for p in args.out.iterdir()) / 1024:.0f} KiB; torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
