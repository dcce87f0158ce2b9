"""Seeds as AUTOMATIC1111 has them: ``-1`` (or no seed at all) means "pick a random one".

The seed actually used is always a concrete number, printed by ``frame render``, written into the
picture's parameters and stored with the picture by the daemon, so any picture can be made again.
"""

from __future__ import annotations

import secrets

RANDOM = -1
SEED_LIMIT = 2**32  # seeds are 0 .. 2^32 - 1, the range A1111 draws from


def random_seed() -> int:
    """A fresh seed from the operating system's generator (never the same sequence twice)."""
    return secrets.randbelow(SEED_LIMIT)


def is_random(seed: int | None) -> bool:
    return seed is None or seed == RANDOM


def resolve_seed(seed: int | None) -> int:
    """The seed to render with: ``seed`` itself, or a random one for ``None`` / ``-1``; anything else
    negative (or not an integer) is a ValueError."""
    if is_random(seed):
        return random_seed()
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be -1 (random) or an integer from 0, got {seed!r}")
    return seed
