"""The estimate counts the texts new tonight (frame.estimate.new_texts), read against the kept
embeddings without changing them; the nightly estimate counts what the choice really embedded."""

from __future__ import annotations

import re
import time

from frame.config import Config
from frame.diffusion import embedding_cache
from frame.diffusion.configured import load_configured_pipeline
from frame.diffusion.encoder_identity import text_cache_for
from frame.estimate.configured import estimate_config
from frame.estimate.new_texts import count_new, count_new_for, tonight_texts
from frame.statefile import read_json
from tests.daemon.conftest import make_config

THEMES = ("a stormy sea", "a calm meadow")
STYLES = ("oil painting", "ink drawing")


def _config(tmp_path):
    return make_config(tmp_path, model={"source": "demo", "size": "64x64", "steps": 2},
                       taste={"themes": THEMES, "styles": STYLES, "min_ratings": 4})


def _keep(pipe, state, texts):
    cache = text_cache_for(pipe, state)
    embedding_cache.CachedEmbed(cache, pipe.embed_text)(texts)
    return cache


def test_only_texts_not_kept_are_counted_and_counting_changes_nothing(tmp_path):
    config = _config(tmp_path)
    pipe = load_configured_pipeline(config)
    last_night = tonight_texts(config, ["a lighthouse"], ["a stormy sea, oil painting"], ratings=6)
    assert count_new_for(pipe, last_night, tmp_path)[0] == last_night.all_texts == 12 + 1 + 4  # nothing kept yet
    cache = _keep(pipe, tmp_path, list(last_night.axis_ends + last_night.candidates + last_night.rated))
    files = {p: p.stat().st_mtime_ns for p in cache.folder.glob("*" + embedding_cache.SUFFIX)}
    assert count_new_for(pipe, last_night, tmp_path) == (0, None)
    tonight = tonight_texts(config, ["a lighthouse", "a red fox", "snow"], [], ratings=6)
    tokens = pipe.encoders[-1].tokenizer()("a red fox").index(pipe.encoders[-1].tokenizer().eos_id) + 1
    assert count_new_for(pipe, tonight, tmp_path) == (2, tokens)  # "snow" is shorter
    assert {p: p.stat().st_mtime_ns for p in cache.folder.glob("*" + embedding_cache.SUFFIX)} == files


def test_variety_counts_the_axes_and_the_chosen_candidate(tmp_path):
    config = _config(tmp_path)
    pipe = load_configured_pipeline(config)
    texts = tonight_texts(config, [], [], ratings=1)
    assert not texts.trained and texts.all_texts == 13
    cache = _keep(pipe, tmp_path, list(texts.axis_ends))
    assert count_new(texts, cache) == 1  # the chosen candidate may be one never embedded
    _keep(pipe, tmp_path, list(texts.candidates))
    assert count_new(texts, cache) == 0


def test_the_estimate_counts_passes_for_the_new_texts_only(tmp_path):
    config = _config(tmp_path)
    pipe = load_configured_pipeline(config)
    texts = tonight_texts(config, [f"feed item {n}" for n in range(10)], [], ratings=6)
    _keep(pipe, tmp_path, list(texts.axis_ends + texts.candidates[10:]))  # every text but tonight's feed items
    result = estimate_config(config, pipe=pipe, measure_seconds=0.2, texts=texts, alternative=False)
    (choose,) = result.estimate.plan.runs_of("choose")
    assert (choose.evaluations, choose.items) == (1, 10)  # 5 positions each: one shared pass
    (text,) = result.estimate.plan.runs_of("text")
    assert choose.count.input_shapes["input_ids"] == (1, 5)  # "feed item 9": BOS, 3 tokens, EOS
    assert text.count.input_shapes["input_ids"] == (1, 77) and choose.count.macs < text.count.macs / 10


def test_the_nightly_estimate_counts_what_the_choice_embedded(tmp_path):
    """The real step-choice child reads choose_texts.json: a night whose texts were all kept has no
    choose phase in its estimate."""
    from frame.daemon.jobs.night import write_job_files
    from frame.statefile import write_json
    from frame.worker.embeddings import COUNTS_NAME
    from frame.worker.records import RenderJob
    from frame.worker.step_choice import night_steps_in_child

    config = Config(state_dir=str(tmp_path))
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    write_job_files(job_dir, config, RenderJob(render_id=1, render_kind="night", state_dir=tmp_path, seed=1,
                                               deadline=time.time() + 6 * 3600))
    write_json(job_dir / COUNTS_NAME, {"embedded": 0, "reused": 93})
    night_steps_in_child(job_dir, (256, 256), timeout=300)
    lines = read_json(tmp_path / "estimate.json")["lines"]
    assert lines and not any(re.search(r"\bchoose \d", line) for line in lines), lines  # no choose phase
