"""Load-time rewrite: GroupNorm → [SiLU] → Conv runs as one conv that normalises its input band by band.

Every resnet of the SD UNet and VAE starts ``norm1 → SiLU → conv1`` and continues ``norm2 → SiLU →
conv2``. Exported (TorchScript and dynamo alike) a GroupNorm is ``Reshape(x, [N, G, -1]) →
InstanceNormalization → Reshape(·, Shape(x)) → Mul(γ) → Add(β)``, and run that way the normalised
tensor is a second activation as large as ``x`` that lives until the conv is done: 67 MB at the VAE's
256-channel 256×256 stage of a 32×32-latent tile, 63 MB in the SDXL UNet's last up block at 1024².
Here the chain becomes two nodes:

* ``GroupNormStats(x, target, s, b, γ, β)``: one pass over ``x`` for each group's mean and variance
  (one group row at a time, no output-sized temporary), returning a small ``(N, C, 3)`` table: the
  mean to subtract and the scale and shift that make ``(x - mean) * scale + shift`` equal the whole
  normalisation and affine (InstanceNormalization's own ``s``/``b`` per group included);
* ``NormConv(x, w, bias, table)``: the conv (``ops.conv.dense_conv_image``: Winograd F(4×4) or F(2×2,
  3×3) for 3×3 stride-1 convs where a layout fits, else the banded im2col), which applies the table and the
  SiLU to each band of padded input rows (or block of channels) as it copies them, so the normalised
  tensor never exists.
  1×1 convs normalise blocks of pixels before each GEMM instead.

Output channels stay independent, so ``weight_decoding`` can still decode 8-bit/fp16 weights per block
of output channels around a NormConv (the stats are computed once, before). Statistics are the same
float32 mean and centred-dot-product variance as ``ops.norm``; results agree with the unfused graph
to float32 rounding.

Fused only when the pattern is exactly that: every intermediate has one consumer and is no graph
output, the first Reshape's target is ``[0 or N, G, -1]`` (checked at load when it is a constant,
else on every run), the second Reshape's target is ``Shape(x)``, and the conv is a plain Conv. At
run time, operands that are not the expected per-channel shapes make ``GroupNormStats`` run the
original kernels and hand over the normalised activation itself, which ``NormConv`` then convolves
as is, so results never change.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from frame.engine import buffers
from frame.engine.graph import Node
from frame.engine.io.weights import WeightRef
from frame.engine.ops import conv as conv_ops
from frame.engine.ops.blocks import map_row_blocks, matmul_into, split_rows
from frame.engine.ops.conv import conv_image_scratch
from frame.engine.ops.conv_im2col import NARROW_RATIO
from frame.engine.ops.cost import FLOAT, OUTPUT_ONLY, Cost, CostQuery, Shape, has_dims
from frame.engine.ops.linalg import float32_operands
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.pattern import GraphIndex, Rewrite, other_operand
from frame.engine.passes.silu import silu, silu_block

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"
PIXEL_BLOCK_BYTES = 4 << 20  # 1x1 convs: normalised input block per GEMM


# ------------------------------------------------------------------------------------------ kernels
def _per_channel(value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` as a (C,) float32 vector if it broadcasts per channel against (N, C, H, W), else None."""
    if value.ndim > 4:
        return None
    shape = (1,) * (4 - value.ndim) + value.shape
    if shape[0] != 1 or shape[2:] != (1, 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1).astype(np.float32), (channels,))


