"""The estimate counts the VAE tiles the render decodes: both ask ``frame.diffusion.vae.tiles.layout_for``
with the pipeline's counted peak function (``frame.estimate.vae.peak_counter``) and its limit."""

from __future__ import annotations

import numpy as np
import pytest

from frame.diffusion import RenderPlan, load_pipeline
from frame.diffusion.guidance_plan import WORKER_EXTRA_MB
from frame.diffusion.vae.tiles import MARGIN
from frame.engine import load_model
from frame.estimate.plan import build_plan
from frame.estimate.vae import peak_counter
from frame.models import demo_model_path


class CountingLoader:
    """The engine's loader, counting the VAE decoder's runs and the tile shapes it was given."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, source, **kwargs):
        model = load_model(source, **kwargs)
        if "vae_decoder" not in str(source):
            return model
        run, shapes = model.run, self.shapes

        def counted(feeds, *args, **kw):
            shapes.append(tuple(feeds["latent_sample"].shape))
            return run(feeds, *args, **kw)

        model.run = counted
        return model


@pytest.mark.parametrize("room", [2000.0, None])
def test_the_estimate_counts_the_tiles_the_render_decodes(room):
    loader = CountingLoader()
    pipe = load_pipeline(demo_model_path(), loader=loader)
    peak_mb = peak_counter(pipe)
    whole = peak_mb((40, 40))
    # no room for the whole 40x40 latent (320x320 pixels), room for a smaller tile
    limit = room or (whole + WORKER_EXTRA_MB) / (1 - MARGIN) - 1.0
    pipe.use_plan(RenderPlan(vae_peak_mb=peak_mb, memory_limit_mb=limit))
    plan = build_plan(pipe, 320, 320, 2, 0, "euler")
    vae_run = plan.runs_of("vae")[0]
    latents = np.random.default_rng(1).standard_normal((1, 4, 40, 40)).astype(np.float32)
    pipe.decode(latents)
    assert plan.tiles == len(loader.shapes)
    assert {s[2:] for s in loader.shapes} == {tuple(vae_run.count.input_shapes["latent_sample"][2:])}
    if room is None:
        assert plan.tiles > 1 and "VAE decode:" in " ".join(plan.notes)
    else:
        assert plan.tiles == 1


def test_the_owners_tile_is_counted():
    pipe = load_pipeline(demo_model_path(), plan=RenderPlan(vae_tile=16, vae_tile_overlap=4, memory_limit_mb=2000))
    plan = build_plan(pipe, 320, 320, 2, 0, "euler", vae_tile=16, vae_tile_overlap=4)
    assert plan.tiles == 9  # 40 = 16 + 12 + 12: three per axis, whatever the memory
