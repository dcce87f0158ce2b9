"""What a model allows a render to ask for, stated once for the pipeline and for ``frame config check``.

The pipeline refuses a render that breaks one of these rules before any model runs; ``frame config
check`` applies the same rules to the configured ``model`` section against the configured model, so a
setting the night would refuse (``size: 504x296`` on a model that renders only multiples of 16 or 64
pixels, 60 LCM steps, a VAE tile overlap as large as the tile) is reported at check time with its line,
not at 01:00. Each finding names the ``model.*`` key it is about.

The rules, by model kind:

* **sampler** — one of the six frame implements, and the model's ``scheduler_config.json`` must use a
  beta schedule, prediction type and timestep spacing the sampler supports;
* **steps** — at least 1 and at most the model's training timesteps (1000); LCM at most
  ``original_inference_steps`` (50); Turbo models are distilled for 1-4 steps (a warning above 4);
* **guidance** — 0 or more; Turbo models are distilled without guidance (a warning above 1);
* **size** — positive multiples of the model's size step (8 px × the UNet's down-sampling: 64 px for
  SD 1.5/SDXL exports, 16 px for the demo); an export with fixed spatial axes renders one size only;
* **VAE tiles** — tile at least 1 latent pixel, overlap at least 0 and smaller than the tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from frame.diffusion import sizes
from frame.diffusion.model_info import ModelInfo
from frame.errors import FrameError, UsageError

TURBO_MAX_STEPS = 4


@dataclass(frozen=True)
class Finding:
    """One broken rule: the ``model.*`` key it is about (``source`` for the model's own files)."""

    key: str
    message: str
    warning: bool = False


def _steps_findings(info: ModelInfo, sampler: str | None, steps: object) -> list[Finding]:
    from frame.diffusion.samplers import make_sampler, resolve_sampler_name

    try:
        name = resolve_sampler_name(sampler)
    except UsageError as exc:
        return [Finding("sampler", str(exc))]
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        return [Finding("steps", f"steps must be a positive integer, got {steps!r}")]
    try:
        make_sampler(name, info.scheduler_config, steps)
    except UsageError as exc:
        return [Finding("steps", str(exc))]
    except FrameError as exc:
        if str(exc).startswith(f"{name}: steps"):
            return [Finding("steps", str(exc))]
        return [Finding("source", f"{exc}; frame's {name} sampler cannot use this model's schedule")]
    if info.turbo and steps > TURBO_MAX_STEPS:
        return [Finding("steps", f"{info.label} models are distilled for 1-{TURBO_MAX_STEPS} steps; {steps} "
                                 "steps take longer and usually look worse", warning=True)]
    return []


def _guidance_findings(info: ModelInfo, guidance: float) -> list[Finding]:
    if guidance < 0:
        return [Finding("guidance", f"guidance must be ≥ 0, got {guidance:g}")]
    if info.turbo and guidance > 1:
        return [Finding("guidance", f"{info.label} models are distilled without guidance; guidance {guidance:g} "
                                    "doubles the work and usually looks worse (use 0)", warning=True)]
    return []


def generation_findings(info: ModelInfo, static_latent: tuple[int, int] | None, *, sampler: str | None,
                        steps: object, guidance: float, width: int | None, height: int | None) -> list[Finding]:
    """Every rule a render with these (resolved) settings breaks on this model; empty when it may run.
    No ``width``: the size is not checked (a queued prompt that paints at the night's size)."""
    findings = _steps_findings(info, sampler, steps) + _guidance_findings(info, guidance)
    if width is None or height is None:
        return findings
    try:
        sizes.check_size(width, height, info, static_latent)
    except UsageError as exc:
        findings.append(Finding("size", str(exc)))
    return findings


def tile_findings(vae_tile: int | None, vae_tile_overlap: int) -> list[Finding]:
    """The VAE tile rule ``load_pipeline`` enforces (each value alone is checked by the schema);
    ``vae_tile`` None: chosen per picture (``frame.diffusion.vae.tiles``), larger than the overlap."""
    if vae_tile is None:
        if vae_tile_overlap >= 0:
            return []
        return [Finding("vae_tile_overlap", f"the VAE tile overlap must be at least 0, got {vae_tile_overlap}")]
    if vae_tile >= 1 and 0 <= vae_tile_overlap < vae_tile:
        return []
    if vae_tile < 1:
        return [Finding("vae_tile", f"the VAE tile must be at least 1 latent pixel, got {vae_tile}")]
    return [Finding("vae_tile_overlap", f"the VAE tile overlap must be at least 0 and smaller than the tile "
                                        f"({vae_tile} latent pixels), got {vae_tile_overlap}")]


def raise_first_error(findings: list[Finding]) -> None:
    """The pipeline's side: the first broken rule becomes the error the owner sees (a UsageError for
    the settings, a FrameError for a model file frame cannot use)."""
    for finding in findings:
        if not finding.warning:
            raise (FrameError if finding.key == "source" else UsageError)(finding.message)
