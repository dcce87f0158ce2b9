"""What a night's render paints, decided in the daemon before the worker starts: the ``RenderJob``.

Why apart from ``night``: this is the night's one decision that the worker cannot make again (the
seed is drawn here, the queued prompt or the candidates are fixed here) and it reads only the store
and the configuration, while ``night`` runs, supervises and publishes. ``build_job`` takes the first
paintable queued prompt (a variation whose picture was deleted waits, see ``_paintable``) with its own
settings and seed; without one, the feed items and theme × style combinations as candidates with the
rating history for the worker's taste model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from frame.config.schema import Config
from frame.daemon.queue import DEFAULT_STRENGTH
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.daemon.store.records import QueuedPrompt
from frame.seeds import resolve_seed
from frame.worker.records import (
    JobCandidate,
    PromptSettings,
    RatedPicture,
    RenderJob,
    RenderKind,
    ThemeChoice,
    Variation,
    Why,
)

if TYPE_CHECKING:  # night imports this module; the context is only a parameter here
    from frame.daemon.jobs.night import RenderContext

log = logging.getLogger(__name__)


def candidates(config: Config, store: Store, theme: str | None = None) -> tuple[JobCandidate, ...]:
    """Feed prompts valid now (unused first) followed by every theme × style combination; with the
    owner's ``theme`` for tonight (``frame.daemon.wishes``), that theme with every style only."""
    if theme is not None:
        return tuple(JobCandidate(prompt=f"{theme}, {style}", theme=theme, style=style, weight=1.0, origin="theme")
                     for style in config.taste.styles)
    items = [JobCandidate(prompt=i["prompt"], theme=i["theme"], style="", negative_prompt=i["negative_prompt"],
                          weight=i["weight"], origin=f"feed:{i['feed']}", feed_item_id=i["id"])
             for i in store.feed_items()]
    combos = [JobCandidate(prompt=f"{theme}, {style}", theme=theme, style=style, weight=1.0, origin="theme")
              for theme in config.taste.themes for style in config.taste.styles]
    return tuple(items + combos)


def rated_history(store: Store) -> tuple[RatedPicture, ...]:
    """Rated pictures for the taste model: what they were made from and the latest rating, with the
    ratings of painted pictures the owner deleted (``Store.remembered_ratings``), oldest first. Uploaded
    photos are left out: liking a family photo says nothing about which themes to paint."""
    history = [RatedPicture(id=kept.picture_id, prompt=kept.prompt, theme=kept.theme, style=kept.style,
                            origin=kept.origin, rating_kind=kept.rating_kind, rating_value=kept.rating_value,
                            candidate=kept.candidate) for kept in store.remembered_ratings()]
    for picture in store.rating_history():
        if picture.origin == gallery.UPLOAD_ORIGIN:
            continue
        why = picture.why if isinstance(picture.why, Mapping) else {}
        history.append(RatedPicture(
            id=picture.id, prompt=picture.prompt, theme=picture.theme, style=picture.style,
            origin=picture.origin, rating_kind=picture.rating_kind, rating_value=picture.rating_value,
            candidate=why.get("candidate")))
    return tuple(sorted(history, key=lambda rated: rated.id))


def _recent_themes(store: Store, count: int) -> tuple[str, ...]:
    """Themes of the last ``count`` pictures, newest last (the picker avoids repeating them)."""
    return tuple(p.theme for p in reversed(store.pictures(limit=max(count, 1))) if p.theme)


def build_job(ctx: RenderContext, render_id: int, kind: RenderKind, deadline: float | None = None) -> RenderJob:
    """A new job: the first queued prompt if any (with its own settings, seed and, for "more like
    this", the picture it varies), else candidates for the theme choice. ``deadline`` (epoch seconds)
    lets the worker choose the step count that fits (``frame.estimate``)."""
    queued = next((q for q in ctx.store.queued_prompts() if _paintable(ctx, q)), None)
    if queued is None:
        theme = ctx.wishes.take_theme(ctx.config.taste.themes) if ctx.wishes is not None else None
        if theme is not None:
            log.info("render %d paints the theme the owner chose: %s", render_id, theme)
        return RenderJob(render_kind=kind, render_id=render_id, state_dir=Path(ctx.state_dir), seed=resolve_seed(None),
                         candidates=candidates(ctx.config, ctx.store, theme), history=rated_history(ctx.store),
                         recent_themes=_recent_themes(ctx.store, ctx.config.taste.avoid_recent), deadline=deadline)
    variation = _variation(ctx, queued)
    why = (Why("variation", f"you asked for more like picture {queued.source_picture_id}",
               {"source_picture_id": queued.source_picture_id, "strength": queued.strength})
           if variation else Why("queue", "you queued this prompt"))
    choice = ThemeChoice(prompt=queued.prompt, negative_prompt=queued.negative_prompt, theme=queued.theme, style="",
                         origin="queue", prompt_id=queued.id, why=why)
    settings = PromptSettings(steps=queued.steps, sampler=queued.sampler, guidance=queued.guidance,
                              width=queued.width, height=queued.height)
    return RenderJob(render_kind=kind, render_id=render_id, state_dir=Path(ctx.state_dir),
                     seed=resolve_seed(queued.seed), choice=choice,
                     recent_themes=_recent_themes(ctx.store, ctx.config.taste.avoid_recent), deadline=deadline,
                     settings=settings, variation=variation)


def _source_picture(ctx: RenderContext, prompt: QueuedPrompt) -> Path | None:
    """The gallery file a variation starts from, when it is still there."""
    picture = ctx.store.picture(prompt.source_picture_id) if prompt.source_picture_id is not None else None
    path = gallery.picture_path(ctx.state_dir, picture.file) if picture is not None else None
    return path if path is not None and path.is_file() else None


def _paintable(ctx: RenderContext, prompt: QueuedPrompt) -> bool:
    """A plain prompt unless it is set aside (its renders failed: the queue page says why); a variation
    while its picture is in the gallery. One whose picture was deleted stays queued (the queue page says
    so) and the night takes the next prompt."""
    if prompt.set_aside:
        return False
    if not prompt.variation or _source_picture(ctx, prompt) is not None:
        return True
    log.warning("queued variation %d skipped: picture %s is no longer in the gallery", prompt.id,
                prompt.source_picture_id)
    return False


def _variation(ctx: RenderContext, prompt: QueuedPrompt) -> Variation | None:
    """The picture a "more like this" prompt starts from, with its strength; None for a plain prompt."""
    if not prompt.variation:
        return None
    path = _source_picture(ctx, prompt)
    assert path is not None and prompt.source_picture_id is not None  # _paintable chose it
    return Variation(image=path, strength=prompt.strength or DEFAULT_STRENGTH, picture_id=prompt.source_picture_id)
