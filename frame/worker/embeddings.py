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
from typing import Any

import numpy as np

from frame.diffusion.embedding_cache import CachedEmbed
from frame.diffusion.encoder_identity import text_cache_for
from frame.statefile import read_json, write_json

log = logging.getLogger(__name__)

COUNTS_NAME = "choose_texts.json"


class NightEmbed:
    """``embed(texts)`` for the picker: ``pipe().embed_text`` behind the state folder's cache, or the
    encoder alone when the cache cannot be used tonight (no identity, no state folder)."""

    def __init__(self, pipe: Callable[[], Any], state_dir: Path | None) -> None:
        self._pipe, self._state_dir = pipe, state_dir
        self._embed: Any = None
        self.computed, self.reused = 0, 0

    def _open(self) -> Any:
        pipe = self._pipe()
        cache = text_cache_for(pipe, self._state_dir) if self._state_dir is not None else None
        return pipe.embed_text if cache is None else CachedEmbed(cache, pipe.embed_text)

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self._embed is None:
            self._embed = self._open()
        vectors = self._embed(list(texts))
        if hasattr(self._embed, "computed"):
            self.computed, self.reused = self._embed.computed, self._embed.reused
        else:
            self.computed += len(dict.fromkeys(texts))
        return vectors

    def save_counts(self, job_dir: Path) -> None:
        """``choose_texts.json``: the texts embedded tonight (``embedded``) and taken from the cache."""
        if self._embed is not None:
            write_json(Path(job_dir) / COUNTS_NAME, {"embedded": self.computed, "reused": self.reused})
            log.info("choose: %d texts embedded tonight, %d kept from earlier nights", self.computed, self.reused)


def new_texts(job_dir: Path) -> int | None:
    """How many texts tonight's choice embedded (``choose_texts.json``), None if it is not known
    (a queued prompt embeds none: the caller counts it as such)."""
    saved = read_json(Path(job_dir) / COUNTS_NAME)
    value = saved.get("embedded") if isinstance(saved, dict) else None
    return value if isinstance(value, int) and value >= 0 else None
