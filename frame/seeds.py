"""Seeds as AUTOMATIC1111 has them: ``-1`` (or no seed at all) means "pick a random one".

The seed actually used is always a concrete number, printed by ``frame render``, written into the
picture's parameters and stored with the picture by the daemon, so any picture can be made again.
"Random" is decided once, by ``resolve_seed``, where a render is asked for: the night's job
(``frame.daemon.jobs.night``, stored in ``job.json``), ``frame render`` (through
``frame.diffusion.resume.resumable_seed`` with ``--resume``) and the render server's request. The
pipeline only takes a concrete seed (``check_seed``).
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


def check_seed(seed: int) -> int:
    """``seed`` when it is a concrete seed (an integer from 0); a ValueError otherwise, also for
    "random" (-1, None), which ``resolve_seed`` turns into a number before the render starts."""
    if is_random(seed):
        raise ValueError("seed -1 (random) must be resolved into a number before rendering (frame.seeds.resolve_seed)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be -1 (random) or an integer from 0, got {seed!r}")
    return seed
