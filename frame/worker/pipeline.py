"""The render worker's diffusion pipeline, loaded once on first use (``render`` and the step-choice
child, ``step_choice``, share it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.config.schema import Config
from frame.worker.errors import StepFailed, StepUnavailable
from frame.worker.events import StageEvent
from frame.worker.process import Emit

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline
    from frame.diffusion.vae.tiles import PeakMb


class PipelineHolder:
    """Loads the diffusion pipeline once, on first use (choosing needs its text encoder, generating
    the whole model; a resumed job past both never loads it)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._pipe: Pipeline | None = None

    def get(self, emit: Emit) -> Pipeline:
        if self._pipe is None:
            try:
                from frame.diffusion.configured import load_configured_pipeline
            except ImportError as exc:
                raise StepUnavailable("generate", f"the diffusion pipeline is not available: {exc}") from exc
            emit(StageEvent("loading model"))
            try:
                self._pipe = load_configured_pipeline(self.config, vae_peak=self._vae_peak_counter)
            except Exception as exc:
                raise StepFailed("load model") from exc
        return self._pipe

    def _vae_peak_counter(self, pipe: Pipeline) -> PeakMb:
        """The decoder's counted peak per tile size, so the render decodes the fewest tiles that fit
        ``worker.memory_limit_mb``, as tonight's estimate counts them (``frame.diffusion.vae.tiles``)."""
        from frame.diffusion.configured import engine_weights
        from frame.estimate.vae import peak_counter

        return peak_counter(pipe, engine_weights(self.config.model.weights), pipe.http)
