"""Renders with the demo model: the kept text embeddings change nothing of the picture (chosen theme,
image and panel bytes identical cold, warm, and without any cache) and a warm night embeds only what
is new. Runs the render worker's steps in-process; the trained model's choice in its real child."""

from pathlib import Path

import pytest

from frame.daemon.jobs.night import write_job_files
from frame.diffusion import embedding_cache
from frame.worker import embeddings, render
from frame.worker.embeddings import COUNTS_NAME, new_texts
from frame.worker.pipeline import PipelineHolder
from frame.worker.records import JobCandidate, RatedPicture, RenderJob
from frame.worker.render import choose, run_render
from tests.daemon.conftest import make_config

THEMES = ("a stormy sea", "a calm meadow", "a night city")
STYLES = ("oil painting", "ink drawing")


def _job(state: Path, trained: bool, feed: tuple[str, ...] = ()) -> RenderJob:
    combos = [JobCandidate(prompt=f"{t}, {s}", theme=t, style=s, weight=1.0, origin="theme")
              for t in THEMES for s in STYLES]
    items = [JobCandidate(prompt=p, theme=p, style="", weight=1.0, origin="feed:news", feed_item_id=n)
             for n, p in enumerate(feed, 1)]
    history = ()
    if trained:
        liked = [("a stormy sea", 1), ("a calm meadow", -1), ("a night city", 1), ("a stormy sea", 1),
                 ("a calm meadow", -1), ("a quiet lake", -1)]
        history = tuple(RatedPicture(id=n, prompt=f"{t}, oil painting", theme=t, style="oil painting",
                                     origin="theme", rating_kind="thumb", rating_value=v)
                        for n, (t, v) in enumerate(liked, 1))
    return RenderJob(render_id=1, render_kind="now", state_dir=state, seed=1234, candidates=tuple(items + combos),
                     history=history)


def _render(tmp_path: Path, name: str, state: Path, trained: bool, feed: tuple[str, ...] = ()):
    config = make_config(state, model={"source": "demo", "size": "64x64", "steps": 2},
                         display={"panel": "virtual", "size": "80x48"},
                         taste={"min_ratings": 4 if trained else 100, "explore_rate": 0.0, "themes": THEMES,
                                "styles": STYLES})
    job_dir = tmp_path / name
    job_dir.mkdir()
    job = _job(state, trained, feed)
    write_job_files(job_dir, config, job)  # the trained model's child reads job.json and config.yaml
    out = run_render(job, config, job_dir, lambda event: None)
    return out.meta.theme, out.meta.prompt, out.image.read_bytes(), out.panel.read_bytes(), job_dir


@pytest.mark.parametrize("trained", [False, True], ids=["variety", "taste-model"])
def test_cold_warm_and_uncached_renders_are_bit_identical(tmp_path, monkeypatch, trained):
    state = tmp_path / "state"
    state.mkdir()
    cold = _render(tmp_path, "cold", state, trained)
    kept = list(embedding_cache.cache_folder(state).glob("*" + embedding_cache.SUFFIX))
    assert kept, "the cold night keeps its embeddings"
    warm = _render(tmp_path, "warm", state, trained)
    assert warm[:4] == cold[:4]
    assert new_texts(warm[4]) == 0 and new_texts(cold[4]) == len(kept)

    if trained:
        return  # the child's path is the worker's embedding as well: checked once, below, without a child
    monkeypatch.setattr(render, "NightEmbed", _uncached)  # the encoder alone, as before the cache
    bare = _render(tmp_path, "bare", state, trained)
    assert bare[:4] == cold[:4]
    assert new_texts(bare[4]) == new_texts(cold[4])  # all embedded again: the kept ones were not used


class _uncached(embeddings.NightEmbed):
    def __init__(self, pipe, state_dir):
        super().__init__(pipe, None)


def _choose(tmp_path: Path, name: str, state: Path, feed: tuple[str, ...]) -> Path:
    """The choose step alone (the trained model, in its child) for a job with ``feed`` items."""
    config = make_config(state, model={"source": "demo"},
                         taste={"min_ratings": 4, "explore_rate": 0.0, "themes": THEMES, "styles": STYLES})
    job_dir = tmp_path / name
    job_dir.mkdir()
    job = _job(state, True, feed)
    write_job_files(job_dir, config, job)
    choose(job, config, job_dir, lambda event: None, PipelineHolder(config))
    return job_dir


def test_a_warm_night_embeds_only_tonights_feed_items(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    first = embeddings.read_json(_choose(tmp_path, "first", state, ("a lighthouse at dusk",)) / COUNTS_NAME)
    job_dir = _choose(tmp_path, "second", state, ("a lighthouse at dusk", "a red fox", "snow on a mountain pass"))
    counts = embeddings.read_json(job_dir / COUNTS_NAME)
    assert (counts["embedded"], counts["reused"]) == (2, first["embedded"])
    assert embeddings.new_text_tokens(job_dir) == 7  # "snow on a mountain pass": BOS, 5 words, EOS


def test_counts_unknown_when_the_file_is_missing_or_damaged(tmp_path):
    assert new_texts(tmp_path) is None
    (tmp_path / COUNTS_NAME).write_text("{not json")
    assert new_texts(tmp_path) is None
