"""Which kernel runs an ONNX node, chosen once per node at load time; optional ops load on first use.

``resolve`` picks, among the versions registered for an op type (``frame.engine.ops.registry``), the
highest ``since`` that is ≤ the model's opset (tinygrad's ``_select_op``, onnx.reference's
``load_op``); ``bind_node`` is the whole load-time check of one node.

The core kernels register when ``frame.engine.ops`` is imported. The kernels of ops no frame model
has live in ``frame.engine.ops.optional``: ``OPTIONAL_MODULES`` names, for each op type they provide,
the module that registers it, and the first lookup of such an op type imports that module (later
lookups find its kernels in the table). So a render worker painting SD 1.5 / SDXL never imports
them, while a graph with an LSTM or a TopK node binds, validates and runs exactly as if they were
core, and an op type in neither place raises the same ``UnsupportedOp``. The table is code, not
data: a node's op type selects one of these constant module names or none.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from frame.engine.ops.cost import Cost
from frame.engine.ops.registry import OpSpec, UnsupportedOp, decode_attributes, registered_specs, registered_versions

if TYPE_CHECKING:
    import onnx

__all__ = ["OPTIONAL_MODULES", "bind_node", "declared_cost", "load_optional", "load_all_optional", "resolve",
           "supported_op_types"]

_RECURRENT = "frame.engine.ops.optional.recurrent"
_CONTROL_FLOW = "frame.engine.ops.optional.control_flow"
_INTEGER = "frame.engine.ops.optional.integer"
_SELECTION = "frame.engine.ops.optional.selection"

# op type (ai.onnx domain) -> the optional module registering it (tests/engine/ops/test_optional_ops.py
# keeps this equal to what the modules register)
OPTIONAL_MODULES: dict[str, str] = {
    "LSTM": _RECURRENT, "GRU": _RECURRENT, "RNN": _RECURRENT,
    "If": _CONTROL_FLOW, "Loop": _CONTROL_FLOW, "Scan": _CONTROL_FLOW,
    "DynamicQuantizeLinear": _INTEGER, "MatMulInteger": _INTEGER, "ConvInteger": _INTEGER,
    "TopK": _SELECTION, "NonZero": _SELECTION, "OneHot": _SELECTION, "Hardmax": _SELECTION,
}


def load_optional(op_type: str, domain: str = "") -> None:
    """Import the optional module registering ``op_type``, if one does (a core or unknown op: nothing)."""
    module = OPTIONAL_MODULES.get(op_type) if domain in ("", "ai.onnx") else None
    if module is not None:
        importlib.import_module(module)


def load_all_optional() -> None:
    """Import every optional module (for listings of all supported ops, and the tests over all kernels)."""
    for module in sorted(set(OPTIONAL_MODULES.values())):
        importlib.import_module(module)


def resolve(op_type: str, opset: int, domain: str = "") -> OpSpec:
    """The kernel for ``op_type`` at ``opset``; ``UnsupportedOp`` if there is none."""
    domain = "" if domain == "ai.onnx" else domain
    load_optional(op_type, domain)  # every time: waits for a module another thread is still registering
    versions = registered_versions(op_type, domain)
    if not versions:
        raise UnsupportedOp(f"op type {op_type!r} (domain {domain or 'ai.onnx'!r}) is not implemented")
    usable = [s for s in versions if s.since <= opset]
    if not usable:
        raise UnsupportedOp(f"{op_type} is implemented from opset {versions[0].since}, model uses {opset}")
    return usable[-1]


def declared_cost(op_type: str) -> Cost | None:
    """The cost declared for ``op_type`` (any domain; the first registered version's), None if unknown."""
    load_optional(op_type)
    for spec in registered_specs():
        if spec.op_type == op_type:
            return spec.cost
    return None


def supported_op_types(domain: str = "") -> list[str]:
    """Every op type a kernel here runs in ``domain``, the optional ones included."""
    load_all_optional()
    return sorted({spec.op_type for spec in registered_specs() if spec.domain == domain})


def bind_node(node: onnx.NodeProto, opset: int) -> tuple[OpSpec, dict]:
    """Resolve ``node`` at ``opset`` and decode its attributes, checking both against the kernel.

    This is the whole load-time check for one node: unknown op type or opset, attributes the kernel
    does not know, and attribute values its ``validate`` rejects all raise ``UnsupportedOp``.
    For kernels that declare ``_num_outputs`` / ``_num_inputs`` the returned attrs already carry them
    (before ``validate``, which may check them).
    """
    spec = resolve(node.op_type, opset, node.domain)
    attrs = decode_attributes(node)
    unknown = sorted(set(attrs) - spec.attribute_names)
    if unknown:
        raise UnsupportedOp(f"{node.op_type} (opset {opset}) does not support attribute(s) {', '.join(unknown)}")
    if "_num_outputs" in spec.hints:
        outputs = list(node.output)
        while outputs and not outputs[-1]:
            outputs.pop()
        attrs["_num_outputs"] = len(outputs)
    if "_num_inputs" in spec.hints:
        attrs["_num_inputs"] = len(node.input)
    if spec.validate is not None:
        spec.validate(attrs)
    return spec, attrs
