"""Load-time rewrite: 8-bit and float16 weights are decoded inside the op that uses them, in blocks.

A uint8 model feeds each weight through ``DequantizeLinear(q, scale, zero_point)`` (``frame model
convert --weights uint8``, onnxruntime's QDQ weights), an fp16 model through ``Cast(to=FLOAT)``.
Run as written, either materialises the whole float32 weight before the op: 118 MB for SD 1.5's
1280×2560×3×3 convs, beside the 30 MB of 8-bit data it came from. Here the op that reads the weight
(MatMul, Gemm, Conv, ConvTranspose, or the fused UpsampleConv and NormConv) becomes one ``DecodedWeight`` node
that takes the stored weight, its scale and zero point, and runs the original kernel once per block of
output channels, each block decoded to float32 just before (``BLOCK_BYTES``, or ``MIN_BLOCK_CHANNELS``
channels if those are larger). Output channels
are independent, so the result is the same as the unfused graph's, to float32 rounding; weights
smaller than one block take a single call, exactly as before.

Also rewired: ``Gather`` reading an fp16 table through ``Cast(to=FLOAT)`` (fp16 token embeddings)
reads the table itself, so the executor gathers only the prompt's rows instead of widening the
whole table (the gathered rows are widened instead).

Patterns (after ``graph.compute_in_float32``, which turns every Cast to float16 into one to float):
``DequantizeLinear(initializer, scale, zp) → [Cast(to=FLOAT)]* → op.weight`` and
``fp16 initializer → [Cast(to=FLOAT)]* → op.weight``. An fp16 weight is only fused when every use of
it is fused (the executor then hands it over as float16, see ``WeightRef.keep_float16``); anything
else stays as exported.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from frame.engine.graph import Node, rewrite_nodes
from frame.engine.io.weights import WeightRef
from frame.engine.lora.delta import LoraStored
from frame.engine.ops.conv import conv_image_scratch
from frame.engine.ops.cost import FLOAT as FLOAT_BYTES
from frame.engine.ops.cost import Cost, CostQuery, has_dims
from frame.engine.ops.registry import OpSpec
from frame.engine.passes.norm_conv import norm_conv_scratch
from frame.engine.passes.pattern import GraphIndex
from frame.engine.passes.upsample_conv import upsample_conv_scratch, upsample_conv_share
from frame.engine.passes.weight_rows import WeightRows

log = logging.getLogger(__name__)

DOMAIN = "frame.engine"
BLOCK_BYTES = 16 << 20
MIN_BLOCK_CHANNELS = 256
FLOAT = 1


@dataclass(frozen=True)
class Layout:
    """Where a fused op's output channels are: ``weight_axis`` of the weight (blocked), ``output_axis``
    of the result (filled per block) and input ``bias_input`` (sliced per block, if given).
    ``blockable`` is False for grouped convs, whose weight is decoded whole."""

    weight_axis: int
    output_axis: int
    bias_input: int | None
    blockable: bool = True


def layout_of(node: Node, weight_rank: int | None) -> Layout | None:
    """The Layout of an op that may take a decoded weight as input 1, else None."""
    op = node.op_type
    if node.domain == "" and op == "MatMul":
        return Layout(1, -1, None) if weight_rank in (None, 2) else None
    if node.domain == "" and op == "Gemm":
        return Layout(0 if node.attrs.get("transB", 0) else 1, 1, 2)
    group = node.attrs.get("group", 1)
    if node.domain == DOMAIN and op == "UpsampleConv" and node.spec is not None:
        group = node.spec.keywords["_conv"].keywords.get("group", 1)
    elif node.domain == DOMAIN and op == "NormConv" and node.spec is not None:
        group = node.spec.keywords["_attrs"].get("group", 1)
    elif node.domain != "" or op not in ("Conv", "ConvTranspose"):
        return None
    return Layout(1 if op == "ConvTranspose" else 0, 1, 2, blockable=group == 1)


def decode_block(q: np.ndarray | LoraStored, scale: np.ndarray | None, zero_point: np.ndarray | None, quant_axis: int,
                 block_axis: int, start: int, stop: int) -> np.ndarray:
    """float32 channels ``start:stop`` (along ``block_axis``) of ``(q - zero_point) * scale``, or of
    the float16 ``q`` widened when ``scale`` is None; with a LoRA's change added when ``q`` carries one."""
    if isinstance(q, LoraStored):  # a LoRA's change, added to each decoded block (frame.engine.lora)
        block = decode_block(q.stored, scale, zero_point, quant_axis, block_axis, start, stop)
        q.add_to(block, block_axis, start, stop)
        return block
    index = [slice(None)] * q.ndim
    index[block_axis] = slice(start, stop)
    if scale is None:
        return q[tuple(index)].astype(np.float32)
    rank, axis = q.ndim, quant_axis % q.ndim

    def per_channel(values: np.ndarray) -> np.ndarray:
        if values.size == 1:
            return values.reshape(()).astype(np.float32)
        shape = [1] * rank
        shape[axis] = -1
        shaped = values.astype(np.float32).reshape(shape)
        return shaped[tuple(index)] if axis == block_axis % rank else shaped

    step = per_channel(scale)
    block = np.multiply(q[tuple(index)], step, dtype=np.float32)  # q * scale in one pass, then the offset
    if zero_point is not None and np.any(zero_point):
        block -= per_channel(zero_point) * step
    return block


