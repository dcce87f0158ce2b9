"""The panel table: every supported panel and every measured palette, each defined exactly once.

It is the owner-facing list of ``display.panel`` and ``display.palette`` names, so it lives in the
config layer, beside the schema that checks those two keys against it (``load_config``, without
numpy); ``frame.display`` (preparation, the drivers) reads the rows. A new panel is a row here (and,
for new hardware, a driver in ``frame/display/drivers/`` whose id is added to ``DriverName``).

A palette lists the colours a panel *really* shows under ordinary room light (measured, not the
idealised 255/0 values from the datasheets): dithering against the ideal colours is what makes mid-tones
come out too light. ``native_indices`` maps palette position to the code the controller expects (the
Spectra 6 controller skips code 4; the 1-bit panel writes black as bit 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from frame.errors import UsageError, unknown_choice

RGB = tuple[int, int, int]
# The driver ids panel rows name; each is registered by one class in frame.display.drivers
# (frame.display.drivers.registry.DRIVERS refuses an id not listed here).
DriverName = Literal["virtual", "inky", "waveshare_7in3e", "waveshare_7in3f", "waveshare_7in5_v2"]


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

    ``driver`` is the id of the driver class that talks to it (``@register_driver`` in
    ``frame.display.drivers``): an id rather than the class, so this table stays free of numpy and Pillow.
    """

    name: str
    size: tuple[int, int]
    palette_name: str
    native_indices: tuple[int, ...]
    driver: DriverName
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
    Panel(name="virtual", size=(800, 480), palette_name="spectra6",
          native_indices=(0, 1, 2, 3, 4, 5), driver="virtual",
          min_refresh_seconds=0, default_saturation=1.0,
          description="no hardware: writes PNGs of what a panel would show (any size and palette)"),
    Panel(name="waveshare-7in5-v2", size=(800, 480), palette_name="bw",
          native_indices=(1, 0), driver="waveshare_7in5_v2",
          min_refresh_seconds=_WAVESHARE_CARE, default_saturation=1.0,
          description="Waveshare 7.5in V2 black/white, 1 bpp"),
    Panel(name="waveshare-7in3f", size=(800, 480), palette_name="acep7",
          native_indices=(0, 1, 2, 3, 4, 5, 6), driver="waveshare_7in3f",
          min_refresh_seconds=_WAVESHARE_CARE, default_saturation=1.0,
          description="Waveshare 7.3in (F) 7-colour ACeP, 4 bpp"),
    Panel(name="waveshare-7in3e", size=(800, 480), palette_name="spectra6",
          native_indices=(0, 1, 2, 3, 5, 6), driver="waveshare_7in3e",
          min_refresh_seconds=_WAVESHARE_CARE, default_saturation=1.0,
          description="Waveshare 7.3in (E) Spectra 6, 4 bpp, code 4 unused"),
    Panel(name="inky-impression-4", size=(640, 400), palette_name="acep7-uc8159",
          native_indices=(0, 1, 2, 3, 4, 5, 6), driver="inky",
          min_refresh_seconds=30, default_saturation=1.0,
          description="Pimoroni Inky Impression 4in (UC8159)"),
    Panel(name="inky-impression-5.7", size=(600, 448), palette_name="acep7-uc8159",
          native_indices=(0, 1, 2, 3, 4, 5, 6), driver="inky",
          min_refresh_seconds=30, default_saturation=1.0,
          description="Pimoroni Inky Impression 5.7in (UC8159)"),
    Panel(name="inky-impression-7.3-2023", size=(800, 480), palette_name="acep7",
          native_indices=(0, 1, 2, 3, 4, 5, 6), driver="inky",
          min_refresh_seconds=30, default_saturation=1.0,
          description="Pimoroni Inky Impression 7.3in 2023 (AC073TC1A)"),
    Panel(name="inky-impression-7.3", size=(800, 480), palette_name="inky-spectra6",
          native_indices=(0, 1, 2, 3, 4, 5), driver="inky",
          min_refresh_seconds=30, default_saturation=1.0,
          description="Pimoroni Inky Impression 7.3in 2025 (E673 Spectra 6; inky remaps to the native codes)"),
    Panel(name="inky-impression-13.3", size=(1600, 1200), palette_name="inky-spectra6",
          native_indices=(0, 1, 2, 3, 4, 5), driver="inky",
          min_refresh_seconds=30, default_saturation=1.0,
          description="Pimoroni Inky Impression 13.3in (EL133UF1 Spectra 6)"),
)}

# Names accepted in the configuration that are resolved when the display is opened.
AUTO_PANELS = {"inky": "Inky Impression, model read from the HAT's EEPROM by inky's auto-detection"}


def _unknown(kind: str, name: str, choices: list[str]) -> UsageError:
    return unknown_choice(kind, name, choices, cutoff=0.5)


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
