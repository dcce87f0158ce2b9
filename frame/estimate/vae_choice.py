"""The night with the other VAE, for ``frame estimate``'s side-by-side line: the full AutoencoderKL when
``model.vae_decoder`` names a tiny VAE, else the tiny one of the model's family (taesd, taesdxl) when it
is in the state folder (``frame model import --tiny-vae``). The tiny decoder's work and memory are
counted from its own graph like any component's (``frame.estimate.plan`` counts ``pipe.vae_source``);
only the pipeline's VAE differs between the two plans.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import TYPE_CHECKING

from frame.diffusion.configured import PipelineSetup
from frame.diffusion.model_info import SDXL
from frame.diffusion.vae.tiny import open_tiny_vae
from frame.errors import FrameError
from frame.estimate.vae_memory import peak_counter

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline

log = logging.getLogger(__name__)

FULL = "the model's own VAE"


def family_name(pipe: Pipeline) -> str:
    """The tiny VAE that decodes this model's latents."""
    return "taesdxl" if pipe.kind == SDXL else "taesd"


def other_vae(pipe: Pipeline, setup: PipelineSetup) -> tuple[str, Pipeline] | None:
    """(label, a copy of ``pipe`` decoding with the other VAE), or None when there is no other to count."""
    other = copy.copy(pipe)
    if pipe.tiny_vae is not None:
        other.tiny_vae = None
        other.vae_source = pipe.files.onnx("vae_decoder")
        label = FULL
    else:
        name = family_name(pipe)
        try:
            tiny = open_tiny_vae(name, setup.state_dir, pipe.kind == SDXL, setup.cache_dir, setup.http)
        except FrameError as exc:  # not imported (the usual case): nothing to put beside tonight's
            log.debug("no %s to count beside the full VAE: %s", name, exc)
            return None
        other.use_tiny_vae(tiny)
        label = f"the tiny VAE ({name})"
    other._vae_shapes = None
    other.use_plan(dataclasses.replace(other.plan, vae_peak_mb=peak_counter(other, setup.weights, setup.http)))
    return label, other


def vae_label(pipe: Pipeline) -> str:
    """What tonight decodes with, for the report."""
    return FULL if pipe.tiny_vae is None else f"the tiny VAE ({pipe.tiny_vae.source})"
