"""A1111's "NV" random source in numpy: Philox 4x32-10 and a Box–Muller transform, the numbers
``torch.randn(..., device="cuda")`` gives on an NVidia card, which A1111 computes on the CPU when its
setting "Random number generator source" is "NV" (``modules/rng_philox.py``).

Each draw of ``n`` values runs Philox on ``n`` counters ``(offset, 0, i, 0)`` with the key
``(seed low 32 bits, seed high 32 bits)``; the draw's first two output words make one normal value
(the sine half of Box–Muller, in float64 as A1111's numpy computes it, then float32), and the offset
counts the draws, so an ancestral sampler's step noise continues the seed's stream. Written here from
the algorithm (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3") and A1111's choices
of counter, key and transform; the module-level check values are A1111's own documented output.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from frame.diffusion.samplers.base import NoiseState

_MULTIPLIERS = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_WEYL = (np.uint32(0x9E3779B9), np.uint32(0xBB67AE85))
_ROUNDS = 10
_LOW = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)
# A1111's constants: 2^-32 and 2^-32 * 2pi rounded to float32, used in float64 arithmetic
_INV32 = float(np.float32(2.3283064e-10))
_INV32_2PI = float(np.float32(2.3283064e-10 * 6.2831855))


def philox4x32(counter: np.ndarray, key: np.ndarray, rounds: int = _ROUNDS) -> np.ndarray:
    """Philox 4x32 on a (4, n) uint32 counter block with a (2, n) uint32 key; the (4, n) output."""
    c0, c1, c2, c3 = (counter[i].astype(np.uint32) for i in range(4))
    k0, k1 = key[0].astype(np.uint32), key[1].astype(np.uint32)
    for round_index in range(rounds):
        if round_index:
            k0, k1 = k0 + _WEYL[0], k1 + _WEYL[1]  # uint32 arithmetic wraps, as the key schedule asks
        p0 = c0.astype(np.uint64) * _MULTIPLIERS[0]
        p1 = c2.astype(np.uint64) * _MULTIPLIERS[1]
        hi0, lo0 = (p0 >> _SHIFT).astype(np.uint32), (p0 & _LOW).astype(np.uint32)
        hi1, lo1 = (p1 >> _SHIFT).astype(np.uint32), (p1 & _LOW).astype(np.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return np.stack([c0, c1, c2, c3])


def box_muller_sine(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """One normal per pair of uint32 words: ``sqrt(-2 log u) * sin(v)`` with A1111's half-step offsets."""
    u = x.astype(np.float64) * _INV32 + float(np.float32(_INV32) / np.float32(2))
    v = y.astype(np.float64) * _INV32_2PI + float(np.float32(_INV32_2PI) / np.float32(2))
    return (np.sqrt(-2.0 * np.log(u)) * np.sin(v)).astype(np.float32)


class PhiloxNoise:
    """Seeded standard-normal float32 noise as A1111's NV source: draw ``k`` of the render uses offset ``k``."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self.offset = 0

    def normal(self, shape: tuple[int, ...]) -> np.ndarray:
        count = math.prod(shape)
        if count >= 2**32:
            raise ValueError(f"the NV source draws at most 2^32 values at once, not {count}")
        counter = np.zeros((4, count), dtype=np.uint32)
        counter[0] = self.offset & 0xFFFFFFFF
        counter[2] = np.arange(count, dtype=np.uint32)
        key = np.empty((2, count), dtype=np.uint32)
        key[0], key[1] = self.seed & 0xFFFFFFFF, (self.seed >> 32) & 0xFFFFFFFF
        self.offset += 1
        words = philox4x32(counter, key)
        return box_muller_sine(words[0], words[1]).reshape(shape)

    def get_state(self) -> NoiseState:
        return {"source": "a1111-nv", "seed": self.seed, "offset": self.offset}

    def set_state(self, state: NoiseState) -> None:
        self.seed, self.offset = int(state["seed"]), int(state["offset"])
