"""Image-to-image ("more like this"): start the denoising loop from a picture instead of pure noise.

As diffusers' StableDiffusionImg2ImgPipeline and StableDiffusionXLImg2ImgPipeline: the picture is
fitted to the render size (``init_image.fit``), encoded by the export's ``vae_encoder``
(``vae.encoder.encode``: ``scaling_factor * latent_dist.sample()``), noised with the sampler's own
``add_noise`` to the level of the first step that runs, and the sampler runs its last
``int(steps * strength)`` steps (``strength.first_step``). Prompts, guidance and SDXL's time_ids are
those of text-to-image at the render size.

Random numbers, all from the seed: the sampler's stream (``NoiseSource(seed)``) is exactly
text-to-image's — its first draw is the noise added to the picture's latent, later draws are the
ancestral samplers' step noise — so a seed keeps its noise pattern between the two modes. The VAE
posterior's draw comes from a second stream, ``PCG64(seed).jumped()``, so it never shifts the first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from PIL import Image

from frame.diffusion import init_image as images
from frame.diffusion import resume
from frame.diffusion import strength as img2img_strength
from frame.diffusion.render_settings import RenderSettings
from frame.errors import UsageError

DEFAULT_STRENGTH = 0.6  # keeps the composition and colours, repaints the details


@dataclass(frozen=True)
class InitImage:
    """The fitted starting picture; ``posterior_noise`` replaces the seeded VAE draw (tests)."""

    pixels: np.ndarray  # (1, 3, H, W) float32 in [-1, 1] at the render size
    posterior_noise: np.ndarray | None = None

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return self.pixels.shape[3], self.pixels.shape[2]

    @property
    def digest(self) -> str:
        return images.pixels_hash(self.pixels)

    def hash_parts(self) -> dict[str, str | None]:
        noise = None if self.posterior_noise is None else resume.array_hash(self.posterior_noise)
        return {"init_image": self.digest, "posterior_noise": noise}


def prepare(picture: Image.Image | str | os.PathLike, width: int, height: int,
            posterior_noise: np.ndarray | None = None) -> InitImage:
    """A picture (PIL image or file path) fitted to ``width`` x ``height`` as the encoder's input."""
    if isinstance(picture, (str, os.PathLike)):
        picture = images.open_image(picture, (width, height))
    if not isinstance(picture, Image.Image):
        raise UsageError(f"init image must be a picture or a file path, got {type(picture).__name__}")
    return InitImage(images.to_pixels(images.fit(picture, width, height)), posterior_noise)


def posterior_noise(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """The seeded standard-normal draw for the VAE posterior (its own stream, see the module doc)."""
    generator = np.random.Generator(np.random.PCG64(seed).jumped())
    return generator.standard_normal(shape, dtype=np.float32)


def posterior_draw(init: InitImage, seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """The VAE posterior's draw for ``init``: its own ``posterior_noise`` (checked against the latent
    ``shape``) or the seeded one."""
    if init.posterior_noise is None:
        return posterior_noise(seed, shape)
    if init.posterior_noise.shape != shape:
        raise UsageError(f"posterior noise has shape {init.posterior_noise.shape}, the latent is {shape}")
    return init.posterior_noise


def first_step(settings: RenderSettings, init: InitImage | None) -> int:
    """0 for text-to-image; the first step that runs for image-to-image (checked against the size)."""
    if init is None:
        if settings.strength is not None:
            raise UsageError("strength is for image-to-image: give an init image too")
        return 0
    if settings.strength is None:
        raise UsageError("an init image needs a strength (settings(..., strength=S), 0 < S <= 1)")
    if init.size != (settings.width, settings.height):
        raise UsageError(f"init image is {init.size[0]}x{init.size[1]} but the render is "
                         f"{settings.width}x{settings.height} (img2img.prepare fits it)")
    return img2img_strength.first_step(settings.steps, settings.strength)


def latent_shape(init: InitImage, vae_factor: int, channels: int) -> tuple[int, int, int, int]:
    width, height = init.size
    return 1, channels, height // vae_factor, width // vae_factor
