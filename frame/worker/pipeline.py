"""The render worker's diffusion pipeline, loaded once on first use (``render`` and the step-choice
child, ``step_choice``, share it)."""

from __future__ import annotations

from typing import Any

from frame.config.schema import Config
from frame.worker.errors import StepFailed, StepUnavailable
from frame.worker.events import StageEvent
from frame.worker.process import Emit


class PipelineHolder:
    """Loads the diffusion pipeline once, on first use (choosing needs its text encoder, generating
    the whole model; a resumed job past both never loads it)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._pipe: Any = None

    def get(self, emit: Emit) -> Any:
        if self._pipe is None:
            try:
                from frame.diffusion.configured import load_configured_pipeline
            except ImportError as exc:
                raise StepUnavailable("generate", f"the diffusion pipeline is not available: {exc}") from exc
            emit(StageEvent("loading model"))
            try:
                self._pipe = load_configured_pipeline(self.config)
            except Exception as exc:
                raise StepFailed("load model") from exc
        return self._pipe
