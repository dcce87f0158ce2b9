"""The op table: the kernels registered for each ONNX op type, and the contract they share.

Which one runs a node is chosen once per node at load time by ``frame.engine.ops.lookup``
(``resolve``, ``bind_node``), which also imports the optional kernels (``frame.engine.ops.optional``)
the first time a graph asks for one of their ops; the table itself only collects registrations.

Contract shared by every kernel (the runtime relies on it):

* A kernel is a plain function ``fn(*inputs, **attrs)``. ``inputs`` are numpy arrays in the node's
  input order, ``None`` for an omitted optional input. ``attrs`` are the node's ONNX attributes by
  their spec names, decoded to Python values (int, float, str, list[int], list[float], list[str],
  np.ndarray for tensor attributes); defaults live in the kernel's signature, as in the ONNX spec.
* It returns one ``np.ndarray`` or a tuple of them (one per node output).
* The attribute names a kernel accepts are its keyword parameters; a node carrying any other attribute
  is rejected at load time. Parameters starting with ``_`` are runtime hints, never ONNX attributes:
  ``_reuse=True`` tells a kernel registered with ``inplace=True`` that input 0 dies with this node, so
  it may write its result into input 0 when shape and dtype allow. ``_num_outputs`` (put into the
  attrs by ``lookup.bind_node`` for kernels that declare it: Split, LayerNormalization, Dropout, MaxPool) is
  the node's output count;
  Split needs it when neither split sizes nor ``num_outputs`` say how many pieces to make, and the
  others skip computing optional outputs nobody asked for. ``_num_inputs`` likewise is the node's
  own input count (If/Loop/Scan get the outer-scope values their bodies read as extra inputs).
  ``_scope`` (control flow only) is given by the executor at run time: it runs a body graph.
  ``_rng`` (random ops only) is likewise given at run time: the generator passed to ``Model.run``
  (or None).
* Graph attributes (If branches, Loop/Scan bodies) decode to ``onnx.GraphProto``; the loader
  (``frame.engine.subgraphs``) then replaces them with bound, planned ``Body`` objects.
* Optional *inputs* are positional-only parameters (before ``/``) so they never count as attributes.
* ``validate(attrs)`` (optional) rejects attribute *values* the kernel cannot honour, at load time,
  by raising ``UnsupportedOp`` with a message naming the attribute.
* ``cost`` (required) declares what the kernel computes and allocates beyond its output
  (``frame.engine.ops.cost``): multiply-adds, passes over memory, scratch bytes; ``OUTPUT_ONLY`` for
  a kernel that only writes its output in one pass. ``frame.engine.costs`` counts a plan from these.
* ``OpSpec.fn`` is the kernel wrapped to run with numpy floating-point warnings off (ONNX arithmetic
  is IEEE: x/0 = inf is a result). Kernels raise ``ValueError``/``IndexError`` for bad tensors
  (shapes, indices); the runtime adds the node's name.

Opset variants follow tinygrad and onnx.reference: several registrations of one op type with
different ``since`` versions; ``lookup.resolve`` picks the highest ``since`` that is ≤ the model's opset.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import numpy_helper

from frame.engine.ops.cost import OUTPUT_ONLY, VIEW, Cost, passes

if TYPE_CHECKING:
    import onnx

Kernel = Callable[..., object]
__all__ = ["OUTPUT_ONLY", "VIEW", "Cost", "OpSpec", "UnsupportedOp", "decode_attributes", "passes", "register",
           "registered_specs", "registered_versions"]


class UnsupportedOp(Exception):
    """An op type, opset or attribute value no kernel here can run."""


@dataclass(frozen=True)
class OpSpec:
    op_type: str
    since: int
    fn: Kernel
    domain: str = ""
    inplace: bool = False
    validate: Callable[[dict], None] | None = None
    attribute_names: frozenset[str] = field(default_factory=frozenset)
    hints: frozenset[str] = field(default_factory=frozenset)
    cost: Cost | None = None

    @property
    def keywords(self) -> Mapping[str, Any]:
        """What ``fn`` was bound with (a pass's ``functools.partial``: a fused op's parts, the
        attention budget), for its cost declaration; empty for a registered kernel."""
        return self.fn.keywords if isinstance(self.fn, functools.partial) else {}


_TABLE: dict[tuple[str, str], list[OpSpec]] = {}


def _attribute_names(fn: Kernel) -> frozenset[str]:
    params = inspect.signature(fn).parameters.values()
    return frozenset(
        p.name for p in params
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and not p.name.startswith("_")
        and p.default is not inspect.Parameter.empty
    )


def _hint_names(fn: Kernel) -> frozenset[str]:
    return frozenset(p for p in inspect.signature(fn).parameters if p.startswith("_"))


def _ieee(fn: Kernel) -> Kernel:
    """Run ``fn`` with numpy floating-point warnings off: ONNX arithmetic is plain IEEE, so x/0 = inf
    and log(0) = -inf are results, not problems worth a warning on every run."""

    @functools.wraps(fn)
    def kernel(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return kernel


def register(op_type: str, since: int = 1, *, domain: str = "", inplace: bool = False,
             validate: Callable[[dict], None] | None = None, cost: Cost | None = None) -> Callable[[Kernel], Kernel]:
    """Decorator: make ``fn`` the kernel for ``op_type`` from opset ``since`` on. ``cost`` is required:
    a kernel that declares nothing is refused, so the plan's count never misses a heavy op."""
    if not isinstance(cost, Cost):
        raise TypeError(f"kernel {op_type} (opset {since}) declares no cost: pass cost= "
                        "(frame.engine.ops.cost: OUTPUT_ONLY, VIEW, passes(n) or a Cost with work/scratch)")

    def decorate(fn: Kernel) -> Kernel:
        spec = OpSpec(op_type, since, _ieee(fn), domain, inplace, validate, _attribute_names(fn), _hint_names(fn),
                      cost)
        versions = _TABLE.setdefault((domain, op_type), [])
        versions.append(spec)
        versions.sort(key=lambda s: s.since)
        return fn

    return decorate


