"""Bring a picture inside what the panel can show before it is dithered.

Error diffusion can only reproduce colours inside the convex hull of the panel's inks in linear light
(mixing dots adds light). Colours outside the hull leave error that can never be paid back, which smears
across the picture as streaks and colour blooms. So: (1) compress the tone range to the panel's real
black and white, (2) scale colourfulness by the owner's saturation setting, (3) pull each colour toward
the grey of the same luminance until it lies inside the hull, with a soft knee so gradients survive.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from frame.display import colour

KNEE = 0.9  # fraction of the way to the hull boundary that is left untouched
PERCENTILES = (0.5, 99.5)  # robust black/white points of the picture


@dataclass(frozen=True)
class Gamut:
    """The inks' convex hull as outward facets ``normals @ x + offsets <= 0`` (empty if flat)."""

    inks: np.ndarray  # (n, 3) linear RGB
    normals: np.ndarray  # (f, 3)
    offsets: np.ndarray  # (f,)
    black: np.ndarray
    white: np.ndarray


def black_white(inks_linear: np.ndarray) -> tuple[int, int]:
    """Indices of the black ink (darkest brightest channel) and the white ink (brightest darkest
    channel). Not plain luminance: a 7-colour panel's yellow is brighter than its white."""
    inks = np.asarray(inks_linear)
    return int(np.argmin(inks.max(axis=1))), int(np.argmax(inks.min(axis=1)))


def build_gamut(inks_linear: np.ndarray) -> Gamut:
    """Facets of the convex hull of a handful of inks (brute force over triples: n <= 8)."""
    inks = np.asarray(inks_linear, dtype=np.float64)
    black, white = inks[black_white(inks)[0]], inks[black_white(inks)[1]]
    normals, offsets = [], []
    for i, j, k in itertools.combinations(range(len(inks)), 3):
        normal = np.cross(inks[j] - inks[i], inks[k] - inks[i])
        norm = np.linalg.norm(normal)
        if norm < 1e-9:
            continue
        normal /= norm
        side = (inks - inks[i]) @ normal
        if np.all(side <= 1e-9) or np.all(side >= -1e-9):
            if np.all(np.abs(side) <= 1e-9):
                continue  # every ink on one plane: no volume
            if np.all(side >= -1e-9):
                normal = -normal
            normals.append(normal)
            offsets.append(-normal @ inks[i])
    return Gamut(inks, np.array(normals).reshape(-1, 3), np.array(offsets), black, white)


def compress_tone(lab: np.ndarray, black_l: float, white_l: float) -> np.ndarray:
    """Map the picture's lightness range into the panel's [black_l, white_l], only as much as needed.

    A picture that already fits is left alone; one that is wider (almost every photo: L* 0..100 against
    a panel white near L* 70-80) is scaled linearly in L*, which keeps mid-tone contrast even.
    """
    lightness = lab[..., 0]
    lo, hi = np.percentile(lightness, PERCENTILES)
    lo, hi = min(float(lo), black_l), max(float(hi), white_l)
    out = lab.copy()
    out[..., 0] = np.clip(black_l + (lightness - lo) * (white_l - black_l) / max(hi - lo, 1e-6),
                          black_l, white_l)
    return out


def _grey_axis(gamut: Gamut, linear: np.ndarray) -> np.ndarray:
    """The point on the black-white ink segment with each pixel's luminance."""
    lum = linear @ colour.LUMINANCE.astype(np.float32)
    y_black, y_white = gamut.black @ colour.LUMINANCE, gamut.white @ colour.LUMINANCE
    t = np.clip((lum - y_black) / (y_white - y_black), 0.0, 1.0)[..., None]
    return (gamut.black + t * (gamut.white - gamut.black)).astype(np.float32)


def map_into_gamut(gamut: Gamut, linear: np.ndarray, knee: float = KNEE) -> np.ndarray:
    """Pull colours toward their grey until inside the hull; soft knee above ``knee`` of the way."""
    grey = _grey_axis(gamut, linear)
    if len(gamut.normals) == 0:
        return grey  # two inks (black/white): only lightness can be shown
    direction = linear - grey
    # Largest t with grey + t * direction inside every facet.
    along = direction @ gamut.normals.T.astype(np.float32)
    room = -(grey @ gamut.normals.T.astype(np.float32) + gamut.offsets.astype(np.float32))
    with np.errstate(divide="ignore", invalid="ignore"):
        limits = np.where(along > 1e-9, np.maximum(room, 0.0) / along, np.inf)
    boundary = np.min(limits, axis=-1)
    boundary = np.minimum(boundary, 1e6)  # no facet ahead (no chroma): any t is fine
    start = knee * boundary
    span = np.maximum(boundary - start, 1e-9)
    soft = np.where(1.0 <= start, 1.0, start + span * np.tanh((1.0 - start) / span))
    return (grey + np.minimum(soft, 1.0)[..., None] * direction).astype(np.float32)


def prepare_colours(srgb8: np.ndarray, inks_srgb8: np.ndarray, saturation: float = 1.0) -> np.ndarray:
    """8-bit sRGB picture to linear RGB inside the panel gamut, ready for dithering."""
    inks_linear = colour.srgb8_to_linear(inks_srgb8)
    gamut = build_gamut(inks_linear)
    ink_lab = colour.linear_to_lab(np.stack([gamut.black, gamut.white]).astype(np.float32))
    lab = compress_tone(colour.srgb8_to_lab(srgb8), float(ink_lab[0, 0]), float(ink_lab[1, 0]))
    if saturation != 1.0:
        lab[..., 1:] *= saturation
    linear = colour.lab_to_linear(lab)
    return map_into_gamut(gamut, linear)
