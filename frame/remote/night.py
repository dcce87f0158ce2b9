"""Tonight's remote job from the configuration and the chosen prompt (what the render worker calls).

The server's model is not frame's: steps, guidance and sampler come from ``render.remote`` (a desktop
SD 1.5 or SDXL checkpoint wants ~25 steps and guidance ~7, whatever the frame's local Turbo model
needs), and the size from ``render.remote.size`` — "auto" is SD 1.5's 512×512 pixel area at the panel's
aspect ratio in multiples of 64 px, as a local SD 1.5 render would get. A queued prompt's own steps,
sampler, guidance and size are already in ``render.remote`` when the worker calls ``night_job``
(``frame.worker.prompt_settings.with_remote_prompt_settings``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

from frame.diffusion.sizes import auto_size, parse_size
from frame.remote.a1111 import RemoteJob

if TYPE_CHECKING:
    from frame.config.schema import Config

SD15_AREA = SimpleNamespace(native_size=(512, 512), vae_factor=8, latent_multiple=8)


def remote_size(config: Config) -> tuple[int, int]:
    """``render.remote.size``, or for "auto" 512×512's area at the panel's aspect (rotation included)."""

    size = parse_size(config.render.remote.size)
    if size:
        return size
    width, height = parse_size(config.display.size) or (1, 1)
    if config.display.rotate in (90, 270):
        width, height = height, width
    return auto_size(SD15_AREA, width / height)  # type: ignore[arg-type]


def night_job(config: Config, prompt: str, negative_prompt: str, seed: int) -> RemoteJob:
    """The remote job for one night: ``prompt``/``negative_prompt`` as chosen, settings from ``config``."""
    remote = config.render.remote
    width, height = remote_size(config)
    return RemoteJob(prompt=prompt, negative_prompt=negative_prompt, steps=remote.steps, guidance=remote.guidance,
                     sampler=remote.sampler, seed=int(seed), width=width, height=height)
