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

KNEE = 0.95  # fraction of the way to the hull boundary that is left untouched (tuned on the benchmark)
PERCENTILES = (0.5, 99.5)  # robust black/white points of the picture
ANCHOR_MARGIN = 0.1  # gamut mapping anchors stay this far inside the black-white segment
NEUTRAL_CHROMA = 12.0  # C*ab below which a pixel counts as near-neutral for the tone range
ROLL_OFF_KNEE = 0.5  # fraction of the panel's L* range kept exactly before highlights roll off
TONE_SLACK = 3.0  # L*: how far the picture may overshoot the panel's black/white before compressing


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


def _roll_off(lightness: np.ndarray, knee: float, top_in: float, top_out: float) -> np.ndarray:
    """Above ``knee``, bend [knee, top_in] smoothly onto [knee, top_out]; slope 1 at the knee.

    ``out = knee + span_out * (1 - (1 - x / span_in) ** p)`` with ``p = span_in / span_out``: equal
    to the input up to the knee, continuous in value and slope there, monotonic, and ``top_in`` lands
    exactly on ``top_out``.
    """
    span_in, span_out = top_in - knee, top_out - knee
    x = np.clip((lightness - knee) / span_in, 0.0, 1.0)
    bent = knee + span_out * (1.0 - (1.0 - x) ** (span_in / span_out))
    return np.where(lightness > knee, bent, lightness)


def compress_tone(lab: np.ndarray, black_l: float, white_l: float,
                  content: np.ndarray | None = None) -> np.ndarray:
    """Fit the picture's lightness into the panel's [black_l, white_l], only as much as needed.

    A picture that already fits is left alone. One that overshoots (almost every photo: L* 0..100
    against a panel white near L* 70-80) keeps its shadows and mid-tones exactly and has its highlights
    (and, mirrored, its deepest shadows) rolled off smoothly, so clouds and skin keep their gradation
    instead of clipping to flat white. The range is measured on near-neutral pixels: the white ink
    limits only those, while a light yellow can be brighter than the panel's white and still be
    printable (gamut mapping handles the rest). ``content`` (bool, picture shape) limits the
    measurement to the picture itself, leaving out padding.
    """
    lightness = lab[..., 0]
    region = content if content is not None and content.any() else np.ones(lightness.shape, dtype=bool)
    neutral = region & (np.hypot(lab[..., 1], lab[..., 2]) < NEUTRAL_CHROMA)
    sample = lightness[neutral] if neutral.sum() > 0.01 * region.sum() else lightness[region]
    lo, hi = (float(v) for v in np.percentile(sample, PERCENTILES))
    knee_hi = black_l + ROLL_OFF_KNEE * (white_l - black_l)
    knee_lo = white_l - ROLL_OFF_KNEE * (white_l - black_l)
    out = lab.copy()
    if hi > white_l + TONE_SLACK:  # a few L* past the panel's ends are cheaper to clip than to bend
        out[..., 0] = _roll_off(out[..., 0], knee_hi, hi, white_l)
    if lo < black_l - TONE_SLACK:
        out[..., 0] = -_roll_off(-out[..., 0], -knee_lo, -lo, -black_l)
    out[..., 0] = np.maximum(out[..., 0], black_l)
    return out


def _grey_axis(gamut: Gamut, linear: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """The point on the black-white ink segment with each pixel's luminance (kept ``margin`` of the
    segment away from its ends)."""
    lum = linear @ colour.LUMINANCE.astype(np.float32)
    y_black, y_white = gamut.black @ colour.LUMINANCE, gamut.white @ colour.LUMINANCE
    t = np.clip((lum - y_black) / (y_white - y_black), margin, 1.0 - margin)[..., None]
    return (gamut.black + t * (gamut.white - gamut.black)).astype(np.float32)


def map_into_gamut(gamut: Gamut, linear: np.ndarray, knee: float = KNEE) -> np.ndarray:
    """Pull colours toward their grey until inside the hull; soft knee above ``knee`` of the way."""
    if len(gamut.normals) == 0:
        return _grey_axis(gamut, linear)  # two inks (black/white): only lightness can be shown
    # Anchor strictly inside the black-white segment: from the white vertex itself, a light yellow
    # (brighter than the panel white) lies almost along a hull face and 8-bit rounding alone would
    # pull it all the way to white.
    grey = _grey_axis(gamut, linear, margin=ANCHOR_MARGIN)
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


def prepare_colours(srgb8: np.ndarray, inks_srgb8: np.ndarray, saturation: float = 1.0,
                    content: np.ndarray | None = None) -> np.ndarray:
    """8-bit sRGB picture to linear RGB inside the panel gamut, ready for dithering."""
    inks_linear = colour.srgb8_to_linear(inks_srgb8)
    gamut = build_gamut(inks_linear)
    ink_lab = colour.linear_to_lab(np.stack([gamut.black, gamut.white]).astype(np.float32))
    lab = compress_tone(colour.srgb8_to_lab(srgb8), float(ink_lab[0, 0]), float(ink_lab[1, 0]), content)
    if saturation != 1.0:
        lab[..., 1:] *= saturation
    linear = colour.lab_to_linear(lab)
    return map_into_gamut(gamut, linear)
