"""The calibration picture for ``frame display test``.

Top two thirds: one bar per ink, written as exact ink indices (no dithering), so a photo of the panel
shows each ink's real colour for measuring a palette. Bottom third: a ramp from the panel's black to
its white, dithered like any picture, to judge tone reproduction.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from frame.config.panels import Panel
from frame.display import colour
from frame.display.gamut import black_white
from frame.display.preparation import render


def calibration_image(panel: Panel, dither: str | None = None) -> tuple[Image.Image, Image.Image]:
    """(prepared "P" image, RGB reference) at panel size."""
    width, height = panel.size
    inks = np.asarray(panel.palette, dtype=np.uint8)
    bars_height = height * 2 // 3
    bar_index = (np.arange(width) * len(inks) // width).astype(np.uint8)
    bars = np.tile(bar_index, (bars_height, 1))

    inks_linear = colour.srgb8_to_linear(inks)
    black, white = black_white(inks_linear)
    lum = inks_linear @ colour.LUMINANCE.astype(np.float32)
    l_black, l_white = (116.0 * np.cbrt(lum[i]) - 16.0 for i in (black, white))
    y = ((np.linspace(l_black, l_white, width, dtype=np.float32) + 16.0) / 116.0) ** 3  # even steps in L*
    t = ((y - lum[black]) / (lum[white] - lum[black]))[:, None]
    ramp_linear = inks_linear[black] + t * (inks_linear[white] - inks_linear[black])
    ramp_rgb = np.tile(colour.linear_to_srgb8(ramp_linear)[None], (height, 1, 1))
    ramp_rgb[:bars_height] = inks[bars]
    reference = Image.fromarray(ramp_rgb)

    indices = np.asarray(render(reference, panel, saturation=1.0, dither=dither)).copy()
    indices[:bars_height] = bars
    prepared = Image.fromarray(indices, mode="P")
    prepared.putpalette([c for ink in panel.palette for c in ink])
    return prepared, reference
