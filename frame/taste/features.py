"""Named, interpretable numbers for a prompt: where it sits on concept axes, plus its parameters.

A concept axis is two short descriptions ("cool colours, blue and teal light" ↔ "warm colours, golden
light"). A prompt's position on it is cos(prompt, high) − cos(prompt, low), computed with the same
text encoder the picture model uses (injected as ``embed(texts) -> (n, dim)`` pooled embeddings; the
SD pipeline provides ``pipe.embed_text``). Positive = closer to the high end. These numbers are what
the taste model's 2-D plots and sentences are about, so every one has a name a person recognises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from frame.errors import FrameError

Embed = Callable[[list[str]], np.ndarray]

# name → (low end, high end). Names read well in a sentence: "on warmth × realism, ...".
DEFAULT_AXES: dict[str, tuple[str, str]] = {
    "warmth": ("cool colours, blue and teal, cold light", "warm colours, golden light, red and orange"),
    "realism": ("a painterly artwork with visible brush strokes", "a realistic detailed photograph"),
    "drama": ("a calm, quiet, peaceful scene", "a dramatic, intense, stormy scene"),
    "urban": ("wild nature, forest, mountains, sea", "a busy city with streets and buildings"),
    "darkness": ("bright sunny daylight", "night, darkness, moonlight"),
    "detail": ("a minimal, simple, empty composition", "a busy, intricate, crowded composition"),
}


@dataclass(frozen=True)
class Candidate:
    """One possible picture for tonight.

    ``theme``/``style`` come from config or a feed item; ``prompt`` is the text sent to the model
    (default "theme, style"); ``params`` are numeric generation settings used as features when every
    candidate and rating has them (steps, guidance, ...); ``popularity`` (≥ 0, from feeds) guides
    the choice before enough ratings exist.
    """

    theme: str
    style: str = ""
    prompt: str = ""
    source: str = "config"
    params: Mapping[str, float] = field(default_factory=dict)
    popularity: float = 0.0

    @property
    def text(self) -> str:
        return self.prompt or ", ".join(p for p in (self.theme, self.style) if p)

    def to_dict(self) -> dict:
        """Plain JSON form; :meth:`from_dict` restores it (the daemon stores this with a picture)."""
        return {
            "theme": self.theme,
            "style": self.style,
            "prompt": self.text,
            "source": self.source,
            "params": {k: float(v) for k, v in self.params.items()},
            "popularity": float(self.popularity),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Candidate:
        return cls(
            theme=str(data["theme"]),
            style=str(data.get("style", "")),
            prompt=str(data.get("prompt", "")),
            source=str(data.get("source", "config")),
            params=dict(data.get("params", {})),
            popularity=float(data.get("popularity", 0.0)),
        )


def _unit_rows(vectors: np.ndarray, what: str) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2:
        raise FrameError(
            f"embed() must return a 2-D array (texts × dims) for {what}, got shape {vectors.shape}"
        )
    if not np.isfinite(vectors).all():
        raise FrameError(f"embed() returned NaN or infinite values for {what}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


class PromptFeatures:
    """Turns candidates into a named feature table, caching embeddings by text.

    Parameters
    ----------
    embed : callable
        ``embed(texts: list[str]) -> ndarray (len(texts), dim)``, pooled text embeddings.
    axes : mapping, optional
        Axis name → (low text, high text); defaults to :data:`DEFAULT_AXES`.
    """

    def __init__(self, embed: Embed, axes: Mapping[str, Sequence[str]] | None = None) -> None:
        axes = DEFAULT_AXES if axes is None else axes
        self.axes = {str(name): self._check_axis(name, ends) for name, ends in axes.items()}
        if not self.axes:
            raise FrameError("taste.axes: at least one concept axis is needed")
        self._embed = embed
        self._cache: dict[str, np.ndarray] = {}

    @staticmethod
    def _check_axis(name: str, ends: Sequence[str]) -> tuple[str, str]:
        if isinstance(ends, str) or len(ends) != 2 or not all(isinstance(e, str) and e.strip() for e in ends):
            raise FrameError(f"taste.axes.{name}: expected [low text, high text], got {ends!r}")
        return str(ends[0]), str(ends[1])

    def embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, computing only texts not seen before (one ``embed`` call)."""
        missing = sorted({t for t in texts if t not in self._cache})
        if missing:
            vectors = _unit_rows(self._embed(list(missing)), f"{len(missing)} texts")
            if vectors.shape[0] != len(missing):
                raise FrameError(f"embed() returned {vectors.shape[0]} rows for {len(missing)} texts")
            self._cache.update(zip(missing, vectors))
        return np.stack([self._cache[t] for t in texts])

    def axis_values(self, texts: Sequence[str]) -> np.ndarray:
        """(n_texts, n_axes): cos(text, high) − cos(text, low) per axis."""
        ends = [text for pair in self.axes.values() for text in pair]
        vectors = self.embeddings(ends + list(texts))  # one embed() call for everything new
        poles, prompts = vectors[: len(ends)], vectors[len(ends) :]
        sims = prompts @ poles.T
        return sims[:, 1::2] - sims[:, 0::2]
