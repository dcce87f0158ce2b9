"""Is the VAE decoder's input size fixed, and if so, can it be decoded in tiles anyway?

A decoder exported with a static input (e.g. 1×4×64×64) would be run on the whole latent: the
full-size SD 1.5 render then peaks at 771 MB instead of 287 MB, an out-of-memory kill on a Pi.
``check_vae`` asks ``frame.engine.static_shapes.probe`` whether the graph runs at the tile size; if
it does, the pipeline overrides the declared shape and tiles as usual. If an op bakes the size in,
``VaeShapes.warning`` says so plainly with the fix, for the pipeline's log at load (the night's first
minute) and ``frame config check``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from frame.engine.static_shapes import probe, structure_with_small_values

log = logging.getLogger(__name__)

INPUT, OUTPUT = "latent_sample", "sample"


@dataclass(frozen=True)
class VaeShapes:
    """``static``: the declared (height, width) latent size or None; ``tileable``: runs at the tile size."""

    static: tuple[int, int] | None
    tileable: bool
    baked: list[str] = field(default_factory=list)

    def warning(self, source: str) -> str | None:
        if self.static is None or self.tileable:
            return None
        h, w = self.static
        why = self.baked[0] if self.baked else "an op fixes the size"
        return (f"vae_decoder ({source}) was exported with a fixed {h}x{w} latent input and its {why}, so it "
                f"cannot be decoded in tiles: every picture is decoded whole ({h * 8}x{w * 8} pixels at once; "
                f"for 512x512 about 800 MB, more than a Pi Zero 2 has). Fix: re-export the VAE decoder with "
                f"dynamic axes, or run 'frame model convert SRC DST --weights fp16 --dynamic-shapes' on the "
                f"model folder and point model.source at DST")

    def note(self) -> str | None:
        if self.static is None:
            return None
        h, w = self.static
        if self.tileable:
            return f"vae_decoder declares a fixed {h}x{w} latent input but no op depends on it: decoded in tiles"
        return None


def check_vae(source: str, tile: int = 32) -> VaeShapes:
    """Inspect the decoder at ``source`` (path or URL; reads the structure and small constants only)."""
    proto = structure_with_small_values(source)
    spec = next((v for v in proto.graph.input if v.name == INPUT), None)
    if spec is None:
        return VaeShapes(None, True)
    dims = spec.type.tensor_type.shape.dim
    if len(dims) != 4 or not all(d.HasField("dim_value") for d in dims[2:]):
        return VaeShapes(None, True)
    static = (int(dims[2].dim_value), int(dims[3].dim_value))
    probe_size = (tile, tile) if (tile, tile) != static else (tile + 8, tile + 8)
    result = probe(proto, INPUT, probe_size, OUTPUT)
    return VaeShapes(static, result.ok, result.baked)
