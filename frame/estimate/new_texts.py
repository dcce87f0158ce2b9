"""How many texts the taste picker embeds tonight: those it has not kept from earlier nights.

The picker's embeddings are kept in the state folder (``frame.diffusion.embedding_cache``), so a
night runs the text encoder only for texts that are new: a new feed item, a new theme, a changed
concept axis. ``frame estimate`` and ``frame config check`` list the texts a night would ask for
(``TonightTexts``: from the configuration and, read-only, the store's feed items and rated prompts)
and count those without a sound kept entry (``count_new``); the render worker itself counts what it
really embedded (``frame.worker.embeddings``). Counting only reads: no digest is computed, no entry
touched or removed, so an estimate never changes what the next night finds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frame.diffusion.conditioning import tokens_through_end
from frame.diffusion.encoder_identity import text_cache_for
from frame.taste.features import DEFAULT_AXES

if TYPE_CHECKING:
    from frame.config.schema import Config


@dataclass(frozen=True)
class TonightTexts:
    """The texts a night's choice embeds, as known before the night.

    ``trained``: the taste model chooses (every candidate and rated prompt is embedded); otherwise the
    picker chooses for variety and embeds the axes' ends and only the chosen candidate."""

    axis_ends: tuple[str, ...]
    candidates: tuple[str, ...]
    rated: tuple[str, ...]
    trained: bool

    @property
    def all_texts(self) -> int:
        """Every text the night asks for: the figure without kept embeddings (``plan.choose_texts``)."""
        if not self.trained:
            return len(set(self.axis_ends)) + 1
        return len(set(self.axis_ends) | set(self.candidates) | set(self.rated))


def tonight_texts(config: Config, feed_prompts: Sequence[str] = (), rated_prompts: Sequence[str] = (),
                  ratings: int | None = None) -> TonightTexts:
    """The texts of a night with this ``config.taste``, the feed prompts valid tonight and the rated
    pictures' prompts; ``ratings=None`` (no store) assumes a trained taste model."""
    taste = config.taste
    axes = dict(taste.axes) if taste.axes else DEFAULT_AXES
    ends = tuple(text for pair in axes.values() for text in pair)
    combos = tuple(f"{theme}, {style}" for theme in taste.themes for style in taste.styles)  # as the night's job
    trained = ratings is None or ratings >= taste.min_ratings
    return TonightTexts(ends, tuple(feed_prompts) + combos, tuple(rated_prompts), trained)


def new_texts(texts: TonightTexts, cache: Any) -> list[str]:
    """The texts of ``texts`` tonight embeds: those ``cache`` (an ``EmbeddingCache``, or None when the
    encoder's identity is not known yet) has no sound entry for. For variety, the chosen candidate
    counts as new (the longest not kept stands for it) unless every candidate is kept."""
    if cache is None:
        missing = list(dict.fromkeys(texts.axis_ends + (() if not texts.trained else texts.candidates + texts.rated)))
    elif texts.trained:
        return cache.missing(texts.axis_ends + texts.candidates + texts.rated)
    else:
        missing = cache.missing(texts.axis_ends)
    if not texts.trained:
        candidates = list(texts.candidates) if cache is None else cache.missing(texts.candidates)
        if candidates:
            missing.append(max(candidates, key=len))
    return missing


def count_new(texts: TonightTexts, cache: Any) -> int:
    """How many texts tonight embeds (``new_texts``)."""
    return len(new_texts(texts, cache))


def count_new_for(pipe: Any, texts: TonightTexts, state_dir: str | os.PathLike) -> tuple[int, int | None]:
    """(texts tonight embeds, the most token positions one of them takes) against ``pipe``'s kept
    embeddings in ``state_dir``; nothing is digested or written."""
    new = new_texts(texts, text_cache_for(pipe, state_dir, compute=False))
    return len(new), tokens_through_end(pipe.encoders[-1], new) or None
