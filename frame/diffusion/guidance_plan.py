"""How tonight's classifier-free guidance passes run: a small pure rule over explicit inputs.

With guidance every denoising step evaluates the UNet twice (unconditional and conditional). Run one
after the other ("sequential") the weights are read twice per step: on a Pi streaming an fp32 SD 1.5
UNet over Wi-Fi that is 6.9 GB per step instead of 3.4 GB. "shared" (each op runs both passes while its
weights are held, ``Model.run_shared``) reads them once at the cost of a second set of live
activations; "batched" (one batch of two) also reads them once but doubles every kernel's temporaries
too. Measured on the full-size SD 1.5 UNet, fp32, 512x512 (docs/benchmarks-diffusion.md, "Guidance
passes"; medians of 3 processes, CPU seconds because wall time on the shared machine was noise):

=========== ================ ================== ============= ===================
mode         bytes per step   UNet-only peak     render peak   CPU per UNet step
=========== ================ ================== ============= ===================
sequential   6.87 GB (2x)     246 MB             300 MB        48.9 s
shared       3.44 GB (1x)     290 MB             314 MB        47.7 s
batched      3.44 GB (1x)     316 MB             (337 MB [1])  43.0 s
=========== ================ ================== ============= ===================

([1] measured in November, before the engine changes since.) With uint8 weights (0.86 GB per step
shared, 1.72 GB sequential) the render peaks at 292 MB sequential and 320 MB shared.

"shared" is the weights-once mode to use: it reads what "batched" reads for 26 MB less, at the CPU
cost of "sequential" (the batch's 10 % CPU gain is not worth its extra memory on a 512 MB Pi;
``guidance_mode="batched"`` remains available). The rule:

* no guidance (one pass): nothing to choose, "sequential";
* otherwise "shared" when the estimated peak of the whole render in that mode plus
  ``WORKER_EXTRA_MB`` (what the render worker holds besides the pipeline: the taste model with
  scikit-learn and scipy, 79 MiB in docs/benchmarks-pi.md's footprint table) fits ``memory_limit_mb`` (the worker's
  limit, ``worker.memory_limit_mb``; None = no limit known); "sequential" when it does not, or when
  there is no measured figure for the model (SDXL: not measured yet, so it keeps the smallest peak).

The peaks come from the model's own count when there is one (``counted``: the render peak with one
and with two passes' activations alive, from ``frame.estimate``'s count of this UNet at tonight's size;
the night's estimate makes it and the render worker passes it on). Without a count,
``estimate_render_peak_mb`` holds the measured figures: the one-pass render peak of the full-size SD 1.5
at the native size (``benchmarks/sd_memory.py``) plus, per extra pass, one pass's activations measured
on the UNet alone (43 MB, more than the 14 MB the whole render grew: the estimate errs high), scaled by
latent area. Those are the full-size model's: a small SD 1.5-shaped model (the demo) was told "about
390 MB of the worker's 440 MB" while its worker peaked at 107-155 MB, hence the count first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

WORKER_EXTRA_MB = 80.0  # taste model: scikit-learn + scipy resident in the worker (docs/benchmarks-pi.md)

# kind -> (native latent pixels, {precision: render peak in MB with one pass alive}, one pass's activations
# in MB at the native size). SD 1.5: benchmarks/sd_memory.py "render" peaks on 2026-12-01 (fp32 299.7 MB,
# uint8 292.3 MB; fp16 not measured, taken as fp32's); activations = shared - sequential peak of the UNet
# alone (289.6 - 246.4 MB, benchmarks/guidance_passes.py). Measured "render-shared" peaks: fp32 314.0 MB,
# uint8 320.0 MB, both below the estimates (342.9 and 335.5 MB).
MEASURED = {
    "sd15": (64 * 64, {"fp32": 299.7, "fp16": 299.7, "uint8": 292.3}, 43.2),
}


@dataclass(frozen=True)
class GuidancePlan:
    mode: str                       # "shared" or "sequential" (see frame.diffusion.denoise.GUIDANCE_MODES)
    estimated_peak_mb: float | None  # the render's estimated peak in that mode (None: no figures)
    reason: str                     # one sentence for the log and the phone page


def estimate_render_peak_mb(kind: str, width: int, height: int, precision: str, passes_alive: int,
                            vae_factor: int = 8) -> float | None:
    """Estimated peak RSS of a whole render with ``passes_alive`` sets of UNet activations, or None."""
    if kind not in MEASURED:
        return None
    native_area, peaks, activations_mb = MEASURED[kind]
    base = peaks.get(precision, peaks["fp32"])
    scale = (width // vae_factor) * (height // vae_factor) / native_area
    return round(base + activations_mb * (scale * passes_alive - 1), 1)


def choose(kind: str, width: int, height: int, precision: str, memory_limit_mb: float | None,
           guided: bool = True, counted: tuple[float, float] | None = None) -> GuidancePlan:
    """"shared" (weights read once per step) when it fits the worker's memory limit, else "sequential".
    ``counted``: (one-pass, two-pass) render peaks in MB counted from this model (see the module
    docstring), used instead of the measured full-size figures."""
    def peak(passes: int) -> float | None:
        if counted is not None:
            return round(counted[passes - 1], 1)
        return estimate_render_peak_mb(kind, width, height, precision, passes)

    if not guided:
        return GuidancePlan("sequential", peak(1), "one UNet pass per step (no guidance)")
    shared = peak(2)
    if memory_limit_mb is None:
        return GuidancePlan("shared", shared, "weights read once per step (no memory limit given)")
    if shared is None:
        return GuidancePlan("sequential", None, f"no measured memory figures for {kind}: the two passes run "
                            "one after the other, reading the weights twice per step")
    needed = shared + WORKER_EXTRA_MB
    source = "counted for this model" if counted is not None else f"measured on the full-size {kind} model"
    if needed <= memory_limit_mb:
        return GuidancePlan("shared", shared, f"weights read once per step: about {needed:.0f} MB of the worker's "
                            f"{memory_limit_mb:.0f} MB ({source})")
    return GuidancePlan("sequential", peak(1),
                        f"reading the weights once per step would need about {needed:.0f} MB, over the worker's "
                        f"{memory_limit_mb:.0f} MB: the two passes run one after the other")


def precision_of(refs: Iterable) -> str:
    """"uint8", "fp16" or "fp32": the dtype most streamed weight bytes are stored in (any 8-bit → uint8)."""
    by_kind = {"uint8": 0, "fp16": 0, "fp32": 0}
    for ref in refs:
        dtype = np.dtype(ref.dtype)
        kind = "uint8" if dtype.itemsize == 1 else "fp16" if dtype == np.float16 else "fp32"
        by_kind[kind] += int(ref.nbytes)
    if by_kind["uint8"]:
        return "uint8"
    return "fp16" if by_kind["fp16"] > by_kind["fp32"] else "fp32"
