"""What the checkpoint side of an import hands on: per component, its diffusers config and how each of
its weights (by diffusers/transformers state-dict key) comes out of the checkpoint.

A ``Component`` holds no tensor data. ``weights`` streams ``(key, float32 array)`` pairs one at a time
in the checkpoint's order, so the writer converts and stores each before the next is read: memory
stays near the largest single tensor (SD 1.5's token embedding, 151 MB in float32; an OpenCLIP
in_proj is read whole once per q, k and v block, at most 20 MB).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from frame.convert.checkpoint.reader import Checkpoint


FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")  # what a weight may be stored as (read as float32)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a checkpoint, as its header says: the dtype's name (F32, F16, BF16...) and shape."""

    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Take:
    """How one output tensor comes from the checkpoint: ``source``, then optionally a block of rows
    (an OpenCLIP in_proj's q, k or v), a transpose (text_projection) or a squeeze (a 1x1 convolution
    used as a linear layer: the VAE's attention)."""

    source: str
    rows: tuple[int, int] | None = None
    transpose: bool = False
    squeeze: bool = False

    def shape(self, source_shape: tuple[int, ...]) -> tuple[int, ...]:
        shape = source_shape
        if self.rows is not None:
            shape = (self.rows[1] - self.rows[0], *shape[1:])
        if self.transpose:
            shape = tuple(reversed(shape))
        if self.squeeze:
            shape = shape[:2]
        return shape

    def apply(self, array: np.ndarray) -> np.ndarray:
        if self.rows is not None:
            array = array[self.rows[0]:self.rows[1]]
        if self.transpose:
            array = array.T
        if self.squeeze:
            array = array.reshape(array.shape[:2])
        return np.ascontiguousarray(array, dtype=np.float32)


@dataclass(frozen=True, eq=False)
class Component:
    """One pipeline component: ``name`` (``unet``, ``vae``, ``text_encoder``, ``text_encoder_2``), its
    diffusers/transformers ``config`` dict, ``takes`` by output key, and the checkpoint they read from
    (a ``--vae`` file's VAE reads from that file)."""

    name: str
    config: dict
    takes: Mapping[str, Take]
    checkpoint: Checkpoint
    skipped: tuple[str, ...] = field(default=())  # checkpoint keys deliberately left out

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every output weight's shape, from the checkpoint's header alone."""
        return {key: take.shape(self.checkpoint.tensors[take.source].shape) for key, take in self.takes.items()}

    def weights(self) -> Iterator[tuple[str, np.ndarray]]:
        """``(key, float32 array)`` for every weight, one at a time, in the checkpoint's order; an
        OpenCLIP in_proj is read once for its three blocks."""
        by_source: dict[str, list[str]] = {}
        for key, take in self.takes.items():
            by_source.setdefault(take.source, []).append(key)
        for source in sorted(by_source, key=_order(self.checkpoint)):
            array = self.checkpoint.read(source)
            for key in by_source[source]:
                yield key, self.takes[key].apply(array)
            del array


def _order(checkpoint: Checkpoint):
    return lambda source: file_position(checkpoint, source)


def file_position(checkpoint: Checkpoint, source: str) -> int:
    """Where tensor ``source`` starts in its file (0 when the file has no such order): sorting by it
    reads a file forwards (fewer, longer reads over HTTP)."""
    entry = getattr(checkpoint, "entries", {}).get(source)
    return getattr(entry, "start", 0)
