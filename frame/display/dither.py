"""Dithering in linear light against the measured inks, vectorised with numpy.

Error diffusion is sequential along a row, so a pure-Python pixel loop over 384k pixels takes tens of
seconds. Instead we walk *diagonal wavefronts*: with every kernel tap (dy, dx) satisfying
``dx + slope * dy > 0``, all pixels with the same ``x + slope * y`` are independent and can be quantised
in one numpy step (about 1,800 steps for 800x480). This forces a left-to-right scan on every row
(``floyd-steinberg``, ``atkinson``); the serpentine default cannot be parallelised at all and keeps
only its in-row carry in a tight Python loop (``serpentine``). Ordered dithering picks, per pixel,
the best two-ink mix and thresholds it. Inks are chosen perceptually (CIELAB) through a lookup table.

Each method is registered under its ``display.dither`` name (``@register_dither``, the ``DITHERS``
table); ``auto`` means the default, ``linear-serpentine``: serpentine Floyd-Steinberg with the error
kept in linear light against the measured inks. The schema's ``DitherName`` stays the owner-facing list
(the daemon checks ``display.dither`` without numpy): a name it does not list is refused at
registration, and ``tests/display/test_dither_registry.py`` checks the table, the schema, the CLI, the
docs table and config.yaml agree.

All methods are our own numpy code. We evaluated the MIT-licensed ``epaper-dithering`` package (Rust
core) as the engine: it is about 3x faster, but fed the same tone- and gamut-mapped picture it leaves
grey ramps ~30 % too light in linear light (mean CIEDE2000 6.98 against 1.81 for our linear-light
Floyd-Steinberg on the Spectra 6 grey ramp, Pillow 7.32), so it is not used; numbers and command in
``docs/display.md``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np

from frame.config.schema import DitherName
from frame.display import colour
from frame.errors import unknown_choice
from frame.registry import Registry

Method = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (linear picture, linear inks) -> ink indices
DITHERS: Registry[Method] = Registry("dither", DitherName, "frame.config.schema.DitherName", stand_ins=("auto",))
DEFAULT_DITHER = "linear-serpentine"  # what "auto" (and no setting) means


def register_dither(name: str) -> Callable[[Method], Method]:
    """Function decorator: the method for ``display.dither: name`` (a name the schema lists)."""
    return DITHERS.register(name)


def resolve_dither(name: str | None) -> str:
    """The concrete method for a configured name (``None`` or "auto" = the default)."""
    name = name or "auto"
    if name != "auto" and name not in DITHERS:
        raise unknown_choice("dither", name, dither_names())
    return DEFAULT_DITHER if name == "auto" else name


def dither_names() -> tuple[str, ...]:
    """Every name ``display.dither`` accepts, "auto" first, in the schema's order."""
    return ("auto", *DITHERS.names())


def dither_indices(linear: np.ndarray, inks_srgb8: np.ndarray, method: str | None) -> np.ndarray:
    """Ink indices (H, W) for a gamut-mapped linear-light picture."""
    inks_linear = colour.srgb8_to_linear(np.asarray(inks_srgb8, dtype=np.uint8))
    return DITHERS[resolve_dither(method)](linear, inks_linear).astype(np.uint8)


# Kernels as (dy, dx, weight) taps; weights sum to 1 except Atkinson's deliberate 6/8. Taps are listed
# lower rows first: then every pixel receives its shares in exactly the order a raster scan gives them,
# so the wavefront result equals the sequential one bit for bit.
KERNELS: dict[str, tuple[tuple[int, int, float], ...]] = {
    "floyd-steinberg": ((1, -1, 3 / 16), (1, 0, 5 / 16), (1, 1, 1 / 16), (0, 1, 7 / 16)),
    "atkinson": ((2, 0, 1 / 8), (1, -1, 1 / 8), (1, 0, 1 / 8), (1, 1, 1 / 8), (0, 1, 1 / 8),
                 (0, 2, 1 / 8)),
}
_PAD = 2


