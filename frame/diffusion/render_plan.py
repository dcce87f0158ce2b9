"""``RenderPlan``: how a pipeline renders, decided by its caller and handed to it whole.

The values that are not the model's and not one picture's settings: the VAE decoder's tiles and the
function that counts their peak, how the guidance passes run (fixed, or chosen per render from the
worker's memory limit and the UNet's counted peaks), each component's read-ahead, the LoRAs of
``model.loras`` and the folders ``<lora:…>`` tags are looked up in. ``frame.diffusion.configured``
makes the plan from the configuration (``PipelineSetup.plan``) and ``Pipeline`` takes it at
construction. A value known only later (the VAE peak counter needs the loaded pipeline; the worker
reads tonight's read-ahead and counted guidance peaks from the estimate in the job folder) comes in
as a replaced plan through ``Pipeline.use_plan``: the plan is frozen and the pipeline's own fields
have no setters, so nothing changes how a pipeline renders behind its back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from frame.config.lora_tags import LoraRequest
from frame.errors import UsageError

if TYPE_CHECKING:  # numpy stays out: the configuration checks make plans without it
    from frame.diffusion.vae.tiles import PeakMb

GUIDANCE_MODES = ("shared", "batched", "sequential")  # how frame.diffusion.denoise.GuidedUNet runs the passes
CountedGuidance = tuple[int, int, tuple[float, float]]  # (width, height, (one-pass, two-pass) peaks in MB)


@dataclass(frozen=True)
class RenderPlan:
    """How renders run; every field has the default of a pipeline nobody configured."""

    vae_tile: int | None = None  # latent pixels; None: the fewest tiles that fit memory_limit_mb (vae.tiles)
    vae_tile_overlap: int = 8
    # the VAE decoder's counted peak in MB at a tile size (frame.estimate.vae.peak_counter);
    # None: tiles of vae.tiles.DEFAULT_TILE
    vae_peak_mb: PeakMb | None = None
    guidance_mode: str | None = None  # GUIDANCE_MODES; None: guidance_plan.choose per render
    # this UNet's render peaks counted by the night's estimate (frame.worker.step_choice) at one size
    counted_guidance: CountedGuidance | None = None
    memory_limit_mb: float | None = None  # the render worker's limit; None: no limit known
    readahead: Mapping[str, int] = field(default_factory=dict)  # component -> read-ahead bytes (readahead)
    loras: tuple[LoraRequest, ...] = ()  # model.loras; a prompt's <lora:…> tags add to these
    lora_folders: tuple[str, ...] | None = None  # None: the model folder's own (loras.lora_folders)

    def __post_init__(self) -> None:
        if self.guidance_mode is not None and self.guidance_mode not in GUIDANCE_MODES:
            raise UsageError(f"unknown guidance mode {self.guidance_mode!r} "
                             f"(choose from {', '.join(GUIDANCE_MODES)})")
        # frozen all the way down: a caller's dict or list cannot change the plan afterwards
        object.__setattr__(self, "readahead", MappingProxyType(dict(self.readahead)))
        object.__setattr__(self, "loras", tuple(self.loras))
        if self.lora_folders is not None:
            object.__setattr__(self, "lora_folders", tuple(self.lora_folders))

    def guidance_peaks(self, width: int, height: int) -> tuple[float, float] | None:
        """The counted (one-pass, two-pass) peaks when they were counted at this size, else None."""
        counted = self.counted_guidance
        return counted[2] if counted is not None and counted[:2] == (width, height) else None
