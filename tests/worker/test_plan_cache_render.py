"""A night whose models load from the plans kept by the night before (frame.engine.plan_cache) paints
the same bytes, without parsing or rewriting any graph. Runs the render worker's steps in-process."""

from pathlib import Path

from frame.diffusion import configured
from frame.engine import model as engine_model
from frame.engine import plan_cache
from frame.worker.records import JobCandidate, RenderJob
from frame.worker.render import run_render
from tests.daemon.conftest import make_config


def _render(tmp_path: Path, name: str, state: Path):
    config = make_config(state, model={"source": "demo", "size": "64x64", "steps": 2},
                         display={"panel": "virtual", "size": "80x48"},
                         taste={"min_ratings": 100, "explore_rate": 0.0, "themes": ("a stormy sea",),
                                "styles": ("oil painting",)})
    job_dir = tmp_path / name
    job_dir.mkdir()
    job = RenderJob(render_id=1, render_kind="now", state_dir=state, seed=1234, candidates=(
        JobCandidate(prompt="a stormy sea, oil painting", theme="a stormy sea", style="oil painting", weight=1.0,
                     origin="theme"),))
    out = run_render(job, config, job_dir, lambda event: None)
    return out.meta.prompt, out.image.read_bytes(), out.panel.read_bytes()


def test_a_night_from_kept_plans_paints_the_same_bytes_without_planning(tmp_path, monkeypatch):
    state = tmp_path / "state"
    state.mkdir()
    first = _render(tmp_path, "first", state)
    kept = list((state / configured.PLANS_FOLDER).glob("*" + plan_cache.SUFFIX))
    assert len(kept) >= 3, kept  # text encoder, UNet, VAE decoder

    def refuse(*args, **kwargs):
        raise AssertionError("a night with kept plans parsed or planned a graph")

    monkeypatch.setattr(engine_model, "read_structure", refuse)
    monkeypatch.setattr(engine_model, "plan_structure", refuse)
    assert _render(tmp_path, "second", state) == first
