"""frame.diffusion: Stable Diffusion (SD 1.5, SDXL, Turbo) text-to-image and image-to-image on frame's
streaming engine.

``from frame.diffusion import load_pipeline`` is the entry point (``frame.diffusion.configured`` for
a pipeline as ``config.yaml`` describes it)::

    pipe = load_pipeline("/models/sd15-onnx")           # folder or http(s) base URL
    tiled = load_pipeline("/models/sd15-onnx", plan=RenderPlan(vae_tile=48))  # how it renders
    image = pipe.generate(pipe.settings("a lighthouse in a storm", seed=7), callback=print)
    dawn = pipe.settings("a lighthouse at dawn", seed=7, strength=0.6)
    again = pipe.generate(dawn, init_image=image)       # image-to-image

Heavy modules are imported on first use so ``import frame.diffusion`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline, load_pipeline
    from frame.diffusion.pngmeta import save_png
    from frame.diffusion.render_plan import RenderPlan

__all__ = ["Pipeline", "RenderPlan", "load_pipeline", "save_png"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Pipeline": "frame.diffusion.pipeline",
    "load_pipeline": "frame.diffusion.pipeline",
    "save_png": "frame.diffusion.pngmeta",
    "RenderPlan": "frame.diffusion.render_plan",
})
