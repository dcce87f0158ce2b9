"""The virtual panel: no hardware, writes what a panel would show as PNG files.

``panel.png`` shows every pixel in its ink's measured colour (what you would see on the wall);
``preview.png`` puts the input picture (fitted, before dithering) beside that simulation.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PIL import Image

from frame.atomicfile import make_dirs
from frame.config.panels import Panel
from frame.display.drivers.base import Driver, OpenRequest
from frame.display.drivers.registry import register_driver
from frame.display.files import save_png_atomic
from frame.errors import UsageError

log = logging.getLogger(__name__)


def simulate(prepared: Image.Image) -> Image.Image:
    """What the wall shows for a prepared "P" image: every pixel in its ink's measured colour (the
    virtual panel's ``panel.png``, and the phone page's preview of a picture)."""
    return prepared.convert("RGB")


@register_driver("virtual")
class VirtualDriver(Driver):
    @classmethod
    def open(cls, panel: Panel, request: OpenRequest) -> VirtualDriver:
        if request.out_dir:
            out_dir = Path(request.out_dir).expanduser()
        elif request.state_dir is None:
            raise UsageError("the virtual panel needs display.out_dir or a state directory to write into")
        else:
            out_dir = Path(request.state_dir).expanduser() / "display"
        return cls(panel, out_dir, request.out_file)

    def __init__(self, panel: Panel, out_dir: Path, out_file: Path | None = None) -> None:
        super().__init__(panel)
        self.out_dir = Path(out_dir)
        self.out_file = Path(out_file) if out_file else None

    def init(self) -> None:
        make_dirs(self.out_dir)  # durably: the panel-care record lives beside the pictures

    def show(self, prepared: Image.Image, original: Image.Image | None = None) -> list[str]:
        self.init()
        simulated = simulate(prepared)
        panel_path = self.out_file or self.out_dir / "panel.png"
        preview_path = panel_path.with_name(panel_path.stem + "-preview.png") if self.out_file \
            else self.out_dir / "preview.png"
        save_png_atomic(simulated, panel_path)
        left = (original or simulated).convert("RGB").resize(simulated.size, Image.Resampling.LANCZOS)
        preview = Image.new("RGB", (simulated.width * 2 + 8, simulated.height), (255, 255, 255))
        preview.paste(left, (0, 0))
        preview.paste(simulated, (simulated.width + 8, 0))
        save_png_atomic(preview, preview_path)
        log.info("virtual panel wrote %s and %s", panel_path, preview_path)
        return [str(panel_path), str(preview_path)]

    def clear(self) -> None:
        white = self.panel.palette[self.panel.white_index]
        self.init()
        save_png_atomic(Image.new("RGB", self.panel.size, white), self.out_file or self.out_dir / "panel.png")

    def sleep(self) -> None:
        """Nothing to power down."""

    def close(self) -> None:
        """Nothing to release."""

