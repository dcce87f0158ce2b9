"""The temporary memory of the engine's heavy kernels, beyond their inputs and output.

Each figure follows the kernel's code (the docstrings of ``frame.engine.ops.conv``,
``frame.engine.passes.weight_decoding`` and ``frame.engine.passes.sliced_attention`` say the same):

* Conv (dense, 2-D): a 3×3 stride-1 conv that runs as Winograd F(4×4) or F(2×2, 3×3)
  (``conv.winograd_layout``) its layout's transformed weight, input tiles, transform scratch and GEMM
  result (``conv_winograd.scratch_bytes``);
  otherwise one im2col band of ``band_rows`` output rows (``C/g·kh·kw × rows·Wo`` float32, at most
  ``COLUMN_BUDGET_BYTES``) plus the padded input rows it reads; a 1×1 conv without stride or
  padding is one GEMM on the input itself (nothing extra);
* UpsampleConv (nearest ×2 then 3×3): one output phase (a quarter of the output), the band of its
  2×2 conv on the small image and the phase's summed taps; small images are upsampled whole instead;
* NormConv (GroupNorm [+ SiLU] → conv): the conv's (the same ``dense_conv_image``: Winograd layout
  or band; the normalisation runs in place in the copied rows), or for a 1×1 conv one normalised
  block of pixels (``PIXEL_BLOCK_BYTES``);
* DecodedWeight (fp16/8-bit weights decoded inside the op): one float32 block of output channels
  (about ``BLOCK_BYTES``, at least ``MIN_BLOCK_CHANNELS`` channels), that block's part of the output
  and the wrapped kernel's own scratch for the block (for a row-streamed weight, its stored block
  instead while the block is decoded, if larger: it is gone before the kernel runs);
* SlicedAttention: one score block (heads × query rows × keys, within the attention budget), for
  a scalar scale the scaled copy of Q, and with a batch of two the copies of Q, Kᵀ and V that
  flattening (batch, heads) out of their transposed views makes.

Everything else allocates only its output (the norms and softmax normalise in place into it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from frame.engine import graph as g
from frame.engine.ops.conv import FUSED_MIN_INPUT_PIXELS, band_rows, winograd_layout
from frame.engine.ops.conv_grouped import NARROW_RATIO
from frame.engine.ops.conv_winograd import scratch_bytes as winograd_scratch_bytes
from frame.engine.passes.norm_conv import PIXEL_BLOCK_BYTES
from frame.engine.passes.sliced_attention import AttentionConfig
from frame.engine.passes.weight_decoding import BLOCK_BYTES, MIN_BLOCK_CHANNELS
from frame.estimate.shapes import Shape, ShapeTable

FLOAT = 4


def _known(shape: Shape | None) -> bool:
    return bool(shape) and all(d is not None for d in shape)  # type: ignore[union-attr]


def conv_scratch(x: Shape, w: Shape, out: Shape, attrs: Mapping) -> int:
    """Temporaries of one dense 2-D conv image (``frame.engine.ops.conv.dense_conv_image``): a 3×3
    stride-1 conv's Winograd layout where the engine picks one, else the im2col band + padded rows.
    Counted for one thread (``pieces`` 1): the threaded layouts share the same budget."""
    if len(x) != 4 or len(w) != 4 or len(out) != 4:
        return 0
    group = int(attrs.get("group", 1) or 1)
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    m, cg, kh, kw = w
    if (kh, kw) == (1, 1) and strides == [1, 1] and not any(pads):
        return 0
    ho, wo = out[2], out[3]
    if group == 1 and (kh, kw) == (3, 3) and strides == [1, 1] and dilations == [1, 1]:
        layout = winograd_layout(cg, m, (ho, wo), 1)
        if layout is not None:
            return winograd_scratch_bytes(layout, cg, m, (ho, wo))
    depth = cg * kh * kw
    rows = band_rows((ho, wo), depth)
    span = (rows - 1) * strides[0] + (kh - 1) * dilations[0] + 1
    padded = (x[1] // group) * span * (pads[1] + x[3] + pads[3])
    return (depth * rows * wo + padded) * FLOAT


def upsample_conv_scratch(x: Shape, w: Shape, out: Shape, group: int = 1) -> int:
    n, c, h, wd = x
    m = w[0]
    if h * wd < FUSED_MIN_INPUT_PIXELS:
        upsampled = (n, c, 2 * h, 2 * wd)
        return math.prod(upsampled) * FLOAT + conv_scratch(upsampled, w, out, {"pads": [1, 1, 1, 1], "group": group})
    phase_kernel = (m, w[1], 2, 2)
    band = conv_scratch((1, c, h, wd), phase_kernel, (1, m, h, wd), {"pads": [1, 1, 1, 1], "group": group})
    return (m * h * wd + math.prod(phase_kernel)) * FLOAT + band


def _kernel_of(node: g.Node) -> tuple[str, Mapping]:
    """(function name, attributes) of the kernel a DecodedWeight node wraps."""
    kernel = node.spec.fn.keywords.get("_kernel") if node.spec is not None else None
    func = getattr(kernel, "func", kernel)
    return getattr(func, "__name__", ""), getattr(kernel, "keywords", {}) or {}


def decoded_weight_scratch(node: g.Node, table: ShapeTable, weights: Mapping, rows_nbytes: int = 0) -> int:
    """The decoded block, its part of the output and the wrapped kernel's scratch; ``rows_nbytes``: the
    stored bytes of a weight the op reads block by block (``WeightRows``), whose stored block lives
    only while its block is decoded (``weight_decoding._stored_block`` returns the float32 block and
    drops it; the previous decoded block is deleted before), so the larger of the two phases counts."""
    ref = weights.get(node.inputs[1]) if len(node.inputs) > 1 else None
    x, out = table.shapes.get(node.inputs[0]), table.shapes.get(node.outputs[0])
    if ref is None or not _known(x) or not _known(out) or not ref.shape:
        return 0
    name, attrs = _kernel_of(node)
    layout_axis = 1 if name in ("conv_transpose",) or (len(ref.shape) == 2 and name != "gemm") else 0
    if name == "gemm":
        layout_axis = 0 if attrs.get("transB", 0) else 1
    channels = ref.shape[layout_axis]
    per_channel = max(1, math.prod(ref.shape) // max(channels, 1)) * FLOAT
    step = max(1, MIN_BLOCK_CHANNELS, BLOCK_BYTES // per_channel)
    blocks = -(-channels // step)
    block_channels = -(-channels // blocks)
    block = block_channels * per_channel
    part = math.prod(out) * block_channels // channels * FLOAT if blocks > 1 else 0  # type: ignore[arg-type]
    w_block = tuple(block_channels if i == layout_axis else d for i, d in enumerate(ref.shape))
    out_block = tuple(block_channels if i == 1 else d for i, d in enumerate(out))  # type: ignore[arg-type]
    inner = 0
    if name == "conv":
        inner = conv_scratch(x, w_block, out_block, attrs)  # type: ignore[arg-type]
    elif name == "upsample_conv":
        inner = upsample_conv_scratch(x, w_block, out_block)  # type: ignore[arg-type]
    elif name == "norm_conv":
        inner = norm_conv_scratch(x, w_block, out_block, attrs.get("_attrs", {}),  # type: ignore[arg-type]
                                  attrs.get("_full_channels"))
    stored_block = rows_nbytes * block_channels // channels
    return block + max(part + inner, stored_block)


def norm_conv_scratch(x: Shape, w: Shape, out: Shape, attrs: Mapping, full_channels: int | None = None) -> int:
    """NormConv (``frame.engine.passes.norm_conv``): a 3×3 (or strided) conv's band, normalised as it is
    copied; a 1×1 conv's normalised block of pixels; a narrow conv normalises a copy of its input."""
    if len(x) != 4 or len(w) != 4:
        return 0
    c, pixels = x[1], x[2] * x[3]
    strides, pads = list(attrs.get("strides") or [1, 1]), list(attrs.get("pads") or [0, 0, 0, 0])
    if w[2:] == (1, 1) and strides == [1, 1] and not any(pads):
        return c * min(max(256, PIXEL_BLOCK_BYTES // (4 * c)), pixels) * FLOAT
    if strides == [1, 1] and w[2] * w[3] > 1 and c >= NARROW_RATIO * (full_channels or w[0]):
        return math.prod(x) * FLOAT
    return conv_scratch(x, w, out, attrs)


def attention_scratch(node: g.Node, table: ShapeTable, config: AttentionConfig) -> int:
    q, kt = table.shapes.get(node.inputs[0]), table.shapes.get(node.inputs[1])
    if not _known(q) or not _known(kt) or len(q) < 2 or len(kt) < 2:  # type: ignore[arg-type]
        return 0
    n, m = q[-2], kt[-1]  # type: ignore[index]
    count = math.prod(q[:-2]) if len(q) > 2 else 1  # type: ignore[arg-type, index]
    operands = [table.shapes.get(name) for name in node.inputs[3:]]
    scalars = all(_known(s) and math.prod(s) == 1 for s in operands)  # type: ignore[arg-type]
    heads, rows = config.block(count if scalars else 1, n, m, FLOAT)  # type: ignore[arg-type]
    scaled_q = table.nbytes(node.inputs[0]) if scalars and operands else 0
    # (batch, heads, ...) operands arrive as transposed views: flattening two leading dims > 1 copies them
    copies = sum(table.nbytes(name) for name in node.inputs[:3]) if sum(d > 1 for d in q[:-2]) > 1 else 0  # type: ignore[index]
    return heads * rows * m * FLOAT + scaled_q + copies  # type: ignore[operator]


def step_scratch(step: g.Step, table: ShapeTable, weights: Mapping,
                 attention: AttentionConfig | None = None) -> int:
    """Temporary bytes of one engine step beyond its inputs and output (see the module docstring)."""
    node = step.node
    op = node.op_type
    if op == "DecodedWeight":
        return decoded_weight_scratch(node, table, weights,
                                      step.weight_rows.nbytes if step.weight_rows is not None else 0)
    if op == "SlicedAttention":
        return attention_scratch(node, table, attention or AttentionConfig())
    if op not in ("Conv", "ConvAffine", "UpsampleConv", "NormConv") or len(node.inputs) < 2:
        return 0
    x, w, out = (table.shapes.get(node.inputs[0]), table.shapes.get(node.inputs[1]),
                 table.shapes.get(node.outputs[0]))
    if not (_known(x) and _known(w) and _known(out)):
        return 0
    if op == "UpsampleConv":
        return upsample_conv_scratch(x, w, out) if len(x) == 4 else 0  # type: ignore[arg-type]
    if op == "NormConv":
        return norm_conv_scratch(x, w, out, node.spec.fn.keywords.get("_attrs", {}))  # type: ignore[arg-type]
    if op == "ConvAffine" and node.attrs.get("transpose"):
        return 0  # ConvTranspose scatters per tap into the output: nothing beyond it
    attrs = node.attrs.get("conv_attrs", node.attrs) if op == "ConvAffine" else node.attrs
    return conv_scratch(x, w, out, attrs)  # type: ignore[arg-type]
