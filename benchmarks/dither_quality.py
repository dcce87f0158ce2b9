"""How close does each panel get to a picture? frame's preparation against Pillow's quantize.

For every measured palette, the script draws test pictures, dithers them, simulates the panel (each
pixel in its ink's measured colour), blurs panel and picture alike in linear light to mimic viewing
distance, and reports the mean CIEDE2000 between the two (lower is better), plus the time to prepare one
800x480 picture.

Two sets of pictures:
* ``in-gamut`` (the target): every colour is a mix of the panel's own inks in linear light, so a
  perfect dither at viewing distance would score ~0; whatever error remains is the method's fault.
* ``full-range``: ordinary sRGB pictures (white 255, pure primaries); the panel cannot show these, so
  part of the error is unavoidable gamut loss. Reported for context, no target.

Run: ``/work/venv/bin/python benchmarks/dither_quality.py [--size 800x480] [--palettes spectra6,bw]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frame.config.panels import PALETTES, get_panel  # noqa: E402
from frame.display import colour, gamut  # noqa: E402
from frame.display.dither import resolve_dither  # noqa: E402
from frame.display.preparation import prepare  # noqa: E402

BLUR_SIGMA = 1.5  # pixels: a 127 ppi panel seen from ~60 cm blends about this much


# ----- test pictures -------------------------------------------------------------------------------

def _mix(weights: np.ndarray, inks_linear: np.ndarray) -> np.ndarray:
    """Convex mix of inks (weights (H, W, n) summing to 1) in linear light, as 8-bit sRGB."""
    return colour.linear_to_srgb8(weights @ inks_linear)


def _ramp_weights(t: np.ndarray, a: int, b: int, n: int) -> np.ndarray:
    weights = np.zeros((*t.shape, n), dtype=np.float32)
    weights[..., a] += 1.0 - t
    weights[..., b] += t
    return weights


def _perceptual_ramp(width: int, y_from: float, y_to: float) -> np.ndarray:
    """Mixing fractions whose luminance steps evenly in L* (so dark and light ends get equal room)."""
    l_from, l_to = (116 * np.cbrt(y) - 16 for y in (y_from, y_to))
    lightness = np.linspace(l_from, l_to, width)
    y = ((lightness + 16) / 116) ** 3
    return ((y - y_from) / (y_to - y_from)).astype(np.float32)


def in_gamut_pictures(inks: np.ndarray, size: tuple[int, int], seed: int = 1) -> dict[str, np.ndarray]:
    """Pictures made only of mixes of the panel's inks (see module docstring)."""
    width, height = size
    inks_linear = colour.srgb8_to_linear(inks)
    n = len(inks)
    black, white = gamut.black_white(inks_linear)
    lum = inks_linear @ colour.LUMINANCE
    chroma = [i for i in range(n) if i not in (black, white)] or [white]
    t = np.tile(_perceptual_ramp(width, lum[black], lum[white]), (height, 1))
    pictures = {"grey ramp": _mix(_ramp_weights(t, black, white, n), inks_linear)}

    bands = []
    x = np.linspace(0, 1, width, dtype=np.float32)
    for ink in chroma:  # white -> ink -> black, one band per chromatic ink
        band = np.zeros((width, n), dtype=np.float32)
        first = x < 0.5
        band[first, white], band[first, ink] = 1 - 2 * x[first], 2 * x[first]
        band[~first, ink], band[~first, black] = 2 - 2 * x[~first], 2 * x[~first] - 1
        bands.append(np.repeat(band[None], height // len(chroma) + 1, axis=0))
    pictures["colour ramps"] = _mix(np.concatenate(bands)[:height], inks_linear)

    patches = [np.eye(n)[i] for i in range(n)]
    patches += [(np.eye(n)[i] + np.eye(n)[j]) / 2 for i in range(n) for j in range(i + 1, n)]
    cols = 6
    rows = -(-len(patches) // cols)
    grid = np.zeros((height, width, n), dtype=np.float32)
    grid[..., white] = 1.0  # cells left over after the last patch stay white
    for k, weights in enumerate(patches):
        r, c = divmod(k, cols)
        grid[r * height // rows:(r + 1) * height // rows, c * width // cols:(c + 1) * width // cols] = weights
    pictures["saturated patches"] = _mix(grid, inks_linear)
    pictures["smooth field"] = _mix(_smooth_weights(size, n, seed), inks_linear)
    pictures["painting"] = _mix(_painting_weights(size, n, black, white, chroma, seed), inks_linear)
    return pictures


def _smooth_field(size: tuple[int, int], rng: np.random.Generator, waves: int = 6) -> np.ndarray:
    width, height = size
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    field = np.zeros((height, width), dtype=np.float32)
    for _ in range(waves):
        fx, fy = rng.uniform(-3, 3, 2) * 2 * np.pi / np.array([width, height])
        field += np.sin(fx * xx + fy * yy + rng.uniform(0, 2 * np.pi)).astype(np.float32)
    return field / waves


def _smooth_weights(size: tuple[int, int], n: int, seed: int) -> np.ndarray:
    """Softmax of smooth random fields: photo-like gradients wandering between ink mixes."""
    rng = np.random.default_rng(seed)
    logits = np.stack([_smooth_field(size, rng) * 4 for _ in range(n)], axis=-1)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def _painting_weights(size: tuple[int, int], n: int, black: int, white: int, chroma: list[int],
                      seed: int) -> np.ndarray:
    """A procedural landscape: graded sky, a soft sun, three hill layers, brush-like texture."""
    width, height = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    eye = np.eye(n, dtype=np.float32)
    sky_top, sky_low = eye[chroma[-1 % len(chroma)]] * 0.5 + eye[white] * 0.5, eye[white]
    v = (yy / height)[..., None]
    weights = sky_top * (1 - v) + sky_low * v
    sun = np.exp(-(((xx - 0.7 * width) ** 2 + (yy - 0.3 * height) ** 2) / (0.08 * width) ** 2))[..., None]
    weights = weights * (1 - sun) + eye[chroma[0]] * sun
    for layer in range(3):
        ridge = height * (0.45 + 0.15 * layer) + height * 0.06 * _smooth_field(size, rng, 3)[0]
        inside = 1 / (1 + np.exp(np.clip(-(yy - ridge) / 2.0, -50, 50)))  # soft edge, 2 px
        ink = eye[chroma[(layer + 1) % len(chroma)]]
        shade = (0.3 + 0.2 * layer) * (yy / height)
        hill = ink * (1 - shade)[..., None] + eye[black] * shade[..., None]
        weights = weights * (1 - inside[..., None]) + hill * inside[..., None]
    texture = 0.08 * _smooth_field(size, rng, 24)[..., None]
    weights = np.clip(weights + texture * (eye[white] - eye[black]), 0, None)
    return weights / weights.sum(axis=-1, keepdims=True)


def full_range_pictures(size: tuple[int, int]) -> dict[str, np.ndarray]:
    """Ordinary sRGB pictures: a 0..255 grey ramp and an HSV hue/lightness sweep."""
    width, height = size
    ramp = np.tile(np.linspace(0, 255, width), (height, 1)).round().astype(np.uint8)
    hue = Image.fromarray(np.stack([
        np.tile(np.linspace(0, 255, width), (height, 1)),
        np.full((height, width), 255.0),
        np.tile(np.linspace(255, 60, height)[:, None], (1, width))], axis=-1).astype(np.uint8), "HSV")
    return {"grey ramp 0-255": np.stack([ramp] * 3, axis=-1), "hue sweep": np.asarray(hue.convert("RGB"))}


# ----- simulation and scoring --------------------------------------------------------------------------

def _blur(linear: np.ndarray, sigma: float = BLUR_SIGMA) -> np.ndarray:
    radius = int(3 * sigma)
    taps = np.exp(-np.arange(-radius, radius + 1) ** 2 / (2 * sigma**2))
    taps /= taps.sum()
    for axis in (0, 1):
        padded = np.pad(linear, [(radius, radius) if a == axis else (0, 0) for a in range(3)], mode="edge")
        length = linear.shape[axis]
        linear = sum(w * np.take(padded, range(i, i + length), axis=axis) for i, w in enumerate(taps))
    return linear


def score(picture: np.ndarray, indices: np.ndarray, inks: np.ndarray) -> float:
    """Mean CIEDE2000 between the blurred picture and the blurred simulated panel."""
    shown = colour.srgb8_to_linear(inks)[indices]
    want = colour.srgb8_to_linear(picture)
    return float(colour.delta_e2000(colour.linear_to_lab(_blur(want)), colour.linear_to_lab(_blur(shown))).mean())


def pillow_indices(picture: np.ndarray, inks: np.ndarray) -> np.ndarray:
    palette = Image.new("P", (1, 1))
    padded = [int(c) for ink in inks for c in ink]
    palette.putpalette(padded + padded[:3] * (256 - len(inks)))  # repeat ink 0 so no extra index wins
    out = Image.fromarray(picture).quantize(palette=palette, dither=Image.Dither.FLOYDSTEINBERG)
    return np.asarray(out)


def frame_indices(picture: np.ndarray, inks: np.ndarray, dither: str) -> np.ndarray:
    panel = get_panel("virtual", size=(picture.shape[1], picture.shape[0]), palette=_palette_of(inks))
    return np.asarray(prepare(Image.fromarray(picture), panel, dither=dither))


def library_own_indices(picture: np.ndarray, inks: np.ndarray) -> np.ndarray:
    """epaper-dithering with its own tone and gamut compression (for the engine decision)."""
    import epaper_dithering as lib

    names = [f"ink{i}" for i in range(len(inks))]
    palette = lib.ColorPalette(colors={k: tuple(int(c) for c in v) for k, v in zip(names, inks)},
                               accent=names[-1])
    return np.asarray(lib.dither_image(Image.fromarray(picture), palette, mode=lib.DitherMode.FLOYD_STEINBERG,
                                       serpentine=True, tone="auto", gamut="auto"))


def _palette_of(inks: np.ndarray) -> str:
    return next(name for name, p in PALETTES.items() if np.array_equal(np.array(p.colours), inks))


METHODS = {
    "frame": lambda pic, inks: frame_indices(pic, inks, "auto"),
    "frame-numpy-fs": lambda pic, inks: frame_indices(pic, inks, "floyd-steinberg"),
    "frame-blue-noise": lambda pic, inks: frame_indices(pic, inks, "blue-noise"),
    "frame-atkinson": lambda pic, inks: frame_indices(pic, inks, "atkinson"),
    "epaper-dithering-own": library_own_indices,
    "pillow": pillow_indices,
}


def time_prepare(size: tuple[int, int], repeats: int = 3) -> dict[str, float]:
    """Best-of-N seconds to prepare a photo-like picture from a 1600x960 source, per method."""
    rng = np.random.default_rng(3)
    source = Image.fromarray(_mix(_smooth_weights((size[0] * 2, size[1] * 2), 3, 3),
                                  np.eye(3, dtype=np.float32)) | rng.integers(0, 8, (size[1] * 2, size[0] * 2, 3),
                                                                              dtype=np.uint8))
    panel = get_panel("virtual", size=size, palette="spectra6")
    timings = {}
    for dither in ("auto", "floyd-steinberg", "atkinson", "blue-noise", "ordered"):
        best = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            prepare(source, panel, dither=dither)
            best = min(best, time.perf_counter() - start)
        timings[f"{dither} ({resolve_dither(dither)})"] = best
    start = time.perf_counter()
    pillow_indices(np.asarray(source.resize(size)), np.array(panel.palette))
    timings["pillow quantize FS (no resize/tone)"] = time.perf_counter() - start
    return timings


def run(size: tuple[int, int], palettes: list[str], methods: list[str]) -> list[str]:
    lines = ["| palette | picture set | picture | " + " | ".join(methods) + " | frame / pillow |",
             "|---|---|---|" + "---|" * (len(methods) + 1)]
    worst_ratio = 0.0
    for name in palettes:
        inks = np.array(PALETTES[name].colours, dtype=np.uint8)
        sets = {"in-gamut": in_gamut_pictures(inks, size), "full-range": full_range_pictures(size)}
        for set_name, pictures in sets.items():
            for label, picture in pictures.items():
                scores = {m: score(picture, METHODS[m](picture, inks), inks) for m in methods}
                ratio = scores.get("frame", np.nan) / scores.get("pillow", np.nan)
                if set_name == "in-gamut":
                    worst_ratio = max(worst_ratio, ratio)
                cells = " | ".join(f"{scores[m]:.2f}" for m in methods)
                lines.append(f"| {name} | {set_name} | {label} | {cells} | {ratio:.0%} |")
                print(lines[-1], flush=True)
    lines.append(f"\nWorst in-gamut frame/pillow ratio: {worst_ratio:.0%} (target <= 50%)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="800x480")
    parser.add_argument("--palettes", default=",".join(PALETTES))
    parser.add_argument("--methods", default="frame,pillow")
    parser.add_argument("--timing-only", action="store_true", help="skip the quality table")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    methods = args.methods.split(",")
    if not args.timing_only:
        print(f"mean CIEDE2000 after a {BLUR_SIGMA} px linear-light blur, {size[0]}x{size[1]} pictures")
        lines = run(size, args.palettes.split(","), methods)
        print("\n".join(lines[:2] + lines[-1:]))
    print("\nprepare time (seconds, best of 3, 800x480 from 1600x960):")
    for label, seconds in time_prepare((800, 480)).items():
        print(f"| {label} | {seconds:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
