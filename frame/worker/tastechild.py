"""The taste model's choice in a short child of the render worker: ``python -m frame.worker.tastechild JOB_DIR``.

Why a child: the trained taste model imports scikit-learn and scipy, its explanation plot matplotlib.
Imported in the worker they (and the allocator arenas the fit leaves) stay resident for the whole
render, taken from the UNet on a 512 MB Pi (docs/benchmarks-pi.md, "Footprint on the Pi"). The child exits before
generation starts, so the worker never imports them. Without enough ratings the picker chooses for
variety with numpy alone, and that stays in the worker (no child to start). The plot is drawn by a
second child after this one exits (``plotchild.py``: matplotlib without scikit-learn), so this one
writes only its numbers: 201 → 160 MiB own peak on x86 (173 → 131 without the dev tools' pandas).

The text encoder embeds every text the picker can ask for (the concept axes' ends, the candidates,
the rated pictures) and the vectors are handed over: in the render worker, a third short child
(``embedchild.py``, via ``embed_in_child``) does it, so the worker waits beside the taste child
without a loaded pipeline (81 -> 40 MiB on x86, demo model). Files in the job folder, each written
atomically (``statefile.write_json``, checksummed):

* ``taste-input.json``, worker (or embed child) → child: ``{"texts": [...], "vectors": [[...], ...]}``;
* ``taste-choice.json``, child → worker: what ``tastechoice.pick`` returns (its plot is ``why.png``,
  drawn from ``why-plot.json`` by the plot child).

A worker restarted after a power cut takes ``taste-choice.json`` if it exists (the choice is never
made twice) and otherwise reuses ``taste-input.json`` (nothing is embedded twice). The child's failure
is the choose step's failure, with the child's last line as the message.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from frame.config import load_config
from frame.config.schema import Config
from frame.engine.memory import trim_free_memory
from frame.errors import FrameError
from frame.statefile import read_json, write_json
from frame.worker import choose as tastechoice
from frame.worker.childmain import own_status_mb
from frame.worker.choose import PLOT_DATA_NAME, pick
from frame.worker.process import job_dir_child_main
from frame.worker.records import JobUnreadable, RenderJob, ThemeChoice, read_job

log = logging.getLogger(__name__)

INPUT_NAME = "taste-input.json"
CHOICE_NAME = "taste-choice.json"
CHILD_TIMEOUT = 900.0  # seconds; generous: the child took 3.8 s CPU here, a Cortex-A53 is several times slower
EXIT_PERMANENT = 3


class ChoiceFailed(FrameError):
    """The child could not choose for a reason a retry cannot fix (bad input, bad ratings)."""

    step = "choose"


def choose(job: RenderJob, config: Config, embed: Any, job_dir: Path,
           embed_apart: Callable[[Path], None] | None = None) -> ThemeChoice:
    """Tonight's taste choice (``choose.pick``'s): in this process when the picker chooses for variety,
    in a child process when it trains the model. With ``embed_apart`` (the render worker's
    ``embedchild.embed_in_child``) the texts are embedded in a short child too, so this process
    never loads the pipeline before the taste child runs beside it."""

    saved = read_json(job_dir / CHOICE_NAME)
    if saved is not None:
        return draw_plot(job_dir, ThemeChoice.from_json(saved))
    ratings = [tastechoice.to_rating(p) for p in job.history]
    if not tastechoice.picker_for(config, embed).uses_model(ratings):
        return tastechoice.pick(job, config, embed, job_dir)
    if read_json(job_dir / INPUT_NAME) is None and embed_apart is not None:
        embed_apart(job_dir)
    if read_json(job_dir / INPUT_NAME) is None:
        write_input(job, config, embed, job_dir)
    return draw_plot(job_dir, run_child(job_dir))


def texts_to_embed(job: RenderJob, config: Config) -> list[str]:
    """Every text the picker embeds for this job: the axes' ends, the candidates, the rated pictures."""

    features = tastechoice.picker_for(config, _no_embed).features
    ends = [text for pair in features.axes.values() for text in pair]
    candidates = [tastechoice.to_candidate(item).text for item in job.candidates]
    rated = [tastechoice.to_rating(p).candidate.text for p in job.history]
    return ends + candidates + rated


def _no_embed(texts: list[str]) -> Any:
    raise AssertionError("texts_to_embed only reads the configured axes")


def write_input(job: RenderJob, config: Config, embed: Any, job_dir: Path) -> None:
    """``taste-input.json``: every text the picker asks for, with ``embed``'s vectors."""
    texts = sorted(set(texts_to_embed(job, config)))
    write_json(job_dir / INPUT_NAME, {"texts": texts, "vectors": _plain_rows(embed(texts), len(texts))})


def _plain_rows(vectors: Any, count: int) -> list[list[float]]:
    rows = np.asarray(vectors, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] != count:
        raise FrameError(f"the text encoder returned shape {rows.shape} for {count} texts")
    return rows.tolist()  # float64 → JSON → float64 is exact: the child sees the worker's numbers


