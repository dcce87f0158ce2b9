"""``open_display``: a configured panel, ready to ``show`` pictures with panel care.

    with open_display(DisplaySettings.from_section(config.display), state_dir=state) as display:
        result = display.show("picture.png")   # ShowResult: shown / unchanged / too-soon

A show is refused early if the panel needs more rest (``care``); otherwise the picture is fitted,
colour-mapped and dithered for the panel (``preparation``), compared with what the panel already
shows, and only then sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from PIL import Image

from frame.clock import Clock
from frame.config.panels import AUTO_PANELS, Panel, get_panel
from frame.display import preparation
from frame.display.bus import Bus
from frame.display.care import SHOWN, RefreshGuard, ShowResult, picture_digest
from frame.display.dither import resolve_dither
from frame.display.drivers import driver_for
from frame.display.drivers.base import Driver, OpenRequest
from frame.display.drivers.inky import InkyDriver
from frame.errors import UsageError

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class DisplaySettings:
    """What ``open_display`` needs: the panel, how the picture is shaped for it, and the virtual
    panel's folder. Display's own record, so display never imports the configuration layer; its
    fields are those of the ``display:`` section (``frame.config.DisplayConfig``, which validates
    them), and ``from_section`` copies them (a test keeps the two field lists equal)."""

    panel: str = "virtual"
    size: str = "800x480"
    palette: str = "spectra6"
    rotate: int = 0
    fit: str = "cover"
    saturation: float | None = None
    dither: str | None = "auto"
    out_dir: str = ""
    min_refresh_seconds: int | None = None
    busy_timeout_seconds: float = 120.0

    @classmethod
    def from_section(cls, section: Any) -> DisplaySettings:
        """The settings of a configuration's ``display`` section (any object with these attributes)."""
        return cls(**{f.name: getattr(section, f.name) for f in fields(cls)})


def prepare_for(panel: Panel, settings: DisplaySettings,
                image: Image.Image | str | Path) -> tuple[Image.Image, Image.Image]:
    """(fitted RGB picture, prepared "P" image) of ``image`` for ``panel`` with ``settings``."""
    resolve_dither(settings.dither)  # a bad name fails before the expensive steps
    fitted, mask = preparation.fit_for_panel(image, panel, settings.fit, settings.rotate)
    prepared = preparation.render(fitted, panel, settings.saturation, settings.dither, mask)
    return fitted, prepared


def matches(panel: Panel, prepared: Image.Image) -> bool:
    """Whether ``prepared`` was made for ``panel``: "P" mode, panel size, this panel's inks."""
    inks = [c for ink in panel.palette for c in ink]
    if prepared.mode != "P" or prepared.size != panel.size:
        return False
    return (prepared.getpalette() or [])[:len(inks)] == inks


def panel_picture(panel: Panel, settings: DisplaySettings, stored: Image.Image | None,
                  original: Image.Image | str | Path) -> tuple[Image.Image | None, Image.Image]:
    """What ``panel`` shows for a stored picture: (the fitted picture when it was prepared now, else
    None; the "P" image). The stored panel image when it was made for this panel, else ``original``
    prepared again — the one decision both a show (``Display.show_prepared``) and the phone page's
    preview (``frame.worker.show``) take, so the preview is the panel's picture."""
    if stored is not None and matches(panel, stored):
        return None, stored
    if stored is not None:
        log.info("stored panel picture does not match %s; preparing it again", panel.name)
    return prepare_for(panel, settings, original)


