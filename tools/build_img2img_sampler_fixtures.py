"""Record diffusers' image-to-image start for every sampler (dev-only: needs torch + diffusers).

Image-to-image runs only the last ``int(steps * strength)`` steps of the schedule, from the clean
latent noised to the first of them. For each case (sampler × scheduler_config × steps × strength)
this calls diffusers' own ``StableDiffusionImg2ImgPipeline.get_timesteps`` on the scheduler (which
also sets the scheduler's begin index), then ``scheduler.add_noise(x0, noise, timesteps[:1])`` as
the pipeline's ``prepare_latents`` does, then the remaining steps with the same fake "UNet" as
``build_sampler_fixtures.py``. Recorded: the start index, the timesteps left, the noised start and
every latent after it, plus any noise the scheduler drew. Output:
``tests/fixtures/samplers/img2img.json`` + ``img2img.npz``.

    .venv/bin/python tools/build_img2img_sampler_fixtures.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from diffusers import StableDiffusionImg2ImgPipeline

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_sampler_fixtures import CONFIGS, OUT, SHAPE, fake_model, scheduler_for  # noqa: E402


def cases() -> list[tuple[str, str, int, float]]:
    out = []
    for sampler in ("euler", "euler_a", "ddim", "dpm++2m", "dpm++2m_karras"):
        for config in ("sd15", "sdxl", "vpred"):
            out += [(sampler, config, 10, strength) for strength in (0.3, 0.55, 1.0)]
        out.append((sampler, "turbo", 2, 0.5))  # SDXL Turbo img2img: 2 steps x 0.5 = one step
    out += [("euler", "sd15", 7, 0.7), ("dpm++2m", "sdxl", 100, 0.29)]  # 7 * 0.7 = 4.8999…, 100 * 0.29 = 28.999…
    out += [("ddim", "zero_snr", 6, 0.8), ("euler", "zero_snr", 6, 0.8)]
    out += [("lcm", c, n, s) for c in ("sd15", "vpred") for n, s in ((4, 0.5), (8, 0.75), (2, 1.0))]
    return out


def run_case(sampler: str, config_name: str, steps: int, strength: float) -> tuple[dict, dict[str, np.ndarray]]:
    scheduler = scheduler_for(sampler, CONFIGS[config_name])
    scheduler.set_timesteps(steps)
    full = scheduler.timesteps.clone()
    timesteps, remaining = StableDiffusionImg2ImgPipeline.get_timesteps(
        SimpleNamespace(scheduler=scheduler), steps, strength, "cpu")
    generator = torch.Generator().manual_seed(4321)
    clean = torch.randn(SHAPE, generator=generator, dtype=torch.float32)
    noise = torch.randn(SHAPE, generator=generator, dtype=torch.float32)
    latents = scheduler.add_noise(clean, noise, timesteps[:1])
    record: dict[str, list] = {"sample": [latents.numpy().copy()], "step_noise": []}
    for t in timesteps:
        output = fake_model(scheduler.scale_model_input(latents, t), float(t))
        before = generator.get_state()
        replay = torch.Generator().set_state(before)
        latents = scheduler.step(output, t, latents, generator=generator).prev_sample
        if not torch.equal(generator.get_state(), before):
            record["step_noise"].append(torch.randn(SHAPE, generator=replay).numpy())
        record["sample"].append(latents.numpy().copy())
    meta = {"sampler": sampler, "config": config_name, "steps": steps, "strength": strength,
            "start": len(full) - len(timesteps), "remaining": int(remaining),
            "timesteps": [float(t) for t in timesteps]}
    arrays = {"clean": clean.numpy(), "noise": noise.numpy(), "sample": np.stack(record["sample"])}
    if record["step_noise"]:
        arrays["step_noise"] = np.stack(record["step_noise"])
    return meta, arrays


def main() -> None:
    manifest = {"configs": CONFIGS, "shape": SHAPE, "cases": []}
    arrays: dict[str, np.ndarray] = {}
    for index, case in enumerate(cases()):
        meta, data = run_case(*case)
        meta["key"] = f"case{index:03d}"
        manifest["cases"].append(meta)
        arrays.update({f"{meta['key']}/{name}": value for name, value in data.items()})
    (OUT / "img2img.json").write_text(json.dumps(manifest, indent=1) + "\n")
    np.savez_compressed(OUT / "img2img.npz", **arrays)
    print(f"wrote {len(manifest['cases'])} cases to {OUT}")


if __name__ == "__main__":
    main()
