"""Which ONNX initializer each LoRA module changes, found from the graph's node names.

torch's exporter names an op after the module that ran it (``/model/down_blocks.0/attentions.0/
transformer_blocks.0/attn1/to_q/MatMul``) but often renames the weight (``onnx::MatMul_1744``, stored
``[in, out]``: the Linear weight transposed). So the module path comes from the node name (its
segments but the last, ``.`` read as ``_`` like kohya's keys, any leading wrapper segments such as
``model`` allowed), and the weight is the node's input 1, followed back through ``Cast`` and
``DequantizeLinear`` to the stored initializer (fp16 and 8-bit exports). The layout follows the op:
MatMul ``[in, out]``, Gemm ``[out, in]`` (transB) or ``[in, out]``, Conv ``[out, in, kh, kw]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from frame.engine.graph import Node, producer_index
from frame.engine.io.weights import WeightRef
from frame.engine.lora.delta import WeightDelta
from frame.engine.lora.files import LoraModule
from frame.engine.lora.sgm import candidates, is_sgm


@dataclass(frozen=True)
class LoraUse:
    """One LoRA's modules for one model (component) at the owner's scale."""

    label: str  # the LoRA's name, for messages
    modules: dict[str, LoraModule]
    scale: float


@dataclass
class MatchReport:
    applied: dict[str, int] = field(default_factory=dict)  # LoRA label -> modules applied
    unmatched: dict[str, list[str]] = field(default_factory=dict)  # LoRA label -> "module: why"

    def lines(self) -> list[str]:
        out = []
        for label, count in self.applied.items():
            missing = self.unmatched.get(label, [])
            out.append(f"{label}: {count} module(s) applied" + (f", {len(missing)} matched nothing" if missing else ""))
            out.extend(f"  not applied: {why}" for why in missing)
        return out


@dataclass(frozen=True)
class _Target:
    node: str
    weight: str
    out_axis: int


def _stored_weight(name: str, nodes: list[Node], producer: dict[str, int], weights: dict[str, WeightRef]) -> str | None:
    while name not in weights:
        i = producer.get(name)
        if i is None or nodes[i].domain or nodes[i].op_type not in ("Cast", "DequantizeLinear"):
            return None
        name = nodes[i].inputs[0]
    return name


def _out_axis(node: Node, rank: int) -> int | None:
    if node.domain:
        return None
    if node.op_type == "MatMul" and rank == 2:
        return 1
    if node.op_type == "Gemm" and rank == 2:
        return 0 if node.attrs.get("transB", 0) else 1
    if node.op_type == "Conv" and node.attrs.get("group", 1) == 1:
        return 0
    return None


def module_keys(node_name: str) -> list[str]:
    """Every module spelling a node name can answer to: its path with ``_`` for ``.`` and ``/``,
    longest first, dropping leading segments (an exporter's wrapper, e.g. ``model``)."""
    segments = [s for s in node_name.strip("/").split("/") if s][:-1]
    return ["_".join(segments[i:]).replace(".", "_") for i in range(len(segments))]


def targets(nodes: list[Node], weights: dict[str, WeightRef]) -> dict[str, _Target | None]:
    """Module key -> the weight it changes (None: two ops answer to that key)."""
    producer = producer_index(nodes)
    index: dict[str, _Target | None] = {}
    for node in nodes:
        if len(node.inputs) < 2 or not node.name:
            continue
        stored = _stored_weight(node.inputs[1], nodes, producer, weights)
        axis = None if stored is None else _out_axis(node, len(weights[stored].shape))
        if axis is None:
            continue
        target = _Target(node.name, stored, axis)
        for key in module_keys(node.name):
            index[key] = target if key not in index else None
    return index


def _layers_per_block(index: dict) -> int:
    """Resnets per down block, from the export's own names (SDXL and SD 1.5: 2)."""
    found = [int(m[1]) for key in index if (m := re.match(r"down_blocks_0_resnets_(\d+)_", key))]
    return max(found) + 1 if found else 2


def _fits(module: LoraModule, shape: tuple[int, ...], out_axis: int) -> bool:
    inner = int(np.prod(module.down.shape[1:]))
    if out_axis == 0:
        return shape[0] == module.up.shape[0] and int(np.prod(shape[1:])) == inner
    return len(shape) == 2 and shape[1] == module.up.shape[0] and shape[0] == inner


def match_loras(nodes: list[Node], weights: dict[str, WeightRef], uses: list[LoraUse]
                ) -> tuple[dict[str, WeightDelta], MatchReport]:
    """The change of every weight the LoRAs reach, by initializer name, and what reached nothing."""
    index = targets(nodes, weights) if uses else {}
    deltas: dict[str, WeightDelta] = {}
    report = MatchReport()
    for use in uses:
        applied, missing = 0, report.unmatched.setdefault(use.label, [])
        for key, module in use.modules.items():
            if key not in index and key.startswith("text_model_"):  # transformers 5 exports drop text_model
                key = key[len("text_model_"):]
            if key not in index and is_sgm(key):  # sd-scripts' SDXL names
                key = next((k for k in candidates(key, _layers_per_block(index)) if k in index), key)
            target = index.get(key)
            if target is None:
                missing.append(f"{key} ({'two layers answer to it' if key in index else 'no layer of that name'})")
                continue
            shape = tuple(weights[target.weight].shape)
            if not _fits(module, shape, target.out_axis):
                missing.append(f"{key} (up {list(module.up.shape)} / down {list(module.down.shape)} do not fit "
                               f"the layer's weight {list(shape)}: a LoRA for another model?)")
                continue
            delta = deltas.setdefault(target.weight,
                                      WeightDelta(target.weight, shape, target.out_axis, [], target.node))
            delta.terms.append((module, use.scale))
            applied += 1
        report.applied[use.label] = applied
        if not missing:
            del report.unmatched[use.label]
    return deltas, report
