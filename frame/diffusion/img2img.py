"""Image-to-image ("more like this"): start the denoising loop from a picture instead of pure noise.

As diffusers' StableDiffusionImg2ImgPipeline and StableDiffusionXLImg2ImgPipeline: the picture is
fitted to the render size (``fit``), encoded by the export's ``vae_encoder``
(``vae.encoder.encode``: ``scaling_factor * latent_dist.sample()``), noised with the sampler's own
``add_noise`` to the level of the first step that runs, and the sampler runs its last
``int(steps * strength)`` steps (``strength.first_step``). Prompts, guidance and SDXL's time_ids are
those of text-to-image at the render size.

Random numbers, all from the seed: the sampler's stream (``NoiseSource(seed)``) is exactly
text-to-image's — its first draw is the noise added to the picture's latent, later draws are the
ancestral samplers' step noise — so a seed keeps its noise pattern between the two modes. The VAE
posterior's draw comes from a second stream, ``PCG64(seed).jumped()``, so it never shifts the first.

Fitting the picture (``fit``), as diffusers' ``VaeImageProcessor.resize(..., resize_mode="crop")``, bit
for bit: scale it with Lanczos, keeping its aspect ratio, until it covers the render size, then cut
the overflow equally from both sides (centre crop). The render size itself is a multiple of 64 pixels
(``sizes.check_size``), so the VAE's multiple-of-8 need is always met. A picture already at the
render size is used untouched — the case of "more like this" on a frame's own picture.

Reading a file (``open_image``) honours the EXIF orientation (phones store portraits sideways), lets
Pillow decode a large JPEG at a reduced scale when that still leaves at least twice the render size
(a 24-megapixel photo would otherwise take 72 MB on a Pi with 512 MB), and puts transparent areas on
white paper.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

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
        return pixels_hash(self.pixels)

    def hash_parts(self) -> dict[str, str | None]:
        noise = None if self.posterior_noise is None else resume.array_hash(self.posterior_noise)
        return {"init_image": self.digest, "posterior_noise": noise}


def prepare(picture: Image.Image | str | os.PathLike, width: int, height: int,
            posterior_noise: np.ndarray | None = None) -> InitImage:
    """A picture (PIL image or file path) fitted to ``width`` x ``height`` as the encoder's input."""
    if isinstance(picture, (str, os.PathLike)):
        picture = open_image(picture, (width, height))
    if not isinstance(picture, Image.Image):
        raise UsageError(f"init image must be a picture or a file path, got {type(picture).__name__}")
    return InitImage(to_pixels(fit(picture, width, height)), posterior_noise)


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


def open_image(path: str | os.PathLike, size: tuple[int, int] | None = None) -> Image.Image:
    """The picture at ``path`` as upright RGB; ``size`` (width, height) allows a reduced JPEG decode."""
    try:
        image = Image.open(path)
        if size is not None and image.format == "JPEG":
            image.draft("RGB", (2 * size[0], 2 * size[1]))
        image.load()
    except FileNotFoundError as exc:
        raise UsageError(f"init image {path}: no such file") from exc
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise UsageError(f"init image {path}: not a picture Pillow can read ({exc})") from exc
    return to_rgb(ImageOps.exif_transpose(image))


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB, with transparency composited on white."""
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(paper, rgba).convert("RGB")
    return image.convert("RGB")


def fit(image: Image.Image, width: int, height: int) -> Image.Image:
    """Scale to cover ``width`` x ``height`` (Lanczos, aspect kept), then centre-crop to it."""
    image = to_rgb(image)
    if image.size == (width, height):
        return image
    if image.width < 1 or image.height < 1:
        raise UsageError("init image is empty")
    wider = width / height > image.width / image.height  # diffusers' _resize_and_crop arithmetic
    scaled_w = width if wider else image.width * height // image.height
    scaled_h = height if not wider else image.height * width // image.width
    resized = image.resize((scaled_w, scaled_h), resample=Image.LANCZOS)
    left, top = scaled_w // 2 - width // 2, scaled_h // 2 - height // 2
    return resized.crop((left, top, left + width, top + height))


def to_pixels(image: Image.Image) -> np.ndarray:
    """(1, 3, H, W) float32 in [-1, 1], the VAE encoder's input (diffusers' normalisation)."""
    array = np.asarray(image.convert("RGB"), dtype=np.float32) / np.float32(255.0)
    return (np.float32(2.0) * array - np.float32(1.0)).transpose(2, 0, 1)[None].copy()


def pixels_hash(pixels: np.ndarray) -> str:
    """Short hex digest of the fitted picture (recorded in the PNG and in resume checkpoints)."""
    return hashlib.sha256(np.ascontiguousarray(pixels, dtype=np.float32).tobytes()).hexdigest()[:16]
