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

import json
import os
import resource
import sys
from pathlib import Path

from frame.statefile import read_json
from frame.taste.plot_data import PlotData
from frame.taste.plots import draw
from frame.worker.choose import PLOT_DATA_NAME, PLOT_NAME
from frame.worker.process import die_with_parent, peak_rss_mb


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
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m frame.worker.plotchild JOB_DIR\n")
        return 2
    die_with_parent(os.getppid())  # a worker killed mid-plot leaves no orphan drawing
    try:
        draw_here(Path(args[0]))
    except Exception as exc:  # noqa: BLE001 - one line for the worker, which notes it beside the choice
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"peak_rss_mb": round(peak_rss_mb(), 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
