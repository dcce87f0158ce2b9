"""The taste model's explanation plot in a short child of the render worker: ``python -m
frame.worker.plotchild JOB_DIR``.

Why a child of its own: the plot needs matplotlib, the choice scikit-learn and scipy. In one process
(the taste child, until 2026-12-03) they peaked at 201 MiB on x86 (173 without pandas, which the Pi's
lock does not have), 41 MiB of it matplotlib and the drawing, while the render worker waited beside it
with the text encoder loaded and the daemon served the phone. The taste child now leaves the plot's
numbers in ``why-plot.json`` (``frame.taste.plot_data``) and exits; this child reads them and draws
``why.png`` with matplotlib and numpy only (``frame.taste.plots.draw``). The worker starts it after
the taste child is gone (``tastechild.draw_plot``), so the two never run at once.

Exit 0 with ``why.png`` written and ``{"peak_rss_mb", "cpu_s"}`` on stdout; 1 with one line on
stderr. A failed plot never fails the night: the worker records why there is no plot.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from frame.statefile import read_json
from frame.taste.plot_data import PlotData
from frame.taste.plots import draw
from frame.worker.choose import PLOT_DATA_NAME, PLOT_NAME
from frame.worker.process import job_dir_child_main


def draw_here(job_dir: Path) -> Path:
    """Draw ``why.png`` from ``why-plot.json`` in ``job_dir`` (written whole: a temporary name, then renamed)."""
    data = read_json(job_dir / PLOT_DATA_NAME)
    if not isinstance(data, dict):
        raise ValueError(f"no readable {PLOT_DATA_NAME} in {job_dir}")
    partial = job_dir / (PLOT_NAME + ".partial.png")
    draw(PlotData.from_json(data), partial)
    os.replace(partial, job_dir / PLOT_NAME)
    return job_dir / PLOT_NAME


def main(argv: list[str] | None = None) -> int:
    return job_dir_child_main(sys.argv[1:] if argv is None else argv, "plotchild", draw_here, log_errors=False)


if __name__ == "__main__":
    raise SystemExit(main())
