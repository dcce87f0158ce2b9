"""What one tensor read from a file frame did not write may cost: sized to the Pi worker's memory.

The render worker runs under ``worker.memory_limit_mb`` (``frame.memory_budget``'s 440 MiB by
default, polled by the daemon); a tensor read at once must leave room for the process around it,
so one read is capped at 60 % of that (an SDXL token table in float32, the largest tensor of a
Stable Diffusion checkpoint, is 253 MB). The readers (``safetensors``, ``torch_pickle``) check it
from the header, before allocating.
"""

from __future__ import annotations

from frame.memory_budget import WORKER_MEMORY_LIMIT_MB

WORKER_BYTES = WORKER_MEMORY_LIMIT_MB << 20
MAX_TENSOR_BYTES = WORKER_BYTES * 3 // 5