def registered_specs() -> list[OpSpec]:
    """Every kernel spec registered so far, all versions: the core ones and the optional ones a graph has
    asked for (a kept plan names these instead of storing them)."""
    return [spec for versions in _TABLE.values() for spec in versions]


def registered_versions(op_type: str, domain: str = "") -> list[OpSpec]:
    """The kernels registered for ``op_type`` in ``domain``, by ascending ``since`` (empty if none)."""
    return list(_TABLE.get((domain, op_type), ()))


def decode_attributes(node: onnx.NodeProto) -> dict:
    """The node's attributes as the Python values kernels take (see the module docstring).

    Graph-valued attributes (If/Loop/Scan bodies) stay ``onnx.GraphProto`` (a list for GRAPHS);
    sparse tensors, type protos and references to function attributes have no kernel here, so they
    raise ``UnsupportedOp`` naming the attribute.
    """

    kinds = onnx.AttributeProto
    attrs: dict = {}
    for attr in node.attribute:
        if attr.ref_attr_name:
            raise UnsupportedOp(f"{node.op_type} attribute {attr.name!r} refers to a function attribute")
        if attr.type == kinds.FLOAT:
            attrs[attr.name] = float(attr.f)
        elif attr.type == kinds.INT:
            attrs[attr.name] = int(attr.i)
        elif attr.type == kinds.STRING:
            attrs[attr.name] = attr.s.decode("utf-8")
        elif attr.type == kinds.TENSOR:
            attrs[attr.name] = numpy_helper.to_array(attr.t)
        elif attr.type == kinds.FLOATS:
            attrs[attr.name] = [float(v) for v in attr.floats]
        elif attr.type == kinds.INTS:
            attrs[attr.name] = [int(v) for v in attr.ints]
        elif attr.type == kinds.STRINGS:
            attrs[attr.name] = [s.decode("utf-8") for s in attr.strings]
        elif attr.type == kinds.TENSORS:
            attrs[attr.name] = [numpy_helper.to_array(t) for t in attr.tensors]
        elif attr.type == kinds.GRAPH:
            attrs[attr.name] = attr.g
        elif attr.type == kinds.GRAPHS:
            attrs[attr.name] = list(attr.graphs)
        else:
            kind = kinds.AttributeType.Name(attr.type)
            raise UnsupportedOp(f"{node.op_type} attribute {attr.name!r} has type {kind}, which is not supported")
    return attrs
