"""Load-time rewrite: ``Resize(nearest, ×2) → Conv(3×3, pads 1)`` → one ``UpsampleConv`` node.

Every SD VAE decoder and UNet up block ends with this pair. Unfused, the Resize materialises a 4×
larger activation (256 MB at the VAE's 256×512×512 stage) that only the Conv reads, and the Conv then
spends 9 multiply-adds per output on it. ``ops.conv.upsample2x_conv3x3`` computes the same numbers as
four 2×2 convs on the small image (4/9 of the FLOPs, no upsampled tensor).

Fused only when it is exact: Resize (opset ≥ 11) in nearest mode with a coordinate/rounding pair
that maps output index ``o`` to source ``o // 2`` at scale 2 (``EXACT_MODES``), no ``axes``, a
``stretch`` aspect policy; its output feeds only input 0 of one Conv and is no graph output; the Conv
has pads 1 on every side, stride 1, dilation 1 and (where known at load) a 3×3 weight. The scale
itself is checked at load when it is a constant the graph holds (a Constant node or an inline
initializer); a streamed initializer (as the dynamo exporter writes) stays an input of the fused node
and is checked on every run, as is the weight's shape. When a run-time check fails the node runs the
original Resize and Conv kernels, so the rewrite can never change results, only speed.

Weights stay streamed: the fused node's inputs are the Conv's weight and bias (fetched just before
it, released after) plus the Resize's small scales/sizes tensor.
"""

from __future__ import annotations

import logging
import math
from functools import partial

import numpy as np

from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.ops.conv import FUSED_MIN_INPUT_PIXELS, conv_image_scratch, upsample2x_conv3x3
from frame.engine.ops.cost import FLOAT, Cost, CostQuery, Shape, has_dims
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.pattern import GraphIndex, Rewrite

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"
# (coordinate_transformation_mode, nearest_mode) pairs for which a ×2 nearest resize reads source
# pixel o // 2 for output o (half_pixel: o/2 - 0.25 rounds to o // 2; asymmetric: o/2 floors or, at
# the .5 ties, rounds down to it; tf_half_pixel_for_nn: o/2 + 0.25 floors to it).
EXACT_MODES = frozenset({
    ("asymmetric", "floor"), ("asymmetric", "round_prefer_floor"),
    ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
    ("pytorch_half_pixel", "round_prefer_floor"), ("pytorch_half_pixel", "round_prefer_ceil"),
    ("tf_half_pixel_for_nn", "floor"),
})


def is_exact_2x(shape: tuple[int, ...], scales: np.ndarray | None, sizes: np.ndarray | None) -> bool:
    """True if Resize ``scales`` (or, when scales are empty, ``sizes``) double H and W of an NCHW ``shape``."""
    if len(shape) != 4:
        return False
    if scales is not None and scales.size:
        return scales.shape == (4,) and np.array_equal(scales, [1, 1, 2, 2])
    n, c, h, w = shape
    return sizes is not None and sizes.shape == (4,) and np.array_equal(sizes, [n, c, 2 * h, 2 * w])


def upsample_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, scales: np.ndarray | None = None,
                  sizes: np.ndarray | None = None, /, *, _resize, _conv) -> np.ndarray:
    """The fused node's kernel: ``upsample2x_conv3x3`` when the run-time operands allow it, else the
    original kernels (``_resize`` and ``_conv`` are those nodes' kernels with their attributes bound)."""
    group = _conv.keywords.get("group", 1)
    if w.ndim == 4 and w.shape[2:] == (3, 3) and is_exact_2x(x.shape, scales, sizes):
        return upsample2x_conv3x3(x, w, b, group=group)
    log.debug("UpsampleConv: operands not an exact x2 + 3x3 conv (x %s, w %s), running Resize then Conv",
              x.shape, w.shape)
    upsampled = _resize(x, None, scales, sizes)
    return _conv(upsampled, w, b)



def upsample_conv_scratch(x: Shape, w: Shape, out: Shape, group: int = 1) -> int:
    """One output phase (a quarter of the output), the band of its 2×2 conv on the small image and the
    phase's summed taps; a small image is upsampled whole instead and convolved as a plain conv."""
    n, c, h, wd = x
    m = w[0]
    if h * wd < FUSED_MIN_INPUT_PIXELS:  # type: ignore[operator]
        upsampled = (n, c, 2 * h, 2 * wd)  # type: ignore[operator]
        return (math.prod(upsampled) * FLOAT  # type: ignore[arg-type]
                + conv_image_scratch(upsampled, w, out, {"pads": [1, 1, 1, 1], "group": group}))
    phase_kernel = (m, w[1], 2, 2)
    band = conv_image_scratch((1, c, h, wd), phase_kernel, (1, m, h, wd), {"pads": [1, 1, 1, 1], "group": group})
    return (m * h * wd + math.prod(phase_kernel)) * FLOAT + band  # type: ignore[operator, arg-type]


