"""The panel table: every supported panel and every measured palette, each defined exactly once.

A palette lists the colours a panel *really* shows under ordinary room light (measured, not the
idealised 255/0 values from the datasheets): dithering against the ideal colours is what makes mid-tones
come out too light. ``native_indices`` maps palette position to the code the controller expects (the
Spectra 6 controller skips code 4; the 1-bit panel writes black as bit 1).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from frame.errors import UsageError

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Palette:
    """Colours a panel can show, in the order the panel's drivers index them."""

    name: str
    colours: tuple[RGB, ...]
    names: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Panel:
    """One panel model: geometry, measured palette and care limits.

    ``driver`` names the module under ``frame.display.drivers`` that talks to it.
    """

    name: str
    size: tuple[int, int]
    palette_name: str
    native_indices: tuple[int, ...]
    driver: str
    min_refresh_seconds: int
    default_saturation: float
    description: str

    @property
    def palette(self) -> tuple[RGB, ...]:
        """The measured RGB colour of each ink, in driver index order."""
        return get_palette(self.palette_name).colours

    @property
    def colour_names(self) -> tuple[str, ...]:
        return get_palette(self.palette_name).names

    @property
    def white_index(self) -> int:
        """The white ink: the one whose darkest channel is brightest (a 7-colour panel's yellow is
        brighter than its white, so not simply the brightest ink)."""
        palette = self.palette
        return max(range(len(palette)), key=lambda i: min(palette[i]))


_SPECTRA = ("black", "white", "yellow", "red", "blue", "green")
_ACEP = ("black", "white", "green", "blue", "red", "yellow", "orange")

PALETTES: dict[str, Palette] = {p.name: p for p in (
    Palette("spectra6", ((26, 13, 35), (185, 202, 205), (202, 184, 0), (121, 9, 0), (0, 69, 139),
                         (40, 82, 57)), _SPECTRA,
            "Waveshare 7.3in (E) Spectra 6, measured (epaper-dithering SPECTRA_7_3_6COLOR)"),
    Palette("spectra6-v2", ((31, 24, 41), (168, 180, 182), (180, 173, 0), (113, 24, 19), (36, 70, 139),
                            (50, 84, 60)), _SPECTRA,
            "Spectra 6 second measurement (epaper-dithering SPECTRA_7_3_6COLOR_V2)"),
    Palette("inky-spectra6", ((0, 0, 0), (161, 164, 165), (208, 190, 71), (156, 72, 75), (61, 59, 94),
                              (58, 91, 70)), _SPECTRA,
            "Pimoroni inky E673 / EL133UF1 SATURATED palette"),
    Palette("acep7", ((0, 0, 0), (217, 242, 255), (3, 124, 76), (27, 46, 198), (245, 80, 34),
                      (255, 255, 68), (239, 121, 44)), _ACEP,
            "7-colour ACeP AC073TC1A (Waveshare 7.3in F, Inky 7.3in 2023), Pimoroni SATURATED palette"),
    Palette("acep7-uc8159", ((57, 48, 57), (255, 255, 255), (58, 91, 70), (61, 59, 94), (156, 72, 75),
                             (208, 190, 71), (177, 106, 73)), _ACEP,
            "7-colour ACeP UC8159 (Inky Impression 4in / 5.7in), Pimoroni SATURATED palette"),
    Palette("bw", ((5, 5, 5), (220, 220, 220)), ("black", "white"),
            "black/white film, measured (epaper-dithering MONO_4_26)"),
)}

_WAVESHARE_CARE = 180  # Waveshare's precautions: at least 180 s between full refreshes.

