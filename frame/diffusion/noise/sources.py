"""Where a render's random numbers come from (``model.noise``): one seeded stream per render.

* ``frame``: numpy's PCG64 (``samplers.base.NoiseSource``), what frame has always drawn, so a seed
  stored with an older picture paints the same picture again;
* ``torch-cpu``: torch's CPU generator (``torch_cpu.TorchCpuNoise``), bit for bit: ComfyUI's noise,
  diffusers' with ``generator=torch.Generator().manual_seed(seed)``, A1111's "RNG: CPU";
* ``a1111-nv``: A1111's "NV" source (``philox.PhiloxNoise``): torch's CUDA generator as A1111
  computes it on the CPU, which is also what A1111 draws on an NVidia card with its default "GPU".

The first draw is the initial latent (or the noise added to an image-to-image picture's latent), the
draws after it an ancestral sampler's step noise, as diffusers, A1111 and ComfyUI's CPU path draw
them. ``A1111_RNG`` names the two foreign sources as A1111's infotext does (``RNG: CPU``, ``RNG: NV``),
so the picture's parameters say which one painted it and paste back into A1111; frame's own source
writes no ``RNG`` field, so a picture's text reads as it did before the choice existed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from frame.config.schema import NoiseName
from frame.diffusion.noise.philox import PhiloxNoise
from frame.diffusion.noise.torch_cpu import TorchCpuNoise
from frame.diffusion.samplers.base import NoiseSource, SeededNoise
from frame.errors import UsageError

DEFAULT_NOISE = "frame"
NOISE_SOURCES: dict[str, Callable[[int], SeededNoise]] = {"frame": NoiseSource, "torch-cpu": TorchCpuNoise,
                                                           "a1111-nv": PhiloxNoise}
A1111_RNG = {"torch-cpu": "CPU", "a1111-nv": "NV"}  # frame's own has no A1111 name: no RNG field

if set(NOISE_SOURCES) != set(get_args(NoiseName)):
    raise ValueError(f"noise sources {sorted(NOISE_SOURCES)} differ from frame.config.schema.NoiseName")


def check_noise(name: str | None) -> str:
    """``name`` itself (``None``: the default), or a UsageError listing the sources."""
    if name is None:
        return DEFAULT_NOISE
    if name not in NOISE_SOURCES:
        raise UsageError(f"unknown noise source {name!r} (choose from {', '.join(NOISE_SOURCES)})")
    return name


def make_noise(name: str, seed: int) -> SeededNoise:
    """The seeded stream ``name`` names (``normal(shape)``, ``get_state()``, ``set_state(state)``)."""
    return NOISE_SOURCES[check_noise(name)](seed)


def from_a1111(rng: str | None) -> str | None:
    """The source an A1111 ``RNG`` value names (``CPU``, ``NV``); None for anything else, e.g. its
    default ``GPU`` (absent from A1111's text: on an NVidia card that is ``a1111-nv``'s stream)."""
    for name, label in A1111_RNG.items():
        if rng is not None and rng.strip().lower() == label.lower():
            return name
    return None
