"""The denoising loop: guided UNet calls, sampler steps, checkpoints and progress reports.

:class:`GuidedUNet` turns (latent, timestep) into the guided model output: it builds the UNet feeds
from the export's declared inputs (timestep dtype and rank differ between exporters; SDXL adds
``text_embeds`` and ``time_ids``), runs the conditional and, when guidance is on, the unconditional
pass, and mixes them as ``uncond + g * (cond - uncond)``. How the two passes run (``GUIDANCE_MODES``):

* "shared": one pass over the graph, each op running both passes while its weights are held
  (``Model.run_shared``): weights are read once per step, two sets of activations are alive;
* "batched": one batch of two through the UNet (needs an export whose batch axis allows it; a fixed
  batch of 2 forces it): weights read once, activations and each kernel's temporaries double;
* "sequential": one pass after the other: the least memory, every weight read twice per step.

A model object without ``run_shared`` (a stand-in, another engine) falls back from "shared" to
"sequential". ``frame.diffusion.guidance_plan`` chooses the mode for a night.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from frame.diffusion.conditioning import Conditioning
from frame.diffusion.render_plan import GUIDANCE_MODES
from frame.diffusion.samplers import Sampler, SamplerState
from frame.errors import FrameError

if TYPE_CHECKING:
    from frame.engine.runnable import Runnable

log = logging.getLogger(__name__)

StepCallback = Callable[[int, np.ndarray, np.ndarray], None]
OpCallback = Callable[[int, float], None]


class GuidedUNet:
    """Callable ``(latent_input, timestep, progress) -> guided output`` around a loaded UNet."""

    def __init__(self, model: Runnable, cond: Conditioning, uncond: Conditioning | None, guidance: float,
                 size: tuple[int, int], mode: str = "shared",
                 aesthetic_scores: tuple[float, float] | None = None) -> None:
        if mode not in GUIDANCE_MODES:
            raise FrameError(f"unknown guidance mode {mode!r} (choose from {', '.join(GUIDANCE_MODES)})")
        self.model = model
        self.specs = {i.name: i for i in model.inputs}
        for name in ("sample", "timestep", "encoder_hidden_states"):
            if name not in self.specs:
                raise FrameError(f"unet: the ONNX model has no {name!r} input (inputs: {', '.join(self.specs)})")
        self.guidance = guidance
        self.passes = [cond] if uncond is None else [uncond, cond]
        batch_dim = (self.specs["sample"].shape or [None])[0]
        can_batch = not isinstance(batch_dim, int) or batch_dim == len(self.passes)
        self.batch = len(self.passes) > 1 and can_batch and (mode == "batched" or batch_dim == len(self.passes))
        if len(self.passes) > 1 and not self.batch and batch_dim not in (1, None) and isinstance(batch_dim, int):
            raise FrameError(f"unet: fixed batch size {batch_dim} fits neither one nor two passes")
        self.shared = len(self.passes) > 1 and not self.batch and mode == "shared" and model.shares_weight_reads
        self.mode = "batched" if self.batch else "shared" if self.shared else "sequential"
        self.extra = self._sdxl_inputs(size, aesthetic_scores) if "text_embeds" in self.specs else {}
        if "timestep_cond" in self.specs:
            self.extra["timestep_cond"] = [self._guidance_embedding() for _ in self.passes]

    def _sdxl_inputs(self, size: tuple[int, int], aesthetic_scores: tuple[float, float] | None
                     ) -> dict[str, list[np.ndarray]]:
        """SDXL micro-conditioning: pooled embeddings and time_ids from the real generation size.

        time_ids = (original height, width, crop top, left, target height, width), as diffusers'
        ``_get_add_time_ids`` with original = target = the generated size and no crop (text-to-image and
        image-to-image alike). Refiner-type exports (``requires_aesthetics_score``) take (original height,
        width, crop top, left, aesthetic score) instead, with ``aesthetic_scores`` = (negative, positive),
        diffusers' 2.5 and 6.0, as StableDiffusionXLImg2ImgPipeline does.
        """
        if "time_ids" not in self.specs:
            raise FrameError("unet: has 'text_embeds' but no 'time_ids' input")
        if any(p.pooled is None for p in self.passes):
            raise FrameError("unet: expects SDXL conditioning (text_embeds) but the model has one text encoder")
        width, height = size
        if aesthetic_scores is None:
            rows = [[height, width, 0, 0, height, width]] * len(self.passes)
        else:
            negative, positive = aesthetic_scores
            rows = [[height, width, 0, 0, score] for score in ([negative, positive][-len(self.passes):])]
        spec = self.specs["time_ids"]
        declared = spec.shape[-1] if spec.shape and isinstance(spec.shape[-1], int) else None
        if declared is not None and declared != len(rows[0]):
            raise FrameError(f"unet: takes {declared} time_ids but the model's config gives {len(rows[0])} "
                             f"(requires_aesthetics_score in model_index.json is "
                             f"{'true' if aesthetic_scores else 'false or missing'})")
        return {
            "text_embeds": [p.pooled.astype(self.specs["text_embeds"].dtype) for p in self.passes],
            "time_ids": [np.array([row], dtype=spec.dtype) for row in rows],
        }

    def _guidance_embedding(self) -> np.ndarray:
        """LCM-distilled UNets take the guidance scale as an input (``timestep_cond``) instead of a second
        pass: sinusoidal features of ``(g - 1) * 1000`` (diffusers ``get_guidance_scale_embedding``)."""
        spec = self.specs["timestep_cond"]
        dim = spec.shape[-1] if spec.shape and isinstance(spec.shape[-1], int) else None
        if dim is None:
            raise FrameError("unet: 'timestep_cond' needs a fixed last dimension (time_cond_proj_dim)")
        half = dim // 2
        frequencies = np.exp(np.arange(half, dtype=np.float32) * -np.float32(np.log(10000.0) / (half - 1)))
        angles = np.float32((self.guidance - 1.0) * 1000.0) * frequencies
        embedding = np.concatenate([np.sin(angles), np.cos(angles)])
        if dim % 2:
            embedding = np.concatenate([embedding, np.zeros(1, np.float32)])
        return embedding[None, :].astype(spec.dtype)

    def _timestep(self, t: float, batch: int) -> np.ndarray:
        spec = self.specs["timestep"]
        value = np.asarray(t).astype(spec.dtype)  # int64 exports truncate like optimum's ORT pipeline
        if spec.shape is not None and len(spec.shape) == 0:
            return value
        # a symbolic length gets one value, the convention of optimum's ORT pipelines (graphs broadcast it)
        length = spec.shape[0] if spec.shape and isinstance(spec.shape[0], int) else 1
        return np.full((length,), value, dtype=spec.dtype)

    def _feeds(self, latent: np.ndarray, t: float, which: list[int]) -> dict[str, np.ndarray]:
        feeds = {
            "sample": np.concatenate([latent] * len(which)).astype(self.specs["sample"].dtype),
            "timestep": self._timestep(t, len(which)),
            "encoder_hidden_states": np.concatenate([self.passes[i].hidden for i in which]).astype(
                self.specs["encoder_hidden_states"].dtype),
        }
        for name, values in self.extra.items():
            feeds[name] = np.concatenate([values[i] for i in which])
        return feeds

    def __call__(self, latent: np.ndarray, t: float, progress: Callable[[float], None] | None = None
                 ) -> np.ndarray:
        if self.shared:
            results = self.model.run_shared([self._feeds(latent, t, [i]) for i in range(len(self.passes))],
                                            progress=progress)
            return self._mix([self._out_sample(r) for r in results])
        groups = [list(range(len(self.passes)))] if self.batch else [[i] for i in range(len(self.passes))]
        outputs = []
        for number, which in enumerate(groups):
            def report(fraction: float, number: int = number) -> None:
                if progress is not None:
                    progress((number + fraction) / len(groups))
            outputs.append(self._out_sample(self.model.run(self._feeds(latent, t, which), progress=report)))
        return self._mix(outputs)

    @staticmethod
    def _out_sample(result: dict[str, np.ndarray]) -> np.ndarray:
        if "out_sample" not in result:
            raise FrameError(f"unet: the ONNX model has no 'out_sample' output (outputs: {', '.join(result)})")
        return result["out_sample"].astype(np.float32)

    def _mix(self, outputs: list[np.ndarray]) -> np.ndarray:
        out = np.concatenate(outputs)
        if len(self.passes) == 1:
            return out
        uncond, cond = out[0:1], out[1:2]
        return (uncond + np.float32(self.guidance) * (cond - uncond)).astype(np.float32)


def static_latent_size(model: Runnable) -> tuple[int, int] | None:
    """The UNet's fixed latent (height, width), or None when the spatial axes are dynamic."""
    spec = next((i for i in model.inputs if i.name == "sample"), None)
    shape = spec.shape if spec is not None else None
    if shape and len(shape) == 4 and isinstance(shape[2], int) and isinstance(shape[3], int):
        return shape[2], shape[3]
    return None


def run_loop(sampler: Sampler, unet: Callable[..., np.ndarray], latents: np.ndarray, state: SamplerState,
             start: int, on_step: StepCallback, on_op: OpCallback | None = None) -> np.ndarray:
    """Steps ``start`` … ``sampler.steps - 1``; ``on_step(finished_steps, latents, denoised)`` after each."""
    for index in range(start, sampler.steps):
        model_input = sampler.scale_input(latents, index)

        def report(fraction: float, index: int = index) -> None:
            if on_op is not None:
                on_op(index, fraction)

        output = unet(model_input, sampler.timesteps[index], report)
        result = sampler.step(index, output, latents, state)
        latents = result.sample
        on_step(index + 1, latents, result.denoised)
    return latents
