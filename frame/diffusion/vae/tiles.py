"""How a latent is cut into VAE tiles: one rule, used by the render and by the estimate.

Every tile decodes its overlap with a neighbour again, so the fewer the tiles, the less work: the
64×64 latent of a 512×512 picture in 32×32 tiles overlapping by 8 takes 3×3 = 9 decodes, 2.25× the
picture's own multiply-adds, where 2×2 tiles of 36 take 1.27× and one whole decode 1×. But a tile's
memory grows with its area (the full-size SD decoder, 8-bit: 202 MB at 32×32, 232 MB at 36×36,
617 MB whole), and the worker has ``worker.memory_limit_mb``. So, unless the owner sets
``model.vae_tile``, the layout is **the fewest tiles whose counted peak fits the limit with a margin**
(``choose``): for each tile count (rows × columns, rectangular tiles allowed) the smallest tiles that
cover the latent with the overlap, tried by the work they decode (tiles × tile area: fewer tiles
decode less overlap again), fewest tiles on a tie; the first one whose
peak (``peak_mb``: the decoder's counted peak at that tile size, ``frame.estimate.vae``) plus
``WORKER_EXTRA_MB`` stays within ``1 - MARGIN`` of the limit (none fits: the smallest tiles, the
least memory there is). Without a peak function or a limit, tiles of ``DEFAULT_TILE`` as before.

``frame.diffusion.vae.decoder.decode`` runs the layout ``layout_for`` returns, and ``frame.estimate.plan``
counts it, from the same call with the same peak function (the render worker puts that counter in the
pipeline's plan, ``RenderPlan.vae_peak_mb``), so the night's estimate counts the tiles the render decodes.
The encoder asks ``tile_plan`` whether to tile and lays its tiles out as the decoder's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from frame.diffusion.guidance_plan import WORKER_EXTRA_MB
from frame.errors import UsageError

DEFAULT_TILE = 32   # latent pixels: the tile without a memory figure (and the VAE encoder's tile)
MARGIN = 0.10       # of the limit kept free: the counted VAE peaks were within -9 %..+4 % of VmHWM
MIN_TILE = 8        # latent pixels: no smaller automatic tile

PeakMb = Callable[[tuple[int, int]], "float | None"]


def tile_starts(size: int, tile: int, overlap: int) -> list[int]:
    """Start offsets covering ``size`` with tiles of ``tile`` overlapping by at least ``overlap``."""
    if size <= tile:
        return [0]
    stride = tile - overlap
    starts = list(range(0, size - tile, stride))
    starts.append(size - tile)
    return starts


@dataclass(frozen=True)
class TileLayout:
    """Tiles of ``tile`` (height, width) latent pixels starting at rows ``ys`` and columns ``xs``."""

    tile: tuple[int, int]
    ys: tuple[int, ...]
    xs: tuple[int, ...]
    overlap: int
    reason: str = ""

    @property
    def count(self) -> int:
        return len(self.ys) * len(self.xs)

    def describe(self) -> str:
        grid = f"{len(self.ys)}x{len(self.xs)} tiles of {self.tile[0]}x{self.tile[1]}"
        return f"{grid} (overlap {self.overlap})" + (f": {self.reason}" if self.reason else "")


def fixed_layout(latent: tuple[int, int], tile: tuple[int, int], overlap: int, reason: str = "") -> TileLayout:
    """Tiles of a given size (at most the latent's) stepping by ``tile - overlap``, the last flush."""
    th, tw = min(tile[0], latent[0]), min(tile[1], latent[1])
    return TileLayout((th, tw), tuple(tile_starts(latent[0], th, overlap)),
                      tuple(tile_starts(latent[1], tw, overlap)), overlap, reason)


def axis_tile(size: int, tiles: int, overlap: int) -> int:
    """The smallest tile that covers ``size`` in ``tiles`` tiles overlapping by ``overlap``."""
    return size if tiles == 1 else math.ceil((size + (tiles - 1) * overlap) / tiles)


def candidates(latent: tuple[int, int], overlap: int) -> list[TileLayout]:
    """Every layout worth trying, the least decode work first (tile count × tile area: the pixels the
    decoder runs), then the fewest tiles, then the squarest."""
    per_axis = []
    smallest = max(2 * overlap, MIN_TILE)  # below it the ramps cross and every pixel is a seam
    for size in latent:
        sizes = [size]
        while True:
            tile = axis_tile(size, len(sizes) + 1, overlap)
            if tile < smallest or tile >= sizes[-1]:
                break
            sizes.append(tile)
        per_axis.append(sizes)
    found = {}
    for th in per_axis[0]:
        for tw in per_axis[1]:
            layout = fixed_layout(latent, (th, tw), overlap)
            found.setdefault(layout.tile, layout)
    return sorted(found.values(), key=lambda t: (t.count * t.tile[0] * t.tile[1], t.count, abs(t.tile[0] - t.tile[1])))


def choose(latent: tuple[int, int], overlap: int, tile: int | None = None, peak_mb: PeakMb | None = None,
           limit_mb: float | None = None) -> TileLayout:
    """The layout to decode ``latent`` (height, width) with: ``tile`` (the owner's ``model.vae_tile``)
    wins; else the fewest tiles whose ``peak_mb`` + ``WORKER_EXTRA_MB`` fits ``limit_mb`` less
    ``MARGIN``; without a peak function or a limit, ``DEFAULT_TILE``; when none fits, the smallest."""
    if tile is not None:
        return fixed_layout(latent, (tile, tile), overlap, f"model.vae_tile {tile}")
    if peak_mb is None or limit_mb is None:
        return fixed_layout(latent, (DEFAULT_TILE, DEFAULT_TILE), overlap, "no memory figure: the default tile")
    budget = limit_mb * (1 - MARGIN)
    options = candidates(latent, overlap)
    for layout in options:
        peak = peak_mb(layout.tile)
        if peak is None:  # the decoder could not be counted: as without a figure
            return fixed_layout(latent, (DEFAULT_TILE, DEFAULT_TILE), overlap, "not counted: the default tile")
        if peak + WORKER_EXTRA_MB <= budget:
            return TileLayout(layout.tile, layout.ys, layout.xs, overlap,
                              f"the fewest tiles within the worker's {limit_mb:.0f} MB (about "
                              f"{peak + WORKER_EXTRA_MB:.0f} MB counted, {MARGIN:.0%} kept free)")
    least = min(options, key=lambda t: (t.tile[0] * t.tile[1], t.count))  # the least memory there is
    return TileLayout(least.tile, least.ys, least.xs, overlap,
                      f"no layout's counted peak fits the worker's {limit_mb:.0f} MB: the smallest tiles")


def tile_plan(latent_hw: tuple[int, int], static: tuple[int, int] | None, tile: int, tiled: bool | None
              ) -> tuple[bool, tuple[int, int]]:
    """Whether the VAE (decoder or encoder) runs in tiles, and the tile size in latent pixels.

    ``static``: the export's fixed latent size, or None. ``tiled=None`` tiles when the latent is larger
    than one tile; True/False force it, except that a static export must tile whenever the latent is
    larger than its input, and whenever the latent is not exactly its input size.
    """
    tile_hw = static or (tile, tile)
    larger = latent_hw[0] > tile_hw[0] or latent_hw[1] > tile_hw[1]
    use_tiles = larger if tiled is None else (tiled or static is not None and larger)
    return use_tiles or (static is not None and tuple(latent_hw) != tuple(static)), tile_hw


def layout_for(latent: tuple[int, int], static: tuple[int, int] | None, tile: int | None = None, overlap: int = 8,
               tiled: bool | None = None, peak_mb: PeakMb | None = None,
               limit_mb: float | None = None) -> TileLayout:
    """The tiles ``decode`` runs for a ``latent`` (height, width) on a decoder whose input is fixed at
    ``static`` (None: dynamic, or made dynamic at load): one whole tile for ``tiled=False`` or a latent
    that fits, else ``choose`` (``frame.estimate.plan`` counts the same call)."""
    height, width = latent
    if static:
        if height < static[0] or width < static[1]:
            raise UsageError(f"vae_decoder has fixed input {static[0]}x{static[1]} latent pixels; "
                             f"the latent is only {height}x{width}")
        return fixed_layout(latent, static, overlap, "the decoder's fixed input size")
    if tiled is False:
        return fixed_layout(latent, latent, overlap, "decoded whole (tiled=False)")
    layout = choose(latent, overlap, tile, peak_mb, limit_mb)
    if tiled and layout.count == 1 and tile is None:
        return fixed_layout(latent, (DEFAULT_TILE,) * 2, overlap, "tiled=True")
    return layout
