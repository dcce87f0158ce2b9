"""A queued prompt's own settings (``RenderJob.settings``) as the configuration the worker renders with.

The owner's steps, sampler, guidance and size replace ``model.steps``/``sampler``/``guidance``/
``size`` of the job's ``config.yaml``; everything downstream then reads them where it reads the
night's: ``night_size``, the model rules, and the step estimate (its child applies them too, so the
owner's steps are the most it may choose, as the configured ones are for a night from themes).

On a render server (``render.backend: remote``) they replace ``render.remote.steps``/``sampler``/
``guidance``/``size`` in the same way (``with_remote_prompt_settings``): the server is asked for the
owner's values, each one the prompt leaves out is the server's configured one, and the sampler goes
out under its AUTOMATIC1111 name (``frame.remote.a1111.request_payload``, from the sampler registry).
The server's refusal is a failed remote job like any other: the frame paints instead.

The daemon checked them against what any model allows when the prompt was queued; a value this model
refuses (a size its fixed axes do not allow, a sampler its kind cannot use) is reported by
``refused`` and the worker paints with the night's settings instead of losing the night.
"""

from __future__ import annotations

import dataclasses
import logging

from frame.config.schema import Config
from frame.errors import UsageError
from frame.worker.records import PromptSettings

log = logging.getLogger(__name__)


def with_prompt_settings(config: Config, settings: PromptSettings) -> Config:
    """``config`` with the prompt's own values in its ``model`` section (unchanged when it has none)."""
    changes = _changes(settings)
    if not changes:
        return config
    return dataclasses.replace(config, model=dataclasses.replace(config.model, **changes))


def with_remote_prompt_settings(config: Config, settings: PromptSettings) -> Config:
    """``config`` with the prompt's own values in ``render.remote`` (unchanged when it has none): what
    the render server is asked for."""
    changes = _changes(settings)
    if not changes:
        return config
    remote = dataclasses.replace(config.render.remote, **changes)
    return dataclasses.replace(config, render=dataclasses.replace(config.render, remote=remote))


def _changes(settings: PromptSettings) -> dict[str, object]:
    """The prompt's own values under the names ``model`` and ``render.remote`` share."""
    changes: dict[str, object] = {}
    if settings.steps is not None:
        changes["steps"] = settings.steps
    if settings.sampler is not None:
        changes["sampler"] = settings.sampler
    if settings.guidance is not None:
        changes["guidance"] = settings.guidance
    if settings.width and settings.height:
        changes["size"] = f"{settings.width}x{settings.height}"
    return changes


def refused(pipe: object, settings: PromptSettings, config: Config, size: tuple[int, int]) -> str | None:
    """Why this model refuses the prompt's own settings (the pipeline's own check), or None."""
    if settings.empty:
        return None
    model = config.model
    try:
        pipe.settings("", "", model.steps, model.guidance, model.sampler, 0, size[0], size[1],  # type: ignore[attr-defined]
                      warn=False)  # the render's own call says the warnings
    except UsageError as exc:
        log.warning("the queued prompt's own settings do not suit this model (%s): using the night's", exc)
        return str(exc)
    return None
