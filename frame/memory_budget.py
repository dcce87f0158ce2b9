"""The render worker's memory limit by default, in the base layer so both sides read one number.

The schema's ``worker.memory_limit_mb`` defaults to it (``frame.config.schema``), and the engine's
readers cap one tensor read from a foreign file by it (``frame.engine.io.file_limits``): the engine
never sees the configuration, so the number lives below both.
"""

from __future__ import annotations

WORKER_MEMORY_LIMIT_MB = 440
