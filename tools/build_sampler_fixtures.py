"""Record diffusers' schedulers step by step for frame's sampler tests (dev-only: needs torch + diffusers).

For every case (sampler × scheduler_config × step count) this runs the diffusers scheduler that frame's
sampler mirrors on a fixed 1×4×4×4 starting noise with a fixed fake "UNet" (an elementwise function of
the latent and the timestep) and records the timesteps, sigmas, init_noise_sigma, and per step the
latent, the scaled model input, the model output, the noise the scheduler drew (ancestral samplers) and
the resulting latent. Output: ``tests/fixtures/samplers/cases.json`` + ``cases.npz``.

Usage::

    /work/venv/bin/python tools/build_sampler_fixtures.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from diffusers import (
    DDIMScheduler,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    LCMScheduler,
)

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "samplers"
SHAPE = (1, 4, 4, 4)

SD15 = {
    "_class_name": "PNDMScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear", "beta_start": 0.00085,
    "clip_sample": False, "num_train_timesteps": 1000, "set_alpha_to_one": False, "skip_prk_steps": True,
    "steps_offset": 1, "trained_betas": None,
}
SDXL = {
    **SD15, "_class_name": "EulerDiscreteScheduler", "interpolation_type": "linear",
    "prediction_type": "epsilon", "sample_max_value": 1.0, "timestep_spacing": "leading",
    "use_karras_sigmas": False,
}
TURBO = {**SDXL, "_class_name": "EulerAncestralDiscreteScheduler", "timestep_spacing": "trailing", "steps_offset": 0}
VPRED = {**SD15, "prediction_type": "v_prediction", "timestep_spacing": "linspace"}
ZERO_SNR = {**SD15, "prediction_type": "v_prediction", "rescale_betas_zero_snr": True, "timestep_spacing": "trailing"}
LINEAR = {"_class_name": "DDPMScheduler", "beta_schedule": "linear", "num_train_timesteps": 1000}
COSINE = {"_class_name": "DDPMScheduler", "beta_schedule": "squaredcos_cap_v2", "num_train_timesteps": 1000}


def saved_euler_config() -> dict:
    """scheduler_config.json as diffusers saves ``EulerDiscreteScheduler(SD 1.5 betas, steps_offset=1)``:
    every Euler key written out, ``timestep_spacing: "linspace"`` (Euler's default) among them, and no
    ``clip_sample`` / ``set_alpha_to_one`` (DDIM built from it takes its own defaults, True and True).

    Issue 13 item 26: built in memory, that scheduler hands DDIM ``leading`` spacing (diffusers passes
    on only values given explicitly, ``_use_default_values``); loaded from this file it hands on
    ``linspace``. A folder only has the file, so the file's reading is the reference (see README)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                               steps_offset=1).save_config(folder)
        data = json.loads((Path(folder) / "scheduler_config.json").read_text())
    data.pop("_diffusers_version", None)
    return data


CONFIGS = {"sd15": SD15, "sdxl": SDXL, "turbo": TURBO, "vpred": VPRED, "zero_snr": ZERO_SNR,
           "linear": LINEAR, "cosine": COSINE, "euler_linspace": saved_euler_config()}


def scheduler_for(sampler: str, config: dict):
    """The diffusers scheduler frame's sampler ``sampler`` mirrors, built like a user would."""
    if sampler == "euler":
        return EulerDiscreteScheduler.from_config(config)
    if sampler == "euler_a":
        return EulerAncestralDiscreteScheduler.from_config(config)
    if sampler == "ddim":
        return DDIMScheduler.from_config(config)
    if sampler == "dpm++2m":
        return DPMSolverMultistepScheduler.from_config(config, use_karras_sigmas=False)
    if sampler == "dpm++2m_karras":
        return DPMSolverMultistepScheduler.from_config(config, use_karras_sigmas=True)
    if sampler == "lcm":
        return LCMScheduler.from_config(config)
    raise ValueError(sampler)


def fake_model(x: torch.Tensor, t: float) -> torch.Tensor:
    """Deterministic stand-in for a UNet; tests re-implement it in numpy."""
    return 0.8 * torch.tanh(0.7 * x + float(np.cos(t / 300.0))) + 0.1 * x


def cases() -> list[tuple[str, str, int]]:
    out = []
    for sampler in ("euler", "euler_a", "ddim", "dpm++2m", "dpm++2m_karras"):
        for config in ("sd15", "sdxl", "turbo", "vpred"):
            for steps in (1, 4, 10):
                out.append((sampler, config, steps))
    out += [("dpm++2m", "sd15", 20), ("dpm++2m_karras", "sdxl", 20), ("euler", "sdxl", 30)]
    out += [(s, c, 6) for s in ("euler", "ddim") for c in ("zero_snr", "linear")]
    out += [(s, "cosine", 6) for s in ("ddim", "dpm++2m")]  # karras+cosine repeats timesteps (diffusers fails)
    out += [("lcm", c, n) for c in ("sd15", "vpred") for n in (1, 2, 4, 8)]
    # appended last so the keys of the cases above stay as they were
    out += [(s, "euler_linspace", n) for s in ("ddim", "euler", "dpm++2m") for n in (4, 10)]
    return out


def run_case(sampler: str, config_name: str, steps: int) -> tuple[dict, dict[str, np.ndarray]]:
    scheduler = scheduler_for(sampler, CONFIGS[config_name])
    scheduler.set_timesteps(steps)
    generator = torch.Generator().manual_seed(1234)
    latents = torch.randn(SHAPE, generator=generator, dtype=torch.float32)
    initial = latents.clone()
    latents = latents * scheduler.init_noise_sigma
    record: dict[str, list] = {"sample": [], "model_input": [], "output": [], "noise": []}
    for t in scheduler.timesteps:
        model_input = scheduler.scale_model_input(latents, t)
        output = fake_model(model_input, float(t))
        before = generator.get_state()
        replay = torch.Generator().set_state(before)
        record["sample"].append(latents.numpy().copy())
        record["model_input"].append(model_input.numpy().copy())
        record["output"].append(output.numpy().copy())
        latents = scheduler.step(output, t, latents, generator=generator).prev_sample
        drew = not torch.equal(generator.get_state(), before)
        record["noise"].append(torch.randn(SHAPE, generator=replay).numpy() if drew else np.zeros(SHAPE, np.float32))
    record["sample"].append(latents.numpy().copy())
    meta = {
        "sampler": sampler, "config": config_name, "steps": steps,
        "init_noise_sigma": float(scheduler.init_noise_sigma),
        "timesteps": [float(t) for t in scheduler.timesteps],
    }
    arrays = {k: np.stack(v).astype(np.float32) for k, v in record.items()}
    arrays["initial"] = initial.numpy()
    if hasattr(scheduler, "sigmas"):
        arrays["sigmas"] = np.asarray(scheduler.sigmas, dtype=np.float32)
    return meta, arrays


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {"configs": CONFIGS, "shape": SHAPE, "cases": []}
    arrays: dict[str, np.ndarray] = {}
    for index, (sampler, config, steps) in enumerate(cases()):
        meta, data = run_case(sampler, config, steps)
        meta["key"] = f"case{index:03d}"
        manifest["cases"].append(meta)
        arrays.update({f"{meta['key']}/{name}": value for name, value in data.items()})
    (OUT / "cases.json").write_text(json.dumps(manifest, indent=1) + "\n")
    np.savez_compressed(OUT / "cases.npz", **arrays)
    print(f"wrote {len(manifest['cases'])} cases to {OUT}")


if __name__ == "__main__":
    main()
