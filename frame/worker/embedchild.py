"""The taste model's texts embedded in a short child of the render worker: ``python -m
frame.worker.embedchild JOB_DIR``, before the taste child (``tastechild.py``) runs.

Why a child: the taste child (scikit-learn and scipy) runs while the render worker waits beside it.
When the worker embedded the texts itself, it waited holding the pipeline it had loaded for that
(the text encoder, the diffusion and engine code it ran): in the Pi twin (tools/pi_twin.py) that
worker was 138 MiB, the taste child 239 MiB and the daemon 108 MiB under emulation, and the taste child
was OOM-killed; a worker that had loaded nothing (one resumed after the kill) was 80 MiB and the
child fitted. So this child loads the pipeline, embeds every text the picker asks for (through the
state folder's embedding cache, as the worker did), writes ``taste-input.json`` and the night's text
counts (``choose_texts.json``), and exits; the worker loads the pipeline only to generate, after the
taste child is gone.

The worker runs it with ``tastechild.embed_in_child``. Exit 0 with the files written and
``{"peak_rss_mb", "cpu_s"}`` on stdout, 3 for a permanent error
(the job or config cannot be used), 1 otherwise; the error's one line on stderr.
"""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path

from frame.config import load_config
from frame.diffusion.configured import load_configured_pipeline
from frame.errors import FrameError
from frame.worker.embeddings import NightEmbed
from frame.worker.process import job_dir_child_main
from frame.worker.records import JobUnreadable, RenderJob, read_job
from frame.worker.tastechild import write_input

log = logging.getLogger(__name__)


def embed_here(job_dir: Path) -> None:
    """The child's work: ``taste-input.json`` and ``choose_texts.json`` for the job in ``job_dir``."""
    try:
        job = read_job(job_dir)
    except JobUnreadable:
        job = None
    if not isinstance(job, RenderJob):
        raise FrameError(f"no readable job.json in {job_dir}")
    config = load_config(job_dir / "config.yaml", environ={})
    embed = NightEmbed(functools.cache(lambda: load_configured_pipeline(config)), job.state_dir)
    write_input(job, config, embed, job_dir)
    embed.save_counts(job_dir)


def main(argv: list[str] | None = None) -> int:
    return job_dir_child_main(sys.argv[1:] if argv is None else argv, "embedchild", embed_here)


if __name__ == "__main__":
    raise SystemExit(main())
