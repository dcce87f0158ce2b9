"""Which dithering code runs for each ``display.dither`` name.

``auto`` means ``linear-serpentine``: serpentine Floyd-Steinberg with the error kept in linear light
against the measured inks (``dither.serpentine``). All methods are our own numpy code. We evaluated the
MIT-licensed ``epaper-dithering`` package (Rust core) as the engine: it is about 3x faster, but fed the
same tone- and gamut-mapped picture it leaves grey ramps ~30 % too light in linear light (mean CIEDE2000
6.98 against 1.81 for our linear-light Floyd-Steinberg on the Spectra 6 grey ramp, Pillow 7.32), so it
is not used; numbers and command in ``docs/display.md``.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable

import numpy as np

from frame.display import colour
from frame.display import dither as kernels
from frame.display.choices import DITHERS
from frame.errors import UsageError

log = logging.getLogger(__name__)

DEFAULT = "linear-serpentine"

Method = Callable[[np.ndarray, np.ndarray], np.ndarray]

_METHODS: dict[str, Method] = {
    "linear-serpentine": kernels.serpentine,
    "floyd-steinberg": lambda linear, inks: kernels.error_diffusion(linear, inks, "floyd-steinberg"),
    "atkinson": lambda linear, inks: kernels.error_diffusion(linear, inks, "atkinson"),
    "ordered": kernels.ordered,
    "blue-noise": kernels.blue_noise_dither,
    "none": kernels.no_dither,
}


def resolve(name: str | None) -> str:
    """The concrete method for a configured name (``None`` or "auto" = the default)."""
    name = name or "auto"
    if name not in DITHERS:
        close = difflib.get_close_matches(name, DITHERS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"unknown dither {name!r}{hint}; choose one of: {', '.join(DITHERS)}")
    return DEFAULT if name == "auto" else name


def dither_indices(linear: np.ndarray, inks_srgb8: np.ndarray, method: str | None) -> np.ndarray:
    """Ink indices (H, W) for a gamut-mapped linear-light picture."""
    inks_linear = colour.srgb8_to_linear(np.asarray(inks_srgb8, dtype=np.uint8))
    return _METHODS[resolve(method)](linear, inks_linear).astype(np.uint8)