class Display:
    """A panel plus its driver and refresh guard. Use as a context manager; ``close`` releases hardware."""

    def __init__(self, panel: Panel, driver: Driver, guard: RefreshGuard, settings: DisplaySettings) -> None:
        self.panel, self.driver, self.guard, self.settings = panel, driver, guard, settings

    def prepare(self, image: Image.Image | str | Path) -> tuple[Image.Image, Image.Image]:
        """(fitted RGB picture, prepared "P" image) with this display's settings."""
        return prepare_for(self.panel, self.settings, image)

    def show(self, image: Image.Image | str | Path, force: bool = False) -> ShowResult:
        """Prepare ``image`` and refresh the panel unless it is unchanged or too soon.

        ``force`` refreshes even an unchanged picture (never earlier than the minimum interval).
        """
        blocked = self.guard.too_soon()  # before spending seconds of CPU on preparing
        if blocked is not None:
            log.info("%s", blocked.message)
            return blocked
        fitted, prepared = self.prepare(image)
        return self.show_prepared(prepared, fitted, force=force)

    def matches(self, prepared: Image.Image) -> bool:
        """Whether ``prepared`` was made for this panel: "P" mode, panel size, this panel's inks."""
        return matches(self.panel, prepared)

    def show_prepared(self, prepared: Image.Image, original: Image.Image | str | Path | None = None,
                      force: bool = False) -> ShowResult:
        """Refresh with an already prepared "P" image (e.g. calibration bars, or one stored at night).

        If it was prepared for another panel or palette (the configuration changed since), it is
        prepared again from ``original``.
        """
        if not self.matches(prepared):
            if original is None:
                raise UsageError(f"the picture was prepared for another panel or palette than "
                                 f"{self.panel.name} ({self.panel.palette_name}); pass the original to redo it")
            original, prepared = panel_picture(self.panel, self.settings, prepared, original)
        digest = picture_digest(self.panel, prepared.tobytes())
        blocked = self.guard.check(digest, force=force)
        if blocked is not None:
            log.info("%s", blocked.message)
            return blocked
        try:
            paths = self.driver.show(prepared, original)
        except Exception:
            self.guard.forget()
            raise
        self.guard.record(digest)
        return ShowResult(SHOWN, self.panel.name, digest, f"{self.panel.name} refreshed", tuple(paths))

    def clear(self) -> None:
        self.driver.clear()
        self.guard.forget()

    def close(self) -> None:
        self.driver.close()

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _driver(config: DisplaySettings, request: OpenRequest) -> Driver:
    """The registered driver of the configured panel, opened (``display.panel: inky``: detected)."""
    if config.panel in AUTO_PANELS:
        return InkyDriver.open(None, request)
    panel = get_panel(config.panel, size=config.size, palette=config.palette)
    return driver_for(panel.driver).open(panel, request)


def open_display(config: DisplaySettings, state_dir: str | Path | None = None, *, bus: Bus | None = None,
                 clock: Clock | None = None, inky_module: Any = None, out_file: str | Path | None = None,
                 now: Callable[[], float] | None = None) -> Display:
    """Open the panel ``config`` describes (``DisplaySettings.from_section(config.display)``).

    ``state_dir`` holds the refresh guard's memory (``<state_dir>/display/care.json``; without it the
    guard remembers only for this process) and the virtual panel's default output. ``bus``, ``clock``,
    ``inky_module`` and ``now`` replace hardware and time in tests; ``out_file`` names the virtual
    panel's PNG (the CLI's ``--out``).
    """
    state = Path(state_dir).expanduser() if state_dir is not None else None
    request = OpenRequest(config.out_dir, config.busy_timeout_seconds, state, bus, clock, inky_module,
                          Path(out_file) if out_file else None)
    driver = _driver(config, request)
    panel = driver.panel
    interval = panel.min_refresh_seconds if config.min_refresh_seconds is None else config.min_refresh_seconds
    guard_kwargs = {"now": now} if now is not None else {}
    guard = RefreshGuard(state / "display" / "care.json" if state else None, panel.name, float(interval),
                         **guard_kwargs)
    log.info("opened %s (%dx%d, %s palette, min %ss between refreshes)", panel.name, *panel.size,
             panel.palette_name, interval)
    return Display(panel, driver, guard, config)
