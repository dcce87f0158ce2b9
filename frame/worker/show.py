"""The show worker, ``python -m frame.worker.show JOB_DIR``: send a stored picture to the panel, or
(a job with ``preview``) write what the panel would show for the phone page.

The daemon never imports the display drivers or the dithering; it writes a ``show`` job (the
original, the prepared panel image) and this worker refreshes the panel under ``panel.lock``
(``frame.worker.process``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from frame.config.panels import AUTO_PANELS
from frame.config.schema import Config
from frame.worker import process
from frame.worker.errors import StepUnavailable
from frame.worker.events import PreviewOutput, ShowOutput, StageEvent
from frame.worker.process import Emit
from frame.worker.records import ShowJob


def _stored(job: ShowJob) -> tuple[Any, Any]:
    """The job's original (RGB) and stored panel image, opened the same way for a show and a preview."""
    from PIL import Image

    original = Image.open(job.image).convert("RGB")
    return original, Image.open(job.panel) if job.panel else None


def run_show(job: ShowJob, config: Config, job_dir: Path, emit: Emit) -> ShowOutput | PreviewOutput:
    """Refresh the panel with the stored panel image (re-prepared from the original when the
    configured panel changed since it was rendered). The display's refresh guard may decline.
    A job with ``preview`` set writes what the panel would show instead (``run_preview``)."""
    try:
        from frame.display import open_display
        from frame.display.device import DisplaySettings
    except ImportError as exc:
        raise StepUnavailable("show", f"the display drivers are not available: {exc}") from exc
    if job.preview is not None:
        return run_preview(job, config, emit)
    emit(StageEvent("refreshing the panel"))
    with open_display(DisplaySettings.from_section(config.display), state_dir=job.state_dir) as display:
        original, prepared = _stored(job)
        if prepared is None or prepared.mode != "P" or prepared.size != display.panel.size:
            result = display.show(original)
        else:
            result = display.show_prepared(prepared, original)
    return ShowOutput(status=result.status, message=result.message, paths=tuple(str(p) for p in result.paths),
                      retry_at=result.retry_at, shown=str(result.paths[0]) if result.paths else None)


def run_preview(job: ShowJob, config: Config, emit: Emit) -> PreviewOutput:
    """What the panel would show for the job's picture, as the virtual panel writes it, without a
    refresh: the same decision as a show (``device.panel_picture``: the stored panel image if it was
    made for this panel, else prepared again with today's ``display`` settings) and the same PNG
    (``virtual.simulate``, ``save_png_atomic``). The panel's size and inks come from the
    configuration; only an auto-detected board is opened (under ``panel.lock``) to read them."""
    from frame.display import get_panel, open_display
    from frame.display.device import DisplaySettings, panel_picture
    from frame.display.drivers.virtual import simulate
    from frame.display.files import save_png_atomic

    emit(StageEvent("preparing the preview"))
    settings = DisplaySettings.from_section(config.display)
    if settings.panel in AUTO_PANELS:
        with open_display(settings, state_dir=job.state_dir) as display:
            panel = display.panel
    else:
        panel = get_panel(settings.panel, size=settings.size, palette=settings.palette)
    original, stored = _stored(job)
    fitted, prepared = panel_picture(panel, settings, stored, original)
    assert job.preview is not None
    save_png_atomic(simulate(prepared), job.preview)
    made = None
    if fitted is not None and job.prepared is not None:
        made = save_png_atomic(prepared, job.prepared)
    return PreviewOutput(preview=job.preview, prepared=made)


def main(argv: list[str] | None = None) -> int:
    return process.main(argv, "show", run_show)


if __name__ == "__main__":  # run the importable module, so its logger is frame.worker.show
    from frame.worker import show

    sys.exit(show.main())
