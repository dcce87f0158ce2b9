"""The night's text embeddings for the taste picker: kept ones from the state folder, new ones from the
model's text encoder (``frame.diffusion.embedding_cache``), and how many of each the night took.

The choose step hands ``NightEmbed`` to the picker as its ``embed``. The pipeline (and the encoder's
identity, which may digest the weights once per new model) is looked at only on the first call, so a
worker restarted past the choice never opens them. After the choice, ``save_counts`` writes
``JOB_DIR/choose_texts.json``; the step-choice child reads it back (``new_texts``), so the nightly
estimate counts tonight's new texts, not every text the picker looked at.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from frame.diffusion.conditioning import tokens_through_end
from frame.diffusion.embedding_cache import CachedEmbed
from frame.diffusion.encoder_identity import text_cache_for
from frame.statefile import read_json, write_json

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline

log = logging.getLogger(__name__)

COUNTS_NAME = "choose_texts.json"


class NightEmbed:
    """``embed(texts)`` for the picker: ``pipe().embed_text`` behind the state folder's cache, or the
    encoder alone when the cache cannot be used tonight (no identity, no state folder)."""

    def __init__(self, pipe: Callable[[], Pipeline], state_dir: Path | None) -> None:
        self._pipe, self._state_dir = pipe, state_dir
        self._embed: Callable[[list[str]], np.ndarray] | None = None
        self.embedded: list[str] = []  # the distinct texts the encoder ran for tonight
        self.reused = 0

    def _open(self) -> Callable[[list[str]], np.ndarray]:
        pipe = self._pipe()
        cache = text_cache_for(pipe, self._state_dir) if self._state_dir is not None else None
        key = pipe.embeddings.cache_key  # the textual-inversion files: part of a text's key
        return pipe.embed_text if cache is None else CachedEmbed(cache, pipe.embed_text, key)

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self._embed is None:
            self._embed = self._open()
        vectors = self._embed(list(texts))
        if isinstance(self._embed, CachedEmbed):
            self.embedded, self.reused = list(self._embed.new_texts), self._embed.reused
        else:
            self.embedded += [t for t in dict.fromkeys(texts) if t not in self.embedded]
        return vectors

    def save_counts(self, job_dir: Path) -> None:
        """``choose_texts.json``: how many texts were embedded tonight (``embedded``) and taken from
        the cache (``reused``), and the most token positions a pass computed (``tokens``)."""
        if self._embed is None:
            return
        tokens = tokens_through_end(self._pipe().encoders[-1], self.embedded)
        write_json(Path(job_dir) / COUNTS_NAME, {"embedded": len(self.embedded), "reused": self.reused,
                                                 "tokens": tokens})
        log.info("choose: %d texts embedded tonight (at most %d tokens), %d kept from earlier nights",
                 len(self.embedded), tokens, self.reused)


def _saved(job_dir: Path, key: str) -> int | None:
    saved = read_json(Path(job_dir) / COUNTS_NAME)
    value = saved.get(key) if isinstance(saved, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def new_texts(job_dir: Path) -> int | None:
    """How many texts tonight's choice embedded (``choose_texts.json``), None if it is not known
    (a queued prompt embeds none: the caller counts it as such)."""
    return _saved(job_dir, "embedded")


def new_text_tokens(job_dir: Path) -> int | None:
    """The most token positions one of tonight's embedded texts took (None: not known, count 77)."""
    return _saved(job_dir, "tokens") or None