PANELS: dict[str, Panel] = {p.name: p for p in (
    Panel("virtual", (800, 480), "spectra6", (0, 1, 2, 3, 4, 5), "virtual", 0, 1.0,
          "no hardware: writes PNGs of what a panel would show (any size and palette)"),
    Panel("waveshare-7in5-v2", (800, 480), "bw", (1, 0), "waveshare_7in5_v2", _WAVESHARE_CARE, 1.0,
          "Waveshare 7.5in V2 black/white, 1 bpp"),
    Panel("waveshare-7in3f", (800, 480), "acep7", (0, 1, 2, 3, 4, 5, 6), "waveshare_7in3f",
          _WAVESHARE_CARE, 1.0, "Waveshare 7.3in (F) 7-colour ACeP, 4 bpp"),
    Panel("waveshare-7in3e", (800, 480), "spectra6", (0, 1, 2, 3, 5, 6), "waveshare_7in3e",
          _WAVESHARE_CARE, 1.0, "Waveshare 7.3in (E) Spectra 6, 4 bpp, code 4 unused"),
    Panel("inky-impression-4", (640, 400), "acep7-uc8159", (0, 1, 2, 3, 4, 5, 6), "inky", 30, 1.0,
          "Pimoroni Inky Impression 4in (UC8159)"),
    Panel("inky-impression-5.7", (600, 448), "acep7-uc8159", (0, 1, 2, 3, 4, 5, 6), "inky", 30, 1.0,
          "Pimoroni Inky Impression 5.7in (UC8159)"),
    Panel("inky-impression-7.3-2023", (800, 480), "acep7", (0, 1, 2, 3, 4, 5, 6), "inky", 30, 1.0,
          "Pimoroni Inky Impression 7.3in 2023 (AC073TC1A)"),
    Panel("inky-impression-7.3", (800, 480), "inky-spectra6", (0, 1, 2, 3, 4, 5), "inky", 30, 1.0,
          "Pimoroni Inky Impression 7.3in 2025 (E673 Spectra 6; inky remaps to the native codes)"),
    Panel("inky-impression-13.3", (1600, 1200), "inky-spectra6", (0, 1, 2, 3, 4, 5), "inky", 30, 1.0,
          "Pimoroni Inky Impression 13.3in (EL133UF1 Spectra 6)"),
)}

# Names accepted in the configuration that are resolved when the display is opened.
AUTO_PANELS = {"inky": "Inky Impression, model read from the HAT's EEPROM by inky's auto-detection"}


def _unknown(kind: str, name: str, choices: list[str]) -> UsageError:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(f"unknown {kind} {name!r}{hint}; choose one of: {', '.join(choices)}")


def panel_names() -> list[str]:
    """Every name ``display.panel`` accepts, including auto-detected ones."""
    return [*PANELS, *AUTO_PANELS]


def palette_names() -> list[str]:
    """Every name ``display.palette`` accepts (virtual panel only)."""
    return list(PALETTES)


def get_palette(name: str) -> Palette:
    """The measured palette called ``name``; unknown names raise ``UsageError`` with a suggestion."""
    try:
        return PALETTES[name]
    except KeyError:
        raise _unknown("palette", name, palette_names()) from None


def parse_size(text: str) -> tuple[int, int]:
    """``"800x480"`` to ``(800, 480)``."""
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"display size {text!r} is not WIDTHxHEIGHT, e.g. 800x480") from None
    if width <= 0 or height <= 0:
        raise UsageError(f"display size {text!r} must be positive")
    return width, height


def get_panel(name: str, size: tuple[int, int] | str | None = None, palette: str | None = None) -> Panel:
    """The panel called ``name``. ``size`` and ``palette`` customise only the ``virtual`` panel."""
    if name in AUTO_PANELS:
        raise UsageError(f"panel {name!r} is detected when the display is opened ({AUTO_PANELS[name]}); "
                         "name a model instead: " + ", ".join(p for p in PANELS if p.startswith(name)))
    try:
        panel = PANELS[name]
    except KeyError:
        raise _unknown("panel", name, panel_names()) from None
    if name != "virtual":
        return panel
    if isinstance(size, str):
        size = parse_size(size)
    palette_name = get_palette(palette).name if palette else panel.palette_name
    count = len(get_palette(palette_name).colours)
    return Panel("virtual", tuple(size or panel.size), palette_name, tuple(range(count)), "virtual",
                 panel.min_refresh_seconds, panel.default_saturation, panel.description)
