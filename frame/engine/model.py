"""``load_model`` and ``Model``: read the structure, validate every node, plan, then run on demand.

Loading reads only the graph structure (the protobuf scanner skips embedded weights), binds and
validates every node (all problems reported in one ``UnsupportedModelError`` before any compute),
rewrites fp16 to float32 compute, folds constants, fuses attention, SiLU, GELU, LayerNorm, Resize→Conv,
Conv→BatchNormalization/affine chains, GroupNorm→SiLU→Conv, 8-bit/fp16 weight decoding into the ops
that use them and GEGLU feed-forwards into channel blocks, and
plans fetch/free per step. ``run`` checks the feeds against the declared inputs and executes the plan,
streaming weights through the provider.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from frame.engine import graph as g
from frame.engine import onnxstream
from frame.engine import ops as _ops  # noqa: F401  (importing the package fills the kernel registry)
from frame.engine.errors import ModelFormatError, NodeError, UnsupportedModelError
from frame.engine.executor import Executor
from frame.engine.io import cached_model
from frame.engine.io.fetch_stats import format_bytes
from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.protobuf_index import scan_model
from frame.engine.io.sources import SourcePool, is_url
from frame.engine.io.weight_cache import WeightCache
from frame.engine.io.weights import collect_weights, numpy_dtype
from frame.engine.io_check import check_feeds, symbolic_conflicts
from frame.engine.lora import LoraUse, WeightDelta, match_loras
from frame.engine.lora.provider import LoraProvider
from frame.engine.memory import return_freed_buffers_to_os, trim_free_memory
from frame.engine.passes.const_fold import fold_constants
from frame.engine.passes.order import PassContext, run_passes
from frame.engine.passes.sliced_attention import AttentionConfig
from frame.engine.passes.weight_decoding import stream_weight_rows
from frame.engine.plan_cache import PlanCache
from frame.engine.planned import Planned, TensorInfo
from frame.engine.providers import WeightsProvider, make_provider
from frame.engine.subgraphs import BodyBinder, compile_bodies, fetch_order
from frame.errors import UsageError
from frame.redact import redact_url

log = logging.getLogger(__name__)


def tensor_info(value: onnx.ValueInfoProto) -> TensorInfo:
    tensor_type = value.type.tensor_type
    if value.type.WhichOneof("value") is None:
        return TensorInfo(value.name, None, None)
    if not value.type.HasField("tensor_type"):
        raise ModelFormatError(f"graph input/output {value.name!r} is not a tensor")
    dtype = numpy_dtype(tensor_type.elem_type, f"graph input/output {value.name!r}")
    if not tensor_type.HasField("shape"):
        return TensorInfo(value.name, dtype, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in tensor_type.shape.dim)
    return TensorInfo(value.name, dtype, dims)


@dataclass
class _Structure:
    proto: onnx.ModelProto
    weights: dict
    nodes: list[g.Node]
    problems: list[str]


def _scanned(pool: SourcePool, source: str):
    """The file scanned for its structure; with the weight cache on, a URL's structure is kept in the
    cache and read from there (``frame.engine.io.cached_model``: paints while the server is off)."""
    settings = pool.http_settings
    if not (is_url(source) and settings.cache_enabled):
        return scan_model(pool.get(source), chunk=256 << 10 if is_url(source) else 1 << 20)
    cache = WeightCache(settings.cache_dir, settings.cache_max_bytes)
    http = pool.get(source)
    version = cached_model.validator(cache, http)
    scanned = cached_model.load_structure(cache, source, version)
    if scanned is None:
        scanned = scan_model(http, chunk=256 << 10)
        cached_model.store_structure(cache, source, version, scanned)
    return scanned


StructureTransform = Callable[[onnx.ModelProto, dict], onnx.ModelProto]


def read_structure(source: str | onnxstream.OnnxStreamSource, transform: StructureTransform | None = None,
                   http: HttpSettings | None = None) -> _Structure:
    """The model without weight bytes, with every node bound (or a problem line for it).

    An OnnxStream model (a folder holding model.txt, that file, or a URL to either) is read by
    ``frame.engine.onnxstream`` into the same structure. ``transform(proto, weights)`` rewrites an
    ONNX structure before its nodes are bound (``dynamic_shapes.dynamic_structure``); initializers it
    adds carry their data inline, the weights it keeps are still streamed from the file. ``http``: how
    a URL is read (token, retries, the weight cache's kept structure; None: the defaults).
    """
    if onnxstream.is_onnxstream_source(source):
        if transform is not None:
            raise UsageError(f"{source}: an OnnxStream model cannot be rewritten at load")
        return onnxstream.read_structure(source, http)  # type: ignore[return-value]
    pool = SourcePool(http)
    try:
        scanned = _scanned(pool, source)
    finally:
        pool.close()
    try:
        proto = onnx.ModelProto.FromString(scanned.structure)
    except Exception as exc:  # protobuf's DecodeError
        raise ModelFormatError(f"{source}: not a valid ONNX model ({exc})") from exc
    if not proto.HasField("graph"):
        raise ModelFormatError(f"{source}: the file has no graph (is it an ONNX model?)")
    weights = collect_weights(proto.graph, source, scanned.embedded)
    if transform is not None:
        proto = transform(proto, weights)
        weights = collect_weights(proto.graph, source, scanned.embedded)
    opsets = g.opset_table(proto)
    nodes, problems = g.build_nodes(proto.graph, opsets)
    BodyBinder(source, scanned, opsets).bind(proto.graph, nodes, problems)  # If/Loop/Scan bodies
    return _Structure(proto, weights, nodes, problems)


def plan_structure(structure: _Structure, attention: AttentionConfig, loras: Sequence[LoraUse] = ()) -> Planned:
    """What ``load_model`` makes of a graph before a provider is attached: nodes in order, constants
    folded, LoRA changes matched, the engine's rewrites run and the fetch/free plan made. This is the
    load's work that a kept plan (``frame.engine.plan_cache``) saves."""
    graph = structure.proto.graph
    weights = structure.weights
    inputs = [tensor_info(v) for v in graph.input if v.name not in weights]
    outputs = [tensor_info(v) for v in graph.output]
    op_counts = Counter(n.op_type for n in structure.nodes)
    input_names = {i.name for i in inputs}
    output_names = {o.name for o in outputs}
    nodes = g.topological_order(structure.nodes, input_names | set(weights))
    compile_bodies(nodes)
    g.compute_in_float32(nodes)
    nodes = fold_constants(nodes, weights, output_names)
    deltas, lora_report = match_loras(nodes, weights, list(loras))
    _merge_inline(deltas, weights)
    opset = g.opset_table(structure.proto)[""]
    context = PassContext(input_names, output_names, weights, attention, opset)
    nodes, rewrites = run_passes(nodes, context)  # rewrites per pass: {"attention": 16, ...}
    produced = {o for n in nodes for o in n.outputs} | input_names
    for out in outputs:
        if out.name not in produced:
            raise ModelFormatError(f"graph output {out.name!r} is produced by no node")
    steps = g.make_plan(nodes, weights, input_names, output_names)
    rewrites["row_streamed"] = stream_weight_rows(steps)
    return Planned(weights, inputs, outputs, op_counts, lora_report, rewrites, steps, deltas)


class Model:
    """A loaded model; see ``load_model``. Use as a context manager or call ``close()``.

    One ``run`` at a time: the plan and the provider's read-ahead follow a single execution. It is the
    engine's ``Runnable`` (``frame.engine.runnable``), the interface the diffusion pipeline calls.
    """

    shares_weight_reads = True  # run_shared fetches each weight once for every feed

    def __init__(self, source: str, provider: WeightsProvider, planned: Planned, attention: AttentionConfig) -> None:
        self.source = source
        self.provider = provider
        self.attention = attention
        self._weights = planned.weights
        self.inputs, self.outputs = list(planned.inputs), list(planned.outputs)
        self.op_counts = planned.op_counts
        self.lora_report, self.rewrites = planned.lora_report, planned.rewrites
        self.steps = planned.steps
        self.streamed_weights = fetch_order(self.steps)  # bodies' weights at their node's step
        if planned.deltas:
            _check_lora_decoding(self.steps, planned.deltas)
            provider = self.provider = LoraProvider(provider, planned.deltas)
        provider.prepare(self.streamed_weights)
        self._executor = Executor(self.steps, provider, [o.name for o in self.outputs])
        self.last_run_fetched = None  # FetchSnapshot: bytes the last run fetched per source kind

    @property
    def weight_bytes(self) -> int:
        return sum(ref.nbytes for ref in self._weights.values())

    def override_input_shape(self, name: str, shape: tuple[int | str | None, ...]) -> None:
        """Accept feeds of ``shape`` (ints, symbolic names or None) for input ``name`` instead of the
        declared shape: for static exports known to run at other sizes (``static_shapes.probe``)."""
        for i, info in enumerate(self.inputs):
            if info.name == name:
                self.inputs[i] = TensorInfo(name, info.dtype, tuple(shape))
                return
        raise UsageError(f"the model has no input {name!r}")

    def set_attention(self, slices: int | None = None, budget_bytes: int | None = None) -> None:
        """Query-row slices per head (None = automatic) and/or the score-block memory budget."""
        if slices is not None and slices < 1:
            raise UsageError(f"attention slices must be at least 1, got {slices}")
        self.attention.slices = slices
        if budget_bytes is not None:
            self.attention.budget_bytes = int(budget_bytes)

    def set_readahead(self, budget_bytes: int) -> bool:
        """Read the weights ahead within ``budget_bytes`` from now on; False when the provider reads
        nothing ahead (``nocache``, ``ram``, a provider object without ``set_budget``)."""
        setter = getattr(self.provider, "set_budget", None)  # a LoraProvider passes it to the one it wraps
        if setter is None:
            return False
        setter(int(budget_bytes))
        return True

    def run(self, feeds: Mapping[str, np.ndarray], progress: Callable[[float], None] | None = None,
            rng: object | None = None,
            overrides: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None) -> dict[str, np.ndarray]:
        """Outputs by name for ``feeds``; ``progress(fraction)`` is called after every node.

        ``rng``: what random ops (RandomNormalLike in exported VAE encoders) draw from, any object with
        numpy Generator's ``standard_normal``/``random``; None: each node's ``seed`` or fresh entropy.
        ``overrides``: intermediate tensor name -> function replacing its value as it is produced (a
        text encoder's token-embedding rows, ``token_table``), so a run can change one activation
        without a rewritten model.
        """
        arrays = check_feeds(feeds, self.inputs)
        arrays = {k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in arrays.items()}
        before = self.fetch_stats
        try:
            results = self._executor.run(arrays, progress, rng, overrides)
        except NodeError as exc:
            conflicts = symbolic_conflicts(feeds, self.inputs)
            if not conflicts:
                raise
            hint = "; ".join(conflicts)
            raise NodeError(f"{exc}\n  (the inputs disagree on a dimension the model names: {hint})") from exc
        self._note_fetched(before)
        return {o.name: _as_declared(results[o.name], o.dtype) for o in self.outputs}

    def token_table(self, input_name: str = "input_ids") -> tuple[str, int | None] | None:
        """(output name, row width) of the Gather that looks ``input_name`` up in a table, e.g. a CLIP text
        encoder's token embedding (``Gather(weight, Reshape(input_ids))``); None when there is none. The
        width is None when the table is computed in the graph rather than stored."""
        producers = {out: step.node for step in self.steps for out in step.node.outputs if out}
        for step in self.steps:
            node = step.node
            if node.op_type != "Gather" or len(node.inputs) < 2 or node.attrs.get("axis", 0) != 0:
                continue
            source = node.inputs[1]
            while source in producers and producers[source].op_type in _PASS_THROUGH and producers[source].inputs:
                source = producers[source].inputs[0]
            if source != input_name:
                continue
            ref = step.gather_rows or self._weights.get(node.inputs[0])
            if ref is not None and len(ref.shape) != 2:
                continue
            return node.outputs[0], (int(ref.shape[1]) if ref is not None else None)
        return None

    def _note_fetched(self, before) -> None:
        now = self.fetch_stats
        self.last_run_fetched = None if now is None or before is None else now - before

    def run_shared(self, feeds: list[Mapping[str, np.ndarray]], progress: Callable[[float], None] | None = None
                   ) -> list[dict[str, np.ndarray]]:
        """``run`` for several feeds in one pass over the plan: every weight is fetched once and used by
        every item while it is held (``Executor.run_shared``). Same outputs as separate runs."""
        checked = []
        for item in feeds:
            arrays = check_feeds(item, self.inputs)
            checked.append({k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in arrays.items()})
        before = self.fetch_stats
        results = self._executor.run_shared(checked, progress)
        self._note_fetched(before)
        return [{o.name: _as_declared(r[o.name], o.dtype) for o in self.outputs} for r in results]

    @property
    def fetch_stats(self):
        """Bytes this model's weights provider has read so far, per kind of source (``FetchSnapshot``);
        None for a provider that does not count (a custom one without ``sources``)."""
        sources = getattr(self.provider, "sources", None)
        return sources.stats.snapshot() if sources is not None else None

    def close(self) -> None:
        """Stop the provider's reading and give freed memory back (the next model starts on less).
        Says how much of its weights came from the weight cache, when any did (``model.cache``)."""
        stats = self.fetch_stats
        if stats is not None and stats.bytes.get("cache"):
            log.info("%s: %s of weights read from the weight cache, %s over HTTP", redact_url(str(self.source)),
                     format_bytes(stats.bytes["cache"]), format_bytes(stats.bytes.get("http", 0)))
        close = getattr(self.provider, "close", None)
        if close is not None:
            close()
        trim_free_memory()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_PASS_THROUGH = ("Reshape", "Cast", "Unsqueeze", "Squeeze", "Flatten", "Identity")


def _merge_inline(deltas: dict[str, WeightDelta], weights: dict) -> None:
    """A changed weight stored inline in the graph (no provider reads it) is merged once, at load."""
    for name in [n for n, d in deltas.items() if weights[n].value is not None]:
        ref, delta = weights[name], deltas.pop(name)
        ref.value = delta.merged(np.asarray(ref.value, dtype=np.float32), delta.factors()).astype(ref.value.dtype)


_DECODING_OPS = {("frame.engine", "DecodedWeight"), ("frame.engine", "GegluFF")}  # add the change per block


def _check_lora_decoding(steps, deltas: dict[str, WeightDelta]) -> None:
    """Mark the changed weights whose every reader decodes them block by block (``WeightDelta.in_op``:
    the change is added per block, no merged copy). An 8-bit weight read otherwise (a DequantizeLinear
    left in the graph) would lose the change, so that is refused at load."""
    readers: dict[str, set[tuple[str, str]]] = {}
    for step in steps:
        node = step.node
        for name in node.inputs:
            if name in deltas:
                readers.setdefault(name, set()).add((node.domain, node.op_type))
        if node.op_type == "DequantizeLinear" and not node.domain and node.inputs and node.inputs[0] in deltas:
            raise UsageError(f"{deltas[node.inputs[0]].label}: a LoRA cannot change this 8-bit weight "
                             "(it is decoded outside its op); use the model's fp16 or float32 files")
    for name, delta in deltas.items():
        delta.in_op = bool(readers.get(name)) and readers[name] <= _DECODING_OPS


def _as_declared(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    array = np.asarray(array)
    return array if dtype is None or array.dtype == dtype else array.astype(dtype)


def load_model(source: str | onnxstream.OnnxStreamSource, weights: str | WeightsProvider = "prefetch",
               attention_slices: int | None = None, attention_budget_bytes: int = 16 << 20,
               transform: StructureTransform | None = None, loras: Sequence[LoraUse] = (),
               http: HttpSettings | None = None, plans: str | os.PathLike | None = None) -> Model:
    """Load an ONNX model, or an OnnxStream model folder, from a path or http(s) URL for streaming execution.

    ``weights``: "nocache", "prefetch" (default; "http" prefetching for URLs), "ram", "http", or a
    provider object (see ``frame.engine.providers.base``). ``attention_slices`` fixes the query-row
    slices per attention head; by default they follow ``attention_budget_bytes``. ``transform``
    rewrites the structure before it is bound (see ``read_structure``). ``loras``: LoRA changes added
    to their weights as they stream (``frame.engine.lora``); ``model.lora_report`` says what matched.
    ``http``: how URLs are read, by the structure scan and the weights provider (None: the defaults).
    ``plans``: a folder where the plan of a local ONNX file is kept and read back on later loads
    (``frame.engine.plan_cache``: no parsing or rewriting then; a model with LoRAs is always planned).
    Raises UnsupportedModelError listing every node that cannot run, before any compute.
    Side effect (glibc only, once per process): freed buffers over 1 MB go straight back to the OS
    (see ``frame.engine.memory``), which keeps peak RSS close to the live tensors.
    """
    if not isinstance(source, onnxstream.OnnxStreamSource):
        source = str(source)
    if attention_slices is not None and attention_slices < 1:
        raise UsageError(f"attention_slices must be at least 1, got {attention_slices}")
    return_freed_buffers_to_os()
    attention = AttentionConfig(attention_slices, attention_budget_bytes)
    cache = key = None
    if plans is not None and isinstance(source, str) and not is_url(source) and not loras \
            and not onnxstream.is_onnxstream_source(source):
        cache = PlanCache(plans)
        key = cache.key(source, transform, attention)
    planned = cache.read(key, attention) if cache is not None and key is not None else None
    kept = planned is not None
    if planned is None:
        structure = read_structure(source, transform, http)
        if structure.problems:
            raise UnsupportedModelError(structure.problems)
        planned = plan_structure(structure, attention, loras)
        del structure
        if cache is not None and key is not None:
            cache.store(key, planned, attention)
    provider = make_provider(weights, is_url(str(source)), http)
    model = Model(source, provider, planned, attention)
    del planned
    trim_free_memory()  # parsing and the load-time rewrites leave ~16 MB of freed heap (SDXL UNet)
    log.info("loaded %s%s: %d nodes, %d weights (%.1f MB), rewrites %s", redact_url(str(source)),
             " (kept plan)" if kept else "", len(model.steps), len(model.streamed_weights),
             model.weight_bytes / 1e6,
             ", ".join(f"{name} {count}" for name, count in model.rewrites.items() if count) or "none")
    return model