def run_child(job_dir: Path, timeout: float = CHILD_TIMEOUT) -> ThemeChoice:
    """Run the child on ``job_dir``; its choice, or the step's failure with the child's last line."""
    command = [sys.executable, "-m", "frame.worker.tastechild", str(job_dir)]
    started, worker_mb = time.monotonic(), own_status_mb("VmRSS")
    _hand_back_free_memory()
    trimmed_mb = own_status_mb("VmRSS")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ChoiceFailed(f"the taste model took more than {timeout:.0f} s to choose") from exc
    choice = read_json(job_dir / CHOICE_NAME)
    if done.returncode == 0 and choice is not None:
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        log.info("taste model chose in a child process: %.1f s (%.1f s CPU), its peak RSS %.1f MiB "
                 "beside the worker's %.1f MiB (%.1f before malloc_trim)", time.monotonic() - started,
                 report.get("cpu_s", 0.0), report.get("peak_rss_mb", 0.0), trimmed_mb, worker_mb)
        return ThemeChoice.from_json(choice)
    lines = (done.stderr or "").strip().splitlines()
    message = f"the taste model could not choose: {lines[-1] if lines else f'exit status {done.returncode}'}"
    if done.returncode == EXIT_PERMANENT:
        raise ChoiceFailed(message)
    raise RuntimeError(message)  # a crash or a kill (out of memory?): the supervisor retries the job


def embed_in_child(job_dir: Path, timeout: float = CHILD_TIMEOUT) -> None:
    """Run ``python -m frame.worker.embedchild`` on ``job_dir`` (the render worker's ``embed_apart``);
    the choose step's failure with the child's last line if it wrote no ``taste-input.json``."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "frame.worker.embedchild", str(job_dir)], capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode == 0 and (job_dir / INPUT_NAME).is_file():
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        log.info("taste texts embedded in a child process: %.1f s (%.1f s CPU), its peak RSS %.1f MiB",
                 time.monotonic() - started, report.get("cpu_s", 0.0), report.get("peak_rss_mb", 0.0))
        return
    lines = (done.stderr or "").strip().splitlines()
    message = f"the taste model's texts could not be embedded: {lines[-1] if lines else f'exit {done.returncode}'}"
    if done.returncode == EXIT_PERMANENT:
        raise ChoiceFailed(message)
    raise RuntimeError(message)  # a crash or a kill (out of memory?): the supervisor retries the job


def draw_plot(job_dir: Path, choice: ThemeChoice, timeout: float = CHILD_TIMEOUT) -> ThemeChoice:
    """The choice with its plot drawn by the plot child (after a power cut too), or, when that fails,
    with ``plot_note`` saying why there is none (stored in ``taste-choice.json``): a plot never fails
    the night."""
    if choice.why.plot is None or (job_dir / choice.why.plot).is_file() or not (job_dir / PLOT_DATA_NAME).is_file():
        return choice
    command = [sys.executable, "-m", "frame.worker.plotchild", str(job_dir)]
    started = time.monotonic()
    _hand_back_free_memory()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        lines = (done.stderr or "").strip().splitlines()
        problem = None if done.returncode == 0 else (lines[-1] if lines else f"exit status {done.returncode}")
    except subprocess.TimeoutExpired:
        done, problem = None, f"the plot took more than {timeout:.0f} s"
    if problem is None and (job_dir / choice.why.plot).is_file():
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        log.info("taste plot drawn in a child process: %.1f s (%.1f s CPU), its peak RSS %.1f MiB",
                 time.monotonic() - started, report.get("cpu_s", 0.0), report.get("peak_rss_mb", 0.0))
        return choice
    log.warning("no explanation plot: %s", problem or "the plot child wrote no picture")
    noted = dataclasses.replace(choice, why=choice.why.with_details(
        plot=None, plot_note=f"No plot tonight: {problem or 'the plot child wrote no picture'}"))
    write_json(job_dir / CHOICE_NAME, noted.to_json())
    return noted


def lookup_embed(inputs: dict[str, Any]) -> Any:
    """``embed(texts)`` answered from the worker's vectors; a text it did not embed is a clear error."""

    rows = dict(zip(inputs["texts"], inputs["vectors"]))

    def embed(texts: list[str]) -> Any:
        missing = [t for t in texts if t not in rows]
        if missing:
            raise FrameError(f"{INPUT_NAME} has no embedding for {missing[0]!r}")
        return np.array([rows[t] for t in texts], dtype=np.float64)

    return embed


def choose_here(job_dir: Path) -> ThemeChoice:
    """The child's work: read the job, config and vectors; choose; store ``taste-choice.json``."""

    try:
        job = read_job(job_dir)
    except JobUnreadable:
        job = None
    inputs = read_json(job_dir / INPUT_NAME)
    if not isinstance(job, RenderJob) or not isinstance(inputs, dict):
        raise FrameError(f"no readable job.json and {INPUT_NAME} in {job_dir}")
    config = load_config(job_dir / "config.yaml", environ={})
    choice = pick(job, config, lookup_embed(inputs), job_dir, draw_here=False)
    write_json(job_dir / CHOICE_NAME, choice.to_json())
    return choice


def _hand_back_free_memory() -> None:
    """Before a child starts beside this waiting worker: the heap that loading and embedding freed goes
    back to the OS (``malloc_trim``), 81.3 -> 68.5 MiB VmRSS on x86 (demo model, 92 texts embedded)."""
    gc.collect()
    trim_free_memory()


def main(argv: list[str] | None = None) -> int:
    """Child entry point: exit 0 with ``taste-choice.json`` written, 3 for a permanent error, 1 else;
    the error's one line on stderr, the child's own peak memory and CPU time on stdout."""
    return job_dir_child_main(sys.argv[1:] if argv is None else argv, "tastechild", choose_here)


if __name__ == "__main__":
    raise SystemExit(main())