def _group_stats(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of each row as ``ops.norm._normalize_rows`` computes them (the mean, then the
    centred values' dot product), one row-sized temporary per worker thread instead of a full copy."""
    stats = np.empty((rows.shape[0], 2), np.float32)

    def block(part: np.ndarray, out: np.ndarray) -> None:
        mean = part.mean(axis=1, keepdims=True, dtype=np.float32)
        centred = np.empty(part.shape[1], np.float32)  # reused by every row: a fresh 4 MB row is fresh pages
        for k in range(part.shape[0]):
            np.subtract(part[k], mean[k], out=centred)
            out[k, 1] = np.dot(centred, centred) / np.float32(part.shape[1])
        out[:, 0] = mean[:, 0]

    if rows.size:
        map_row_blocks(block, rows, stats)
    return stats[:, 0], stats[:, 1]


def group_norm_stats(x: np.ndarray, target: np.ndarray, s: np.ndarray, b: np.ndarray, gamma: np.ndarray,
                     beta: np.ndarray, /, *, _epsilon: float, _original) -> np.ndarray:
    """(N, C, 3) float32 [mean, scale, shift] per image and channel, or (fallback) the activation itself."""
    groups = int(target.reshape(-1)[1]) if target.size == 3 else 0
    if x.ndim == 4 and x.dtype == np.float32 and groups > 0 and x.shape[1] % groups == 0 \
            and int(target.reshape(-1)[0]) in (0, x.shape[0]) and int(target.reshape(-1)[2]) == -1:
        n, c = x.shape[:2]
        g_vec = _per_channel(gamma, c)
        b_vec = _per_channel(beta, c)
        if g_vec is not None and b_vec is not None and s.size in (1, groups) and b.size in (1, groups):
            mean, var = _group_stats(x.reshape(n * groups, -1))
            inv = 1.0 / np.sqrt(var + np.float32(_epsilon), dtype=np.float32)
            per_group_scale = np.broadcast_to(s.reshape(-1).astype(np.float32), (groups,))
            per_group_shift = np.broadcast_to(b.reshape(-1).astype(np.float32), (groups,))
            table = np.empty((n, c, 3), np.float32)
            width = c // groups
            table[:, :, 0] = np.repeat(mean.reshape(n, groups), width, axis=1)
            table[:, :, 1] = np.repeat((inv.reshape(n, groups) * per_group_scale), width, axis=1) * g_vec
            table[:, :, 2] = np.repeat(np.broadcast_to(per_group_shift, (n, groups)), width, axis=1) * g_vec + b_vec
            return table
    log.debug("GroupNormStats: operands %s not a per-channel GroupNorm; running the original chain", x.shape)
    return _original(x, target, s, b, gamma, beta)


def original_chain(x, target, s, b, gamma, beta, *, reshape, instance_norm, mul_first, add_first, act):
    """The unfused GroupNorm (+ SiLU) with the nodes' own kernels."""
    y = instance_norm(reshape(x, target), s, b)
    y = y.reshape(x.shape)
    y = y * gamma if mul_first else gamma * y
    y = y + beta if add_first else beta + y
    return silu(np.ascontiguousarray(y)) if act else y


def _transform(table: np.ndarray, act: bool):
    """In-place ``act((v - mean) * scale + shift)`` on a (C, rows, cols) view of one image whose
    (rows, cols) planes are each contiguous (a band of ``ops.conv``'s padded rows, a pixel block);
    the view holds channels ``first_channel ..`` (the Winograd conv transforms blocks of channels)."""
    mean, scale, shift = (np.ascontiguousarray(table[:, k, None]) for k in range(3))

    def apply(view: np.ndarray, first_channel: int = 0) -> None:
        flat = view.reshape(view.shape[0], -1)
        if not np.shares_memory(flat, view):  # cannot happen for the callers' layouts
            raise ValueError("NormConv: the band view is not channel-planar")
        channels = slice(first_channel, first_channel + flat.shape[0])
        flat -= mean[channels]
        flat *= scale[channels]
        flat += shift[channels]
        if act:
            map_row_blocks(silu_block, flat, flat)

    return apply


def norm_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, table: np.ndarray, /, *, _act: bool,
              _conv, _attrs: dict, _full_channels: int | None = None) -> np.ndarray:
    """Conv of the normalised (and SiLU'd) ``x``, with the normalisation applied per band."""
    if table.ndim == 4:  # GroupNormStats fell back: ``table`` is the activation itself
        return _conv(table, w, bias, _full_channels=_full_channels)
    (x32, w32, b32), dtype = float32_operands(x, w, bias)
    if x32.ndim != 4 or w32.ndim != 4 or _attrs.get("group", 1) != 1 or table.shape[:2] != x32.shape[:2]:
        return _conv(_materialise(x32, table, _act), w, bias, _full_channels=_full_channels)
    strides, dilations, pads = conv_ops.spatial_params(w32.shape[2:], x32.shape[2:], _attrs.get("strides"),
                                                       _attrs.get("dilations"), _attrs.get("pads"),
                                                       _attrs.get("auto_pad", "NOTSET"))
    n, c, h, wd = x32.shape
    m, _, kh, kw = w32.shape
    ho = (h + pads[0] + pads[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    wo = (wd + pads[1] + pads[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    one_by_one = kh == kw == 1 and strides == [1, 1] and not any(pads)
    if not one_by_one and (ho <= 0 or wo <= 0 or (strides == [1, 1] and kh * kw > 1
                                                  and c >= conv_ops.NARROW_RATIO * (_full_channels or m))):
        return _conv(_materialise(x32, table, _act), w, bias, _full_channels=_full_channels)
    out = buffers.empty((n, m, ho, wo), np.float32)
    w32 = np.ascontiguousarray(w32)
    for i in range(n):
        transform = _transform(table[i], _act)
        if one_by_one:
            _pixel_blocks(x32[i].reshape(c, h * wd), w32.reshape(m, c), transform, out[i].reshape(m, h * wd))
        else:
            conv_ops.dense_conv_image(x32[i], w32, strides, dilations, pads, (ho, wo), out[i], transform)
    if b32 is not None:
        bias = b32.reshape(1, m, 1, 1)
        split_rows(lambda m0, m1: np.add(out[:, m0:m1], bias[:, m0:m1], out=out[:, m0:m1]), m, out.nbytes)
    return out.astype(dtype, copy=False)


def _pixel_blocks(x: np.ndarray, w: np.ndarray, transform, out: np.ndarray) -> None:
    """1x1 conv ``w @ act(norm(x))`` over column blocks of x (C, P): one block normalised at a time.

    NormConv is a self-splitting step (``blas_threads``): BLAS runs on one thread, so each block's
    product goes through ``matmul_into``, which cuts it into one piece per core, and a block's copy
    and normalisation are shared out by channels where it reaches ``blocks.MIN_PARALLEL_BYTES`` (the
    SD UNet's 320-channel blocks stay just under: measured, splitting them gained nothing)."""
    c, pixels = x.shape
    step = max(256, PIXEL_BLOCK_BYTES // (4 * c))
    block = buffers.empty((c, min(step, pixels)), np.float32)
    for p0 in range(0, pixels, step):
        p1 = min(pixels, p0 + step)
        part = block[:, :p1 - p0]

        def normalise(c0: int, c1: int, part: np.ndarray = part, p0: int = p0, p1: int = p1) -> None:
            part[c0:c1] = x[c0:c1, p0:p1]
            transform(part[c0:c1, None, :], first_channel=c0)

        split_rows(normalise, c, part.nbytes)
        matmul_into(w, part, out[:, p0:p1])


def _materialise(x: np.ndarray, table: np.ndarray, act: bool) -> np.ndarray:
    y = np.array(x, dtype=np.float32, copy=True)
    for i in range(y.shape[0]):
        _transform(table[i], act)(y[i].reshape(y.shape[1], 1, -1))
    return y


# ------------------------------------------------------------------------------------------ the pass
@dataclass
class _Chain:
    """The matched nodes, from the first Reshape to the conv (positions in ``nodes``)."""

    reshape: int
    instance_norm: int
    reshape_back: int
    mul: int
    add: int
    act: int | None
    conv: int
    x: str
    target: str
    gamma: str
    beta: str


def norm_conv_scratch(x: Shape, w: Shape, out: Shape, attrs: dict, full_channels: int | None = None) -> int:
    """A 3×3 (or strided) conv's band or Winograd layout (``conv_image_scratch``: the normalisation runs
    in place in the copied rows); a 1×1 conv's normalised block of pixels (``PIXEL_BLOCK_BYTES``); a
    narrow conv normalises a copy of its input."""
    if len(x) != 4 or len(w) != 4:
        return 0
    c, pixels = x[1], x[2] * x[3]  # type: ignore[operator]
    strides, pads = list(attrs.get("strides") or [1, 1]), list(attrs.get("pads") or [0, 0, 0, 0])
    if w[2:] == (1, 1) and strides == [1, 1] and not any(pads):
        return c * min(max(256, PIXEL_BLOCK_BYTES // (4 * c)), pixels) * FLOAT  # type: ignore[operator]
    if strides == [1, 1] and w[2] * w[3] > 1 and c >= NARROW_RATIO * (full_channels or w[0]):  # type: ignore[operator]
        return math.prod(x) * FLOAT  # type: ignore[arg-type]
    return conv_image_scratch(x, w, out, attrs)


def _scratch(query: CostQuery) -> int:
    x, w, out = query.shape(0), query.shape(1), query.out()
    if len(query.inputs) < 2 or not (has_dims(x) and has_dims(w) and has_dims(out)):
        return 0
    return norm_conv_scratch(x, w, out, query.keywords.get("_attrs", {}))  # type: ignore[arg-type]


COST = Cost(scratch=_scratch)


def _match(conv_index: int, index: GraphIndex) -> _Chain | None:
    nodes = index.nodes
    conv = nodes[conv_index]
    if conv.op_type != "Conv" or conv.domain or len(conv.inputs) < 2 or conv.spec is None:
        return None
    act = index.sole_producer(conv.inputs[0], "SiLU", domain=None)
    add = index.sole_producer(nodes[act].inputs[0] if act is not None else conv.inputs[0], "Add")
    mul = index.input_from(nodes[add], "Mul") if add is not None else None
    back = index.input_from(nodes[mul[0]], "Reshape") if mul is not None else None
    if back is None:
        return None
    beta, gamma = other_operand(nodes[add], mul[1]), other_operand(nodes[mul[0]], back[1])
    norm = index.sole_producer(nodes[back[0]].inputs[0], "InstanceNormalization")
    first = index.sole_producer(nodes[norm].inputs[0], "Reshape") if norm is not None else None
    if None in (beta, gamma, norm, first) or len(nodes[norm].inputs) != 3:
        return None
    x = nodes[first].inputs[0]
    reshape_back = nodes[back[0]]
    shape_of = index.producer_of(reshape_back.inputs[1], "Shape", domain=None) if len(reshape_back.inputs) > 1 else None
    if (shape_of is None or nodes[shape_of].inputs[0] != x
            or nodes[shape_of].attrs.get("start", 0) != 0 or nodes[shape_of].attrs.get("end") is not None):
        return None
    target = index.value(nodes[first].inputs[1])  # streamed: checked per run
    if nodes[first].attrs.get("allowzero", 0) or (target is not None and (
            target.size != 3 or int(target.reshape(-1)[1]) <= 0 or int(target.reshape(-1)[2]) != -1)):
        return None
    return _Chain(first, norm, back[0], mul[0], add, act, conv_index, x, nodes[first].inputs[1], gamma, beta)


def _fused(chain: _Chain, nodes: list[Node]) -> tuple[Node, Node]:
    norm, conv = nodes[chain.instance_norm], nodes[chain.conv]
    mul, add = nodes[chain.mul], nodes[chain.add]
    original = partial(original_chain, reshape=partial(nodes[chain.reshape].spec.fn, **nodes[chain.reshape].attrs),
                       instance_norm=partial(norm.spec.fn, **norm.attrs),
                       mul_first=mul.inputs[1] == chain.gamma, add_first=add.inputs[1] == chain.beta,
                       act=chain.act is not None)
    stats_fn = partial(group_norm_stats, _epsilon=float(norm.attrs.get("epsilon", 1e-5)), _original=original)
    table = f"{conv.name}/group_norm_table"
    stats = Node(f"{norm.name}/group_norm_stats", "GroupNormStats", DOMAIN,
                 [chain.x, chain.target, norm.inputs[1], norm.inputs[2], chain.gamma, chain.beta], [table], {},
                 OpSpec("GroupNormStats", 1, stats_fn, DOMAIN, cost=OUTPUT_ONLY))
    conv_fn = partial(norm_conv, _act=chain.act is not None, _conv=partial(conv.spec.fn, **conv.attrs),
                      _attrs=dict(conv.attrs))
    bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
    fused = Node(f"{conv.name}/norm_conv", "NormConv", DOMAIN, [chain.x, conv.inputs[1], bias, table],
                 list(conv.outputs), {}, OpSpec("NormConv", 1, conv_fn, DOMAIN, cost=COST))
    return stats, fused


def fuse_norm_conv(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]
                   ) -> tuple[list[Node], int]:
    """``nodes`` with every GroupNorm → [SiLU] → Conv chain as GroupNormStats + NormConv, and the count."""
    index, rewrite = GraphIndex(nodes, graph_outputs, weights), Rewrite(nodes)
    for i in range(len(nodes)):
        chain = _match(i, index)
        if chain is None:
            continue
        stats, fused = _fused(chain, nodes)
        # the stats node takes the chain's last place, the Add: γ and β may be computed by nodes between
        # the InstanceNormalization and the Mul (Unsqueeze of a (C,) weight, frame.convert.graphs' or any
        # exporter's valid order), and every input of the chain is there by the Add
        rewrite.replace(chain.add, stats)
        matched = [chain.reshape, chain.instance_norm, chain.reshape_back, chain.mul]
        rewrite.fuse(chain.conv, fused, matched if chain.act is None else [*matched, chain.act])
    if rewrite.count:
        log.debug("fused %d GroupNorm -> Conv chain(s)", rewrite.count)
    return rewrite.result(), rewrite.count
