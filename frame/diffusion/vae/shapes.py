"""Is the VAE decoder's input size fixed, and if so, can it be decoded in tiles anyway?

A decoder exported with a static input (e.g. 1×4×64×64) would be run on the whole latent: the
full-size SD 1.5 render then peaks at 606–771 MB instead of under 300 MB, an out-of-memory kill on a
Pi. ``check_vae`` asks ``frame.engine.static_shapes.probe`` whether the graph runs at the tile size;
if it does, the pipeline overrides the declared shape and tiles as usual. If an op bakes the size in
(torch's static export bakes the mid-block attention's Reshapes), it tries the rewrite of
``frame model convert --dynamic-shapes`` (``frame.engine.dynamic_shapes``) on the structure; when
that works the pipeline loads the decoder through the same rewrite (``VaeShapes.rewrite``) and tiles.
Only a decoder neither way can tile gets ``VaeShapes.warning``, said plainly with the fix, for the
pipeline's log at load (the night's first minute) and ``frame config check``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from frame.engine.dynamic_shapes import make_dynamic
from frame.engine.io.http_settings import HttpSettings
from frame.engine.static_shapes import probe, structure_with_small_values
from frame.errors import UsageError

log = logging.getLogger(__name__)

INPUT, OUTPUT = "latent_sample", "sample"


@dataclass(frozen=True)
class VaeShapes:
    """``static``: the declared (height, width) latent size or None; ``tileable``: decoded in tiles
    (at the tile size); ``rewrite``: only after the dynamic-shapes rewrite at load; ``baked``: the
    ops that fix the size (why a rewrite is needed, or why tiling is impossible)."""

    static: tuple[int, int] | None
    tileable: bool
    baked: list[str] = field(default_factory=list)
    rewrite: bool = False

    def warning(self, source: str) -> str | None:
        if self.static is None or self.tileable:
            return None
        h, w = self.static
        why = self.baked[0] if self.baked else "an op fixes the size"
        return (f"vae_decoder ({source}) was exported with a fixed {h}x{w} latent input and its {why}, so it "
                f"cannot be decoded in tiles: every picture is decoded whole ({h * 8}x{w * 8} pixels at once; "
                f"for 512x512 about 800 MB, more than a Pi Zero 2 has), and the rewrite of 'frame model convert "
                f"--dynamic-shapes' does not handle it either. Fix: re-export the VAE decoder with dynamic axes")

    def note(self) -> str | None:
        if self.static is None:
            return None
        h, w = self.static
        if self.rewrite:
            why = self.baked[0] if self.baked else "an op fixes the size"
            return (f"vae_decoder was exported with a fixed {h}x{w} latent input and its {why}: rewritten at load "
                    "to follow the input size (as 'frame model convert --dynamic-shapes' does), decoded in tiles")
        if self.tileable:
            return f"vae_decoder declares a fixed {h}x{w} latent input but no op depends on it: decoded in tiles"
        return None


def check_vae(source: str, tile: int = 32, http: HttpSettings | None = None) -> VaeShapes:
    """Inspect the decoder at ``source`` (path or URL, read with ``http``; reads the structure and small
    constants only)."""
    proto = structure_with_small_values(source, http)
    spec = next((v for v in proto.graph.input if v.name == INPUT), None)
    if spec is None:
        return VaeShapes(None, True)
    dims = spec.type.tensor_type.shape.dim
    if len(dims) != 4 or not all(d.HasField("dim_value") for d in dims[2:]):
        return VaeShapes(None, True)
    static = (int(dims[2].dim_value), int(dims[3].dim_value))
    probe_size = (tile, tile) if (tile, tile) != static else (tile + 8, tile + 8)
    result = probe(proto, INPUT, probe_size, OUTPUT)
    if result.ok:
        return VaeShapes(static, True, result.baked)
    try:
        make_dynamic(proto, "vae_decoder")  # what the pipeline's load will do; its checks probe two sizes
    except UsageError as exc:
        log.debug("vae_decoder: the dynamic-shapes rewrite fails: %s", exc)
        return VaeShapes(static, False, result.baked)
    return VaeShapes(static, True, result.baked, rewrite=True)