def _scratch(query: CostQuery) -> int:
    x, w, out = query.shape(0), query.shape(1), query.out()
    if len(query.inputs) < 2 or not (has_dims(x) and has_dims(w) and has_dims(out)) or len(x) != 4:  # type: ignore[arg-type]
        return 0
    return upsample_conv_scratch(x, w, out)  # type: ignore[arg-type]


def upsample_conv_share(x: Shape | None) -> float:
    """Share of the ONNX conv's multiply-adds the fused kernel does on input ``x``: each of the four
    output phases is a 2×2 conv of the small image (4/9), unless the image is too small to fuse."""
    if not x or len(x) != 4 or any(d is None for d in x):
        return 1.0
    return 4 / 9 if x[2] * x[3] >= FUSED_MIN_INPUT_PIXELS else 1.0  # type: ignore[operator]


def _share(query: CostQuery) -> float:
    return upsample_conv_share(query.shape(0))


COST = Cost(scratch=_scratch, share=_share)

def _resize_ok(node: Node) -> bool:
    attrs = node.attrs
    if node.op_type != "Resize" or node.domain or node.spec is None or node.spec.since < 11:
        return False
    modes = (attrs.get("coordinate_transformation_mode", "half_pixel"), attrs.get("nearest_mode", "round_prefer_floor"))
    return (attrs.get("mode", "nearest") == "nearest" and modes in EXACT_MODES and attrs.get("axes") is None
            and attrs.get("keep_aspect_ratio_policy", "stretch") == "stretch")


def _conv_ok(node: Node, weights: dict[str, WeightRef]) -> bool:
    attrs = node.attrs
    if node.op_type != "Conv" or node.domain or len(node.inputs) < 2:
        return False
    ones = (None, [1, 1])
    ref = weights.get(node.inputs[1])
    shape_ok = ref is None or (len(ref.shape) == 4 and tuple(ref.shape[2:]) == (3, 3))
    return (attrs.get("auto_pad", "NOTSET") == "NOTSET" and attrs.get("pads") == [1, 1, 1, 1]
            and attrs.get("strides") in ones and attrs.get("dilations") in ones
            and attrs.get("kernel_shape") in (None, [3, 3]) and shape_ok)



def _scale_ok(resize: Node, index: GraphIndex) -> bool:
    """False only if the scales/sizes are load-time constants that are not ×2 on H and W."""
    names = (resize.inputs + ["", "", ""])[2:4]
    known = [index.value(n) if n else np.zeros(0, np.float32) for n in names]
    if any(k is None for k in known):
        return True  # streamed: checked on every run
    scales, sizes = known
    if scales.size:
        return is_exact_2x((1, 1, 1, 1), scales, None)
    return sizes.shape == (4,)  # sizes depend on the input's shape: checked at run time


def _fused_node(resize: Node, conv: Node) -> Node:
    resize_fn = partial(resize.spec.fn, **resize.attrs)
    conv_fn = partial(conv.spec.fn, **conv.attrs)
    spec = OpSpec("UpsampleConv", 1, partial(upsample_conv, _resize=resize_fn, _conv=conv_fn), DOMAIN, cost=COST)
    extra = (resize.inputs + ["", "", ""])[2:4]
    bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
    inputs = [resize.inputs[0], conv.inputs[1], bias, *extra]
    while inputs and not inputs[-1]:
        inputs.pop()
    return Node(f"{conv.name}/upsample_conv", "UpsampleConv", DOMAIN, inputs, list(conv.outputs),
                {}, spec)


def fuse_upsample_conv(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]
                       ) -> tuple[list[Node], int]:
    """``nodes`` with every qualifying Resize → Conv pair replaced by one UpsampleConv node, and the count."""
    index, rewrite = GraphIndex(nodes, graph_outputs, weights), Rewrite(nodes)
    for i, conv in enumerate(nodes):
        if not conv.inputs or not _conv_ok(conv, weights):
            continue
        j = index.sole_producer(conv.inputs[0], "Resize")
        if j is None or j in rewrite.removed:
            continue
        resize = nodes[j]
        if not _resize_ok(resize) or len([o for o in resize.outputs if o]) != 1 or not _scale_ok(resize, index):
            continue
        rewrite.fuse(i, _fused_node(resize, conv), [j])
    if rewrite.count:
        log.debug("fused %d Resize -> Conv pair(s)", rewrite.count)
    return rewrite.result(), rewrite.count
