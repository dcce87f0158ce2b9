"""Turn any picture into the exact ink pattern a panel will show.

Steps, each for a reason an owner would notice:
1. EXIF orientation (phone photos otherwise show sideways), alpha composited on white.
2. Rotation for a portrait-mounted panel: the picture is composed upright, then turned to the panel.
3. Fit (cover / contain / blur-pad) with Lanczos resampling: sharp without ringing-prone bicubic.
4. Tone compression to the panel's real black and white, saturation, gamut mapping (``gamut.py``).
5. Dithering in linear light against the measured inks (``engine.py``).
The result is a "P" image whose palette holds the measured ink colours, so saving it shows what the
panel will look like, and whose indices are palette positions (drivers map them to native codes).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import get_args

import numpy as np
from PIL import Image, ImageFilter, ImageOps, UnidentifiedImageError

from frame.config.panels import Panel
from frame.config.schema import FitName, Rotation
from frame.display import gamut
from frame.display.dither import dither_indices, resolve_dither
from frame.errors import FrameError, UsageError

log = logging.getLogger(__name__)

_TRANSPOSE = {90: Image.Transpose.ROTATE_270, 180: Image.Transpose.ROTATE_180,
              270: Image.Transpose.ROTATE_90}


class ImageReadError(FrameError):
    """A picture file that cannot be read (missing, not an image, truncated)."""


def load_image(source: Image.Image | str | Path) -> Image.Image:
    """Open ``source`` (path or PIL image), apply EXIF orientation, return RGB on white."""
    if isinstance(source, Image.Image):
        image = ImageOps.exif_transpose(source) or source
    else:
        path = Path(source)
        try:
            with Image.open(path) as opened:
                image = ImageOps.exif_transpose(opened)  # loads the pixels and returns a copy
        except FileNotFoundError:
            raise ImageReadError(f"cannot read image {path}: no such file") from None
        except IsADirectoryError:
            raise ImageReadError(f"cannot read image {path}: it is a directory") from None
        except PermissionError:
            raise ImageReadError(f"cannot read image {path}: permission denied") from None
        except UnidentifiedImageError:
            raise ImageReadError(f"cannot read image {path}: not a picture format Pillow recognises") from None
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
            raise ImageReadError(f"cannot read image {path}: {exc}") from None
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        # 16-bit and float greys: Pillow's RGB conversion would clip everything above 255 to white.
        values = np.asarray(image, dtype=np.float32)
        scale = 255.0 / 65535.0 if values.max(initial=0.0) > 255.0 else 1.0
        image = Image.fromarray(np.clip(values * scale, 0, 255).round().astype(np.uint8), mode="L")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def _scaled(image: Image.Image, size: tuple[int, int], cover: bool) -> Image.Image:
    """Scale to cover (crop the overflow, centred) or to fit inside ``size``, preserving aspect."""
    width, height = size
    scale = (max if cover else min)(width / image.width, height / image.height)
    new = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    resized = image.resize(new, Image.Resampling.LANCZOS, reducing_gap=3.0)
    if not cover:
        return resized
    left, top = (new[0] - width) // 2, (new[1] - height) // 2
    return resized.crop((left, top, left + width, top + height))


def fit_image(image: Image.Image, size: tuple[int, int], fit: str,
              pad_colour: tuple[int, int, int]) -> tuple[Image.Image, Image.Image | None]:
    """Fill exactly ``size``: ``cover`` crops, ``contain`` pads with the panel's white, ``blur-pad``
    pads with a blurred, dimmed, cover-scaled copy (no bars, no lost content).

    Returns the picture and, for ``contain``, a mask ("L", 255 = picture) of where the picture is, so
    the bars can be printed as pure white ink instead of being dithered.
    """
    if fit not in get_args(FitName):
        raise UsageError(f"unknown fit {fit!r}; choose one of: {', '.join(get_args(FitName))}")
    if fit == "cover":
        return _scaled(image, size, cover=True), None
    inner = _scaled(image, size, cover=False)
    offset = ((size[0] - inner.width) // 2, (size[1] - inner.height) // 2)
    mask = None
    if fit == "contain":
        canvas = Image.new("RGB", size, pad_colour)
        mask = Image.new("L", size, 0)
        mask.paste(255, (*offset, offset[0] + inner.width, offset[1] + inner.height))
    else:
        small = _scaled(image, (max(1, size[0] // 8), max(1, size[1] // 8)), cover=True)
        blurred = small.filter(ImageFilter.GaussianBlur(3)).resize(size, Image.Resampling.BILINEAR)
        canvas = Image.eval(blurred, lambda v: int(v * 0.8 + 20))
    canvas.paste(inner, offset)
    return canvas, mask


def fit_for_panel(image: Image.Image | str | Path, panel: Panel, fit: str = "cover",
                  rotate: int = 0) -> tuple[Image.Image, Image.Image | None]:
    """Steps 1-3: the RGB picture at panel size and orientation, before any colour work, plus the
    ``contain`` mask (see ``fit_image``) turned the same way."""
    if rotate not in get_args(Rotation):
        raise UsageError(f"rotate must be one of {get_args(Rotation)}, not {rotate!r}")
    width, height = panel.size
    upright = (height, width) if rotate in (90, 270) else (width, height)
    picture, mask = fit_image(load_image(image), upright, fit, panel.palette[panel.white_index])
    if rotate:
        picture = picture.transpose(_TRANSPOSE[rotate])
        mask = mask.transpose(_TRANSPOSE[rotate]) if mask is not None else None
    return picture, mask


def render(picture: Image.Image, panel: Panel, saturation: float | None = None,
           dither: str | None = None, mask: Image.Image | None = None) -> Image.Image:
    """Steps 4-5 for a picture already at panel size: the "P" image of ink indices.

    Where ``mask`` is 0 (``contain`` bars) the panel shows pure white ink, and those pixels do not
    count when the tone range is measured.
    """
    if picture.size != panel.size:
        raise UsageError(f"picture is {picture.width}x{picture.height}, {panel.name} is "
                         f"{panel.size[0]}x{panel.size[1]}; use prepare() to fit it")
    saturation = panel.default_saturation if saturation is None else float(saturation)
    if not 0.0 <= saturation <= 1.0:
        raise UsageError(f"saturation must be between 0 and 1, not {saturation}")
    method = resolve_dither(dither)
    inks = np.array(panel.palette, dtype=np.uint8)
    content = np.asarray(mask) > 127 if mask is not None else None
    linear = gamut.prepare_colours(np.asarray(picture.convert("RGB")), inks, saturation, content)
    indices = dither_indices(linear, inks, method)
    if content is not None:
        indices[~content] = panel.white_index
    result = Image.fromarray(indices, mode="P")
    result.putpalette([c for ink in panel.palette for c in ink])
    log.debug("rendered %dx%d for %s with %s", panel.size[0], panel.size[1], panel.name, method)
    return result


def prepare(image: Image.Image | str | Path, panel: Panel, fit: str = "cover", rotate: int = 0,
            saturation: float | None = None, dither: str | None = None) -> Image.Image:
    """The "P" image (panel size, palette = measured inks) that ``panel`` should show for ``image``.

    ``rotate`` turns the picture clockwise by 0/90/180/270 degrees on its way to the panel (a portrait-
    mounted panel: the picture is composed upright at height x width, then turned); ``saturation`` scales
    colourfulness (0 grey .. 1 as is; ``None`` = panel default); ``dither`` is a name from
    ``dither.DITHERS`` (``None``/"auto" = serpentine Floyd-Steinberg in linear light).
    """
    resolve_dither(dither)  # reject a bad name before the expensive work
    picture, mask = fit_for_panel(image, panel, fit, rotate)
    return render(picture, panel, saturation, dither, mask)



