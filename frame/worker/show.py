"""The show worker, ``python -m frame.worker.show JOB_DIR``: send a stored picture to the panel.

The daemon never imports the display drivers or the dithering; it writes a ``show`` job (the
original, the prepared panel image) and this worker refreshes the panel under ``panel.lock``
(``frame.worker.process``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from frame.config.schema import Config
from frame.worker import process
from frame.worker.errors import StepUnavailable
from frame.worker.process import Emit
from frame.worker.records import ShowJob, ShowOutput, StageEvent


def run_show(job: ShowJob, config: Config, job_dir: Path, emit: Emit) -> ShowOutput:
    """Refresh the panel with the stored panel image (re-prepared from the original when the
    configured panel changed since it was rendered). The display's refresh guard may decline."""
    try:
        from PIL import Image

        from frame.display import open_display
        from frame.display.device import DisplaySettings
    except ImportError as exc:
        raise StepUnavailable("show", f"the display drivers are not available: {exc}") from exc
    emit(StageEvent("refreshing the panel"))
    with open_display(DisplaySettings.from_section(config.display), state_dir=job.state_dir) as display:
        original = Image.open(job.image).convert("RGB")
        prepared = Image.open(job.panel) if job.panel else None
        if prepared is None or prepared.mode != "P" or prepared.size != display.panel.size:
            result = display.show(original)
        else:
            result = display.show_prepared(prepared, original)
    return ShowOutput(status=result.status, message=result.message, paths=tuple(str(p) for p in result.paths),
                      retry_at=result.retry_at, shown=str(result.paths[0]) if result.paths else None)


def main(argv: list[str] | None = None) -> int:
    return process.main(argv, "show", run_show)


if __name__ == "__main__":  # run the importable module, so its logger is frame.worker.show
    from frame.worker import show

    sys.exit(show.main())
