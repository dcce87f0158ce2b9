"""A render's settings, resolved once: defaults from the model kind filled in and every value checked.

Why its own module: the record crosses process and module boundaries (the render worker, the render
server's requests and answers, the resume hash, the picture's PNG parameters), while the checks that
make it are the one place a bad prompt, seed, strength, step count, guidance or size is refused with a
clear error before any model runs. ``Pipeline.settings`` calls :func:`resolve_settings` with its model's
facts and logs the warnings it returns (once per render, on the pipeline's logger).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from frame import seeds
from frame.diffusion import rules, sizes
from frame.diffusion import strength as img2img_strength
from frame.diffusion.model_info import ModelInfo
from frame.diffusion.noise import sources as noise_sources
from frame.diffusion.samplers import resolve_sampler_name
from frame.errors import UsageError

# () -> (the UNet export's fixed latent size or None, its input names): read from the graph on first call
UnetSignature = Callable[[], tuple[tuple[int, int] | None, frozenset[str]]]


@dataclass(frozen=True)
class RenderSettings:
    """Resolved generation parameters (defaults filled in from the model kind, every value checked):
    made once by ``Pipeline.settings``, then handed as they are to ``generate``, the resume hash and
    the picture's parameters."""

    prompt: str
    negative_prompt: str | None  # None: diffusers' "no negative prompt" (zeros for SDXL)
    steps: int
    guidance: float
    sampler: str
    seed: int
    width: int
    height: int
    guidance_embedded: bool = False  # LCM-distilled UNet: guidance is an input, no unconditional pass
    strength: float | None = None  # image-to-image: share of the schedule that runs; None: text-to-image
    noise: str = "frame"  # where the seed's random numbers come from (frame.diffusion.noise, model.noise)

    @property
    def guided(self) -> bool:
        """Classifier-free guidance needs the unconditional pass only when guidance > 1 (as diffusers)."""
        return self.guidance > 1.0 and not self.guidance_embedded


def resolve_settings(info: ModelInfo, unet_signature: UnetSignature, default_noise: str, prompt: str,
                     negative_prompt: str | None = "", steps: int | None = None, guidance: float | None = None,
                     sampler: str | None = None, seed: int = 0, width: int | None = None,
                     height: int | None = None, strength: float | None = None, noise: str | None = None
                     ) -> tuple[RenderSettings, list[rules.Finding]]:
    """The checked record and the warnings to log; an error raises (``Pipeline.settings`` documents the values).

    The cheap checks (prompt types, seed, strength) run before ``unet_signature`` is called, so a
    bad value is refused before the UNet's graph is read."""
    if not isinstance(prompt, str) or not isinstance(negative_prompt, (str, type(None))):
        raise UsageError("prompt and negative prompt must be strings")
    try:
        seed = seeds.check_seed(int(seed) if isinstance(seed, np.integer) else seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if strength is not None:
        strength = img2img_strength.check_strength(strength)
        if steps is None:
            steps = img2img_strength.fewest_steps(strength, info.default_steps)
    steps = info.default_steps if steps is None else steps
    steps = int(steps) if isinstance(steps, np.integer) else steps
    guidance = info.default_guidance if guidance is None else float(guidance)
    static = unet_signature()[0]
    native_w, native_h = sizes.auto_size(info, 1.0, static) if static else info.native_size
    width, height = native_w if width is None else width, native_h if height is None else height
    findings = rules.generation_findings(info, static, sampler=sampler, steps=steps, guidance=guidance,
                                         width=width, height=height)
    rules.raise_first_error(findings)
    sampler = resolve_sampler_name(sampler)
    embedded = "timestep_cond" in unet_signature()[1]
    settings = RenderSettings(prompt, negative_prompt, int(steps), guidance, sampler, int(seed), width, height,
                              embedded, strength,
                              noise_sources.check_noise(default_noise if noise is None else noise))
    return settings, findings
