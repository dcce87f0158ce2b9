"""What a kept model plan may hold (``frame.engine.plan_format``): frame's own plain record types, field
by field, and the kernels it may name.

A plan file is hostile input (anyone who can write ``<state_dir>/model-plans`` can write one), so
nothing in it names a class or a function. A record is one of ``RECORDS``, by its short tag, rebuilt
from exactly the fields listed here, each checked against the types listed with it. A kernel is
either a registered ONNX op (``frame.engine.ops.registry``, named by domain, op type and opset) or
one of the engine's fused kernels in ``FUSED_KERNELS`` (named by its key there), or a
``functools.partial`` of those with data arguments. Adding a record type or a fused kernel means
adding it here; until then a plan holding it is simply not kept (``PlanCache.store`` logs it).
"""

from __future__ import annotations

import functools
import types
from collections import Counter
from itertools import repeat
from typing import Any

import numpy as np

from frame.engine.graph import Node, Step
from frame.engine.io.weights import WeightRef
from frame.engine.lora.matching import MatchReport
from frame.engine.ops.cost import OUTPUT_ONLY, VIEW, Cost
from frame.engine.ops.registry import OpSpec
from frame.engine.passes import (
    conv_affine,
    geglu,
    geglu_kernel,
    gelu,
    layer_norm,
    norm_conv,
    silu,
    sliced_attention,
    upsample_conv,
    weight_decoding,
)
from frame.engine.planned import Planned, TensorInfo
from frame.engine.subgraphs import Body

NONE = type(None)
KERNEL = (types.FunctionType, functools.partial)  # only ever made from the tables below


class ListOf:
    """A field holding a list (or, ``mapping=True``, a dict) whose items are all of ``types``."""

    def __init__(self, *item_types: type, mapping: bool = False) -> None:
        self.item_types = item_types
        self.mapping = mapping

    def check(self, value: Any) -> bool:
        if self.mapping:
            return type(value) is dict and all(map(isinstance, value.values(), repeat(self.item_types)))
        return type(value) is list and all(map(isinstance, value, repeat(self.item_types)))


# tag -> (class, ((field, allowed types or ListOf), ...)); fields in the order the file lists them
RECORDS: dict[str, tuple[type, tuple[tuple[str, Any], ...]]] = {
    "Planned": (Planned, (("weights", ListOf(WeightRef, mapping=True)), ("inputs", ListOf(TensorInfo)),
                          ("outputs", ListOf(TensorInfo)), ("op_counts", (Counter,)), ("lora_report", (MatchReport,)),
                          ("rewrites", (dict,)), ("steps", ListOf(Step)), ("deltas", (dict,)))),
    "Step": (Step, (("node", (Node,)), ("fetch", ListOf(WeightRef)), ("free", ListOf(str)),
                    ("release", ListOf(WeightRef)), ("reuse", (bool,)), ("gather_rows", (WeightRef, NONE)),
                    ("weight_rows", (WeightRef, NONE)))),
    "Node": (Node, (("name", (str,)), ("op_type", (str,)), ("domain", (str,)), ("inputs", ListOf(str)),
                    ("outputs", ListOf(str)), ("attrs", (dict,)), ("spec", (OpSpec, NONE)))),
    "WeightRef": (WeightRef, (("name", (str,)), ("dtype", (np.dtype,)), ("shape", (tuple,)), ("location", (str, NONE)),
                              ("offset", (int,)), ("length", (int,)), ("value", (np.ndarray, NONE)), ("index", (int,)),
                              ("keep_float16", (bool,)))),
    "TensorInfo": (TensorInfo, (("name", (str,)), ("dtype", (np.dtype, NONE)), ("shape", (tuple, NONE)))),
    "MatchReport": (MatchReport, (("applied", (dict,)), ("unmatched", (dict,)))),
    # a fused op's spec (a registered op's spec is named instead: ``plan_format``)
    "OpSpec": (OpSpec, (("op_type", (str,)), ("since", (int,)), ("fn", KERNEL), ("domain", (str,)),
                        ("inplace", (bool,)), ("validate", (NONE,)), ("attribute_names", (frozenset,)),
                        ("hints", (frozenset,)), ("cost", (Cost, NONE)))),
    "GegluPlan": (geglu_kernel.GegluPlan, (("gate_input", (str,)), ("gate_nodes", ListOf(Node)),
                                           ("gate_output", (str,)), ("hidden_first", (bool,)), ("slices", (tuple,)),
                                           ("constants", ListOf(str)), ("dying", ListOf(tuple)))),
    "Layout": (weight_decoding.Layout, (("weight_axis", (int,)), ("output_axis", (int,)), ("bias_input", (int, NONE)),
                                        ("blockable", (bool,)))),
    "Body": (Body, (("where", (str,)), ("inputs", ListOf(str)), ("outputs", ListOf(str)), ("nodes", ListOf(Node)),
                    ("weights", ListOf(WeightRef, mapping=True)), ("outer", ListOf(str)), ("output_types", (list,)),
                    ("steps", ListOf(Step)))),
}
RECORD_TAGS = {cls: tag for tag, (cls, _fields) in RECORDS.items()}

# the module functions the engine's rewrites build fused kernels from (``frame.engine.passes``), and
# the costs those kernels declare (``frame.engine.ops.cost``)
FUSED_KERNELS: dict[str, types.FunctionType | Cost] = {
    "conv_affine": conv_affine.conv_affine,
    "geglu_ff": geglu_kernel.geglu_ff,
    "shape_without": geglu_kernel.shape_without,
    "gelu": gelu.gelu,
    "layer_norm": layer_norm.fused_layer_norm,
    "norm_conv": norm_conv.norm_conv,
    "group_norm_stats": norm_conv.group_norm_stats,
    "original_chain": norm_conv.original_chain,
    "silu": silu.silu,
    "sliced_attention": sliced_attention.sliced_attention,
    "upsample_conv": upsample_conv.upsample_conv,
    "decoded_weight_op": weight_decoding.decoded_weight_op,
    "widened": weight_decoding.widened_gather,
    "cost:output_only": OUTPUT_ONLY,
    "cost:view": VIEW,
    "cost:conv_affine": conv_affine.COST,
    "cost:geglu": geglu.COST,
    "cost:gelu": gelu.COST,
    "cost:layer_norm": layer_norm.COST,
    "cost:norm_conv": norm_conv.COST,
    "cost:sliced_attention": sliced_attention.COST,
    "cost:upsample_conv": upsample_conv.COST,
    "cost:decoded_weight": weight_decoding.COST,
}

# numpy dtypes an array or a dtype field may have (little endian; no objects, strings or void)
DTYPES: dict[str, np.dtype] = {np.dtype(name).str: np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")}