def nearest_ink(pixels: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """Index of the perceptually closest ink (Euclidean in CIELAB) for each pixel of an (n, 3) array.

    The error is diffused in linear light, but the ink is *chosen* perceptually: in linear RGB all
    dark inks look nearly equal and grey ramps fill with coloured speckle (measured: the 7-colour grey
    ramp goes from 4.3 to 1.8 mean CIEDE2000).
    """
    lab = colour.linear_to_lab(np.clip(pixels, 0.0, 1.0))
    ink_lab = colour.linear_to_lab(inks)
    dist = ((lab[:, None, :] - ink_lab[None, :, :]) ** 2).sum(axis=-1)
    return np.argmin(dist, axis=1)


_LUT_LEVELS = 48  # per channel, on a square-root scale so dark inks are told apart finely


@functools.lru_cache(maxsize=8)
def _lookup_table(inks_key: bytes) -> np.ndarray:
    inks = np.frombuffer(inks_key, dtype=np.float32).reshape(-1, 3)
    centres = ((np.arange(_LUT_LEVELS) + 0.5) / _LUT_LEVELS) ** 2
    grid = np.stack(np.meshgrid(centres, centres, centres, indexing="ij"), axis=-1).reshape(-1, 3)
    return nearest_ink(grid.astype(np.float32), inks).astype(np.uint8)


def ink_lookup(inks: np.ndarray) -> np.ndarray:
    """Nearest ink for every cell of a 48^3 grid over sqrt(linear RGB) (cached per palette).

    Quantising through a table is what keeps the error-diffusion loops cheap; a cell chooses
    differently from the exact answer only right at a boundary, and diffusion pays that back.
    """
    return _lookup_table(np.ascontiguousarray(inks, dtype=np.float32).tobytes())


def lookup_inks(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Vectorised table lookup for an (n, 3) array of linear values."""
    cells = np.minimum((np.sqrt(np.maximum(values, 0.0)) * _LUT_LEVELS).astype(np.int32), _LUT_LEVELS - 1)
    return table[(cells[:, 0] * _LUT_LEVELS + cells[:, 1]) * _LUT_LEVELS + cells[:, 2]]


def _slope(kernel: tuple[tuple[int, int, float], ...]) -> int:
    return max(1 - dx // dy if dy else 1 for dy, dx, _ in kernel if dy) if kernel else 1


def error_diffusion(linear: np.ndarray, inks: np.ndarray, kernel: str = "floyd-steinberg") -> np.ndarray:
    """Dither ``linear`` (H, W, 3, inside the ink hull) to ink indices with the named kernel."""
    taps = KERNELS[kernel]
    slope = _slope(taps)
    height, width, _ = linear.shape
    buf = np.zeros((height + _PAD, width + 2 * _PAD, 3), dtype=np.float32)
    buf[:height, _PAD:_PAD + width] = linear
    out = np.zeros((height, width), dtype=np.uint8)
    inks = inks.astype(np.float32)
    table = ink_lookup(inks)
    rows = np.arange(height)
    for step in range(width + slope * (height - 1)):
        # Rows whose pixel x = step - slope * y lies inside the picture.
        y_lo = max(0, -(-(step - width + 1) // slope))
        y_hi = min(height - 1, step // slope)
        ys = rows[y_lo:y_hi + 1]
        xs = step - slope * ys + _PAD
        values = np.clip(buf[ys, xs], -0.5, 1.5)
        idx = lookup_inks(values, table)
        out[ys, xs - _PAD] = idx
        error = values - inks[idx]
        for dy, dx, weight in taps:  # one statement per tap: targets are unique within a tap
            buf[ys + dy, xs + dx] += weight * error
    return out


_FINE = 4096  # steps per unit of linear light in the per-channel cell tables
# Range the cell tables cover. Rows are clamped to [-0.5, 1.5] before the loop, so the in-row carry
# keeps |error| <= 1.5 + 7/16 |error|, i.e. <= 2.67, and every value stays inside this span.
_SPAN = (-2.0, 3.0)


@functools.lru_cache(maxsize=1)
def _cell_tables() -> tuple[list[int], list[int], list[int]]:
    """Per-channel tables from a fine linear step to that channel's share of the lookup-table index.

    They replace three square roots, clamps and multiplies per pixel by three list reads in the
    Python loop below.
    """
    values = _SPAN[0] + np.arange(int((_SPAN[1] - _SPAN[0]) * _FINE) + 1) / _FINE
    cells = np.minimum((np.sqrt(np.maximum(values, 0.0)) * _LUT_LEVELS).astype(np.int64), _LUT_LEVELS - 1)
    return ((cells * _LUT_LEVELS * _LUT_LEVELS).tolist(), (cells * _LUT_LEVELS).tolist(), cells.tolist())


def choose_ink(r: float, g: float, b: float, lookup: list[int]) -> int:
    """The serpentine loop's ink choice for one linear pixel (the loop inlines this for speed)."""
    red, green, blue = _cell_tables()
    offset, top = -_SPAN[0] * _FINE, len(red) - 1
    cells = [min(max(int(v * _FINE + offset), 0), top) for v in (r, g, b)]
    return lookup[red[cells[0]] + green[cells[1]] + blue[cells[2]]]


def _quantise_row(values: list, carry: float, order: range, lookup: list[int], inks: list) -> tuple:
    """The sequential part of one row: each pixel gets ``carry`` of its scan-wise predecessor's error.

    Returns the picked inks and the errors as three per-channel lists (cheap to hand back to numpy).
    """
    red, green, blue = _cell_tables()
    offset = -_SPAN[0] * _FINE
    picked = [0] * len(values)
    err_r, err_g, err_b = [0.0] * len(values), [0.0] * len(values), [0.0] * len(values)
    er = eg = eb = 0.0
    for x in order:
        r, g, b = values[x]
        r += er * carry
        g += eg * carry
        b += eb * carry
        k = lookup[red[int(r * _FINE + offset)] + green[int(g * _FINE + offset)] + blue[int(b * _FINE + offset)]]
        qr, qg, qb = inks[k]
        er, eg, eb = r - qr, g - qg, b - qb
        picked[x] = k
        err_r[x] = er
        err_g[x] = eg
        err_b[x] = eb
    return picked, (err_r, err_g, err_b)


@register_dither("linear-serpentine")
def serpentine(linear: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """Serpentine Floyd-Steinberg in linear light: rows alternate direction, so no diagonal worms.

    A serpentine scan is sequential end to end (each row starts where the last one ended), so only
    the in-row carry runs in Python (about 1 s for 800x480); the 3/16, 5/16, 1/16 share for the next
    row is spread with numpy once per row.
    """
    height, width, _ = linear.shape
    lookup = ink_lookup(inks).tolist()
    ink_list = [tuple(v) for v in inks.astype(np.float64).tolist()]
    buf = linear.astype(np.float64)
    out = np.zeros((height, width), dtype=np.uint8)
    for y in range(height):
        backwards = y % 2 == 1
        order = range(width - 1, -1, -1) if backwards else range(width)
        row = np.clip(buf[y], -0.5, 1.5).tolist()
        picked, errors = _quantise_row(row, 7 / 16, order, lookup, ink_list)
        out[y] = picked
        if y + 1 == height:
            break
        err = np.array(errors).T
        behind, ahead = (1 / 16, 3 / 16) if backwards else (3 / 16, 1 / 16)
        below = buf[y + 1]
        below += 5 / 16 * err
        below[:-1] += behind * err[1:]  # pixel x sends to x-1 on the next row
        below[1:] += ahead * err[:-1]  # ... and to x+1
    return out


def _bayer(size: int) -> np.ndarray:
    matrix = np.zeros((1, 1))
    while matrix.shape[0] < size:
        matrix = np.block([[4 * matrix, 4 * matrix + 2], [4 * matrix + 3, 4 * matrix + 1]])
    return (matrix + 0.5) / matrix.size


@functools.lru_cache(maxsize=1)
def blue_noise(size: int = 64, sigma: float = 1.9, seed: int = 7) -> np.ndarray:
    """A tileable blue-noise threshold map by void-and-cluster (Ulichney 1993), made once per process.

    Each step puts the next rank where the Gaussian-blurred energy of the ranks so far is lowest, so
    neighbouring thresholds stay far apart; costs about 0.1 s for 64x64.
    """
    offsets = np.arange(size) - size // 2
    ring = np.minimum(np.abs(offsets), size - np.abs(offsets))
    kernel = np.exp(-(ring[:, None] ** 2 + ring[None, :] ** 2) / (2 * sigma**2))
    kernel = np.roll(kernel, (-(size // 2), -(size // 2)), axis=(0, 1))  # centred on (0, 0)
    rng = np.random.default_rng(seed)
    energy = rng.random((size, size)) * 1e-6
    ranks = np.zeros((size, size))
    for rank in range(size * size):
        y, x = divmod(int(np.argmin(energy)), size)
        ranks[y, x] = rank
        energy += np.roll(kernel, (y, x), axis=(0, 1))
        energy[y, x] = np.inf
    return (ranks + 0.5) / ranks.size


def threshold_dither(linear: np.ndarray, inks: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Per pixel, the best mix of two inks (least linear-RGB error), chosen by a tiled threshold map.

    Distances come from one matrix product (pixel . ink) so each ink pair costs only a few
    whole-picture vector operations.
    """
    height, width, _ = linear.shape
    pixels = linear.reshape(-1, 3).astype(np.float32)
    inks = inks.astype(np.float32)
    dots = pixels @ inks.T  # (n, k): p . ink
    squares = (inks * inks).sum(axis=1)  # |ink|^2
    best_err = np.full(len(pixels), np.inf, dtype=np.float32)
    first = np.zeros(len(pixels), dtype=np.uint8)
    second = np.zeros(len(pixels), dtype=np.uint8)
    share = np.zeros(len(pixels), dtype=np.float32)
    for i, j in itertools.combinations(range(len(inks)), 2):
        span2 = max(float(squares[i] + squares[j] - 2 * inks[i] @ inks[j]), 1e-12)  # |b - a|^2
        along = dots[:, j] - dots[:, i] - float(inks[i] @ inks[j]) + float(squares[i])  # (p - a).(b - a)
        t = np.clip(along / span2, 0.0, 1.0)
        # |p - a - t (b - a)|^2 without the |p|^2 term, which is the same for every pair.
        err = -2 * dots[:, i] + squares[i] - 2 * t * along + t * t * span2
        better = err < best_err
        best_err[better], first[better], second[better], share[better] = err[better], i, j, t[better]
    tile_y = (height + thresholds.shape[0] - 1) // thresholds.shape[0]
    tile_x = (width + thresholds.shape[1] - 1) // thresholds.shape[1]
    tiled = np.tile(thresholds, (tile_y, tile_x))[:height, :width].reshape(-1)
    return np.where(share > tiled, second, first).reshape(height, width)


@register_dither("floyd-steinberg")
def floyd_steinberg(linear: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """Floyd-Steinberg, left to right on every row (the vectorised wavefront)."""
    return error_diffusion(linear, inks, "floyd-steinberg")


@register_dither("atkinson")
def atkinson(linear: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """Atkinson's kernel: diffuses 6/8 of the error, for a punchy high-contrast look."""
    return error_diffusion(linear, inks, "atkinson")


@register_dither("ordered")
def ordered(linear: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """Bayer 8x8 ordered dither: regular cross-hatch texture, no error streaks, stable under edits."""
    return threshold_dither(linear, inks, _bayer(8))


@register_dither("blue-noise")
def blue_noise_dither(linear: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """Blue-noise threshold dither: grain without Bayer's grid pattern or error-diffusion worms."""
    return threshold_dither(linear, inks, blue_noise())


@register_dither("none")
def no_dither(linear: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """Nearest ink per pixel; only for pictures already drawn in the panel's inks."""
    height, width, _ = linear.shape
    return nearest_ink(linear.reshape(-1, 3), inks.astype(np.float32)).reshape(height, width)