def channel_blocks(shape: tuple[int, ...], axis: int) -> list[tuple[int, int]]:
    """Blocks of about BLOCK_BYTES of float32 but at least MIN_BLOCK_CHANNELS channels, equal in size:
    a GEMM with fewer output rows loses most of its speed to thread synchronisation (measured with
    two OpenBLAS threads: 160 rows × 11520 × 256 ran at 3 GFLOP/s against 40-50 from 288 rows up).
    Also the plan's count of a row-streamed weight's blocks (``plan_costs``)."""
    channels = shape[axis]
    if channels <= 0:
        return []
    per_channel = max(1, (math.prod(shape) // max(channels, 1)) * 4)
    step = max(1, MIN_BLOCK_CHANNELS, BLOCK_BYTES // per_channel)
    count = -(-channels // step)
    step = -(-channels // count)
    return [(start, min(channels, start + step)) for start in range(0, channels, step)]


def _bias_block(bias: np.ndarray | None, start: int, stop: int, channels: int) -> np.ndarray | None:
    if bias is None or bias.ndim == 0 or bias.shape[-1] != channels:
        return bias
    return bias[..., start:stop]


def _stored_block(q, scale, zero_point, quant_axis: int, axis: int, start: int, stop: int) -> np.ndarray:
    """``decode_block`` of channels start:stop, reading them first when ``q`` is WeightRows (axis 0)."""
    if not isinstance(q, WeightRows):
        return decode_block(q, scale, zero_point, quant_axis, axis, start, stop)
    rows = q.read(start, stop)

    def local(values):
        if values is None or values.size == 1 or quant_axis % q.ndim != 0:
            return values
        return values.reshape(-1)[start:stop]

    return decode_block(rows, local(scale), local(zero_point), quant_axis, axis, 0, stop - start)


STORED_INPUTS_END = 4  # a DecodedWeight node's inputs: data, stored weight, scale, zero point, then the op's others


def decoded_weight_op(x: np.ndarray, q: np.ndarray | WeightRows, scale: np.ndarray | None = None,
                      zero_point: np.ndarray | None = None, /, *rest: np.ndarray | None, _kernel, _layout: Layout,
                      _quant_axis: int = 1) -> np.ndarray:
    """The fused node's kernel: ``_kernel(x, weight, *rest)`` computed per block of output channels."""
    return decoded_weight_items([x], q, scale, zero_point, *rest, _kernel=_kernel, _layout=_layout,
                                _quant_axis=_quant_axis)[0]


def decoded_weight_items(xs: list[np.ndarray], q: np.ndarray | WeightRows, scale: np.ndarray | None = None,
                         zero_point: np.ndarray | None = None, /, *rest: np.ndarray | None, _kernel,
                         _layout: Layout, _quant_axis: int = 1,
                         item_rests: list[tuple] | None = None) -> list[np.ndarray]:
    """``decoded_weight_op`` for several data inputs that share the weight (a shared run's items): each
    block is decoded, and read when ``q`` is WeightRows, once for all of them, so guidance's two passes
    still read a row-streamed weight once per step. ``item_rests``: each item's own operands after the
    stored weight, where they differ per item (a NormConv's GroupNorm table), else ``rest`` for all."""
    rests = [tuple(r) for r in item_rests] if item_rests is not None else [rest] * len(xs)
    weight_axis = _layout.weight_axis % q.ndim
    blocks = channel_blocks(q.shape, weight_axis) if _layout.blockable else []
    if len(blocks) <= 1:
        weight = _stored_block(q, scale, zero_point, _quant_axis, weight_axis, 0, q.shape[weight_axis])
        return [_kernel(x, weight, *item_rest) for x, item_rest in zip(xs, rests)]
    channels = q.shape[weight_axis]
    outs: list[np.ndarray | None] = [None] * len(xs)
    bias_at = None if _layout.bias_input is None else _layout.bias_input - 2
    try:
        for index, (start, stop) in enumerate(blocks):
            weight = _stored_block(q, scale, zero_point, _quant_axis, weight_axis, start, stop)
            if isinstance(q, WeightRows) and index + 1 < len(blocks):
                q.read_ahead(*blocks[index + 1])  # read while this block computes
            for item, (x, item_rest) in enumerate(zip(xs, rests)):
                args = list(item_rest)
                if bias_at is not None and bias_at < len(args):
                    args[bias_at] = _bias_block(args[bias_at], start, stop, channels)
                part = _kernel(x, weight, *args)
                axis = _layout.output_axis % part.ndim
                if outs[item] is None:
                    outs[item] = np.empty(part.shape[:axis] + (channels,) + part.shape[axis + 1:], dtype=part.dtype)
                target = [slice(None)] * part.ndim
                target[axis] = slice(start, stop)
                outs[item][tuple(target)] = part
                del part, args
            del weight
    finally:
        if isinstance(q, WeightRows):
            q.drop_ahead()
    return outs


STREAM_ROWS_MIN_BYTES = 4 << 20



def _wrapped(query: CostQuery) -> tuple[str, dict]:
    """(function name, attributes) of the kernel a DecodedWeight node wraps."""
    kernel = query.keywords.get("_kernel")
    func = getattr(kernel, "func", kernel)
    return getattr(func, "__name__", ""), getattr(kernel, "keywords", {}) or {}


def _scratch(query: CostQuery) -> int:
    """One float32 block of output channels (about ``BLOCK_BYTES``, at least ``MIN_BLOCK_CHANNELS``),
    that block's part of the output and the wrapped kernel's own scratch for the block; for a
    row-streamed weight (``query.row_bytes``) its stored block while the block is decoded
    (``_stored_block`` returns the float32 block and drops it; the previous decoded block is deleted
    before) and the next block's, read while this one computes (``weight_rows``)."""
    ref = query.weights.get(query.inputs[1]) if len(query.inputs) > 1 else None
    x, out = query.shape(0), query.out()
    if ref is None or not has_dims(x) or not has_dims(out) or not ref.shape:
        return 0
    name, attrs = _wrapped(query)
    layout_axis = 1 if name in ("conv_transpose",) or (len(ref.shape) == 2 and name != "gemm") else 0
    if name == "gemm":
        layout_axis = 0 if attrs.get("transB", 0) else 1
    channels = ref.shape[layout_axis]
    per_channel = max(1, math.prod(ref.shape) // max(channels, 1)) * FLOAT_BYTES
    spans = channel_blocks(tuple(ref.shape), layout_axis)
    if not spans:
        return 0
    blocks, block_channels = len(spans), spans[0][1] - spans[0][0]
    block = block_channels * per_channel
    part = math.prod(out) * block_channels // channels * FLOAT_BYTES if blocks > 1 else 0  # type: ignore[arg-type]
    w_block = tuple(block_channels if i == layout_axis else d for i, d in enumerate(ref.shape))
    out_block = tuple(block_channels if i == 1 else d for i, d in enumerate(out))  # type: ignore[arg-type]
    inner = 0
    if name == "conv":
        inner = conv_image_scratch(x, w_block, out_block, attrs)  # type: ignore[arg-type]
    elif name == "upsample_conv":
        inner = upsample_conv_scratch(x, w_block, out_block)  # type: ignore[arg-type]
    elif name == "norm_conv":
        inner = norm_conv_scratch(x, w_block, out_block, attrs.get("_attrs", {}),  # type: ignore[arg-type]
                                  attrs.get("_full_channels"))
    stored_block = query.row_bytes * block_channels // channels
    ahead = stored_block if blocks > 1 else 0  # the next block's rows, read during this one's compute
    return block + max(part + inner + ahead, stored_block)


def _share(query: CostQuery) -> float:
    """The wrapped kernel's share of the ONNX multiply-adds (a wrapped upsampling conv: 4/9)."""
    return upsample_conv_share(query.shape(0)) if "upsample" in _wrapped(query)[0] else 1.0


def _decoded(query: CostQuery) -> int:
    """The whole weight (input 1), decoded block by block on every call."""
    ref = query.weights.get(query.inputs[1]) if len(query.inputs) > 1 else None
    return math.prod(ref.shape) if ref is not None else 0


COST = Cost(scratch=_scratch, share=_share, decoded=_decoded)

def stream_weight_rows(steps) -> int:
    """Mark DecodedWeight steps whose stored weight (≥ STREAM_ROWS_MIN_BYTES, output channels on axis 0,
    read only by that step) is read block by block (``WeightRows``) instead of whole before the step.
    Call after ``graph.make_plan`` and before the provider is prepared; returns how many were marked."""
    marked = 0
    for step in steps:
        node = step.node
        if node.domain != DOMAIN or node.op_type != "DecodedWeight" or node.spec is None:
            continue
        layout = node.spec.keywords.get("_layout")
        ref = next((r for r in step.fetch if r.name == node.inputs[1]), None)
        if layout is None or not layout.blockable or ref is None or ref.value is not None:
            continue
        if (ref.nbytes < STREAM_ROWS_MIN_BYTES or layout.weight_axis % len(ref.shape) != 0
                or ref not in step.release or node.inputs.count(ref.name) != 1):
            continue
        step.fetch.remove(ref)
        step.release.remove(ref)
        step.weight_rows = ref
        marked += 1
    return marked


# ------------------------------------------------------------------------------------------ the pass
@dataclass
class _Source:
    """Where a weight operand really comes from: the stored tensor and, for 8-bit, its DequantizeLinear."""

    stored: str
    scale: str = ""
    zero_point: str = ""
    quant_axis: int = 1
    float16: bool = False


def _trace(name: str, index: GraphIndex) -> _Source | None:
    """Follow ``name`` back through Cast(to=FLOAT) nodes to a DequantizeLinear of an initializer or to
    a float16 initializer."""
    weights = index.weights
    while name not in weights:
        i = index.producer_of(name)
        if i is None or name in index.outputs:
            return None
        node = index.nodes[i]
        if node.op_type == "Cast" and node.attrs.get("to") == FLOAT:
            name = node.inputs[0]
            continue
        if node.op_type == "DequantizeLinear" and node.inputs[0] in weights and not node.attrs.get("block_size"):
            inputs = node.inputs + ["", ""]
            return _Source(node.inputs[0], inputs[1], inputs[2], node.attrs.get("axis", 1))
        return None
    ref = weights[name]
    return _Source(name, float16=True) if ref.dtype == np.float16 else None


# Kernels whose choice of algorithm depends on the output channel count: given the whole weight's count,
# so a block of output channels runs the algorithm the whole conv would (a 1920 -> 640 conv decoded in
# blocks of 214 channels looked "narrow" and padded its 31 MB input whole, see ops.conv).
_CHANNEL_AWARE = {("", "Conv"), (DOMAIN, "NormConv")}


def _fused(node: Node, source: _Source, layout: Layout, weights: dict[str, WeightRef]) -> Node:
    attrs = dict(node.attrs)
    if (node.domain, node.op_type) in _CHANNEL_AWARE and len(weights[source.stored].shape) > 1:
        attrs["_full_channels"] = weights[source.stored].shape[0]
    fn = partial(decoded_weight_op, _kernel=partial(node.spec.fn, **attrs), _layout=layout,
                 _quant_axis=source.quant_axis)
    spec = OpSpec("DecodedWeight", 1, fn, DOMAIN, cost=COST)
    inputs = [node.inputs[0], source.stored, source.scale, source.zero_point, *node.inputs[2:]]  # STORED_INPUTS_END
    return Node(f"{node.name}/decoded_weight", "DecodedWeight", DOMAIN, inputs, list(node.outputs),
                {}, spec)


def fuse_weight_decoding(nodes: list[Node], graph_outputs: set[str], weights: dict[str, WeightRef]
                         ) -> tuple[list[Node], int]:
    """``nodes`` with every decodable weight operand fused into its op (see the module docstring),
    and how many ops were fused."""
    index = GraphIndex(nodes, graph_outputs, weights)
    replaced: dict[int, Node] = {}
    fp16_fused: dict[str, set[int]] = {}
    for i, node in enumerate(nodes):
        if len(node.inputs) < 2 or not node.inputs[1] or node.spec is None:
            continue
        source = _trace(node.inputs[1], index)
        layout = layout_of(node, len(weights[source.stored].shape)) if source is not None else None
        if layout is None:
            continue
        replaced[i] = _fused(node, source, layout, weights)
        if source.float16:
            fp16_fused.setdefault(source.stored, set()).add(i)
    rewired = _rewire_gathers(index)
    for name, fused in fp16_fused.items():
        if _all_uses_fused(name, fused | set(rewired), index):
            weights[name].keep_float16 = True
        else:  # another use needs it widened by the executor: leave this weight's ops as exported
            for i in fused:
                del replaced[i]
    replaced.update({i: n for i, n in rewired.items() if i not in replaced})
    if replaced:
        log.debug("decoding %d weight(s) inside their ops", len(replaced))
    return rewrite_nodes(nodes, replaced, set()), len(replaced)


def _rewire_gathers(index: GraphIndex) -> dict[int, Node]:
    """Gather(Cast(fp16 table)) → Gather(fp16 table): the executor widens only the gathered rows."""
    rewired: dict[int, Node] = {}
    for i, node in enumerate(index.nodes):
        if node.op_type != "Gather" or node.domain or not node.inputs or node.inputs[0] in index.weights:
            continue
        source = _trace(node.inputs[0], index)
        if source is not None and source.float16:
            spec = OpSpec("Gather", node.spec.since, partial(widened_gather, _kernel=node.spec.fn), "",
                          cost=node.spec.cost)
            rewired[i] = Node(node.name, node.op_type, node.domain, [source.stored, *node.inputs[1:]],
                              list(node.outputs), node.attrs, spec)
    return rewired


def widened_gather(table: np.ndarray, *args, _kernel, **attrs) -> np.ndarray:
    """A rewired Gather run by its kernel (when the executor cannot read just the rows): float32 out."""
    result = _kernel(table, *args, **attrs)
    return result.astype(np.float32) if result.dtype == np.float16 else result


def _all_uses_fused(name: str, fused: set[int], index: GraphIndex) -> bool:
    """True if every path from weight ``name`` through Cast nodes ends in a fused (or rewired) node."""
    for i in index.consumers.get(name, []):
        if i in fused:
            continue
        node = index.nodes[i]
        if node.op_type != "Cast" or node.domain or not all(
                _all_uses_fused(out, fused, index) for out in node.outputs if out):
            return False
    return True
