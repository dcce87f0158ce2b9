"""What a kernel declares about its own cost, beside the kernel, where it is registered.

Every kernel is registered with a ``Cost`` (``register(..., cost=...)``; a fused op's ``OpSpec`` built
by its pass likewise), so the knowledge of what an op computes and allocates lives once, next to the
code it follows, and ``frame.engine.costs`` (the plan's memory and work count) only asks for it:

* ``work(query)``: the multiply-adds of a compute-bound op and the kind of kernel doing them
  (``conv``; ``matmul`` when one operand is a weight; ``attention`` when both are activations), as
  the op's ONNX definition counts them from the shapes; None when the shapes do not say (the op is
  then counted as memory-bound);
* ``passes``: for a memory-bound op, the passes its kernel makes over the activation bytes it reads
  and writes (1: read once, write once; a norm reads its input for the mean, writes the centred
  values, reads them for the variance, scales them in place: 3.5). Views and shape arithmetic move
  no data: ``VIEW`` (0 passes);
* ``scratch(query)``: the temporary bytes the kernel allocates beyond its inputs and output while
  it runs (the im2col band, the Winograd tiles, the decoded weight block, the score block);
* ``share(query)``: for a fused kernel doing less than the ONNX nodes it replaces define, the share
  of their multiply-adds it does (an upsampling conv run as four 2×2 phase convs: 4/9); 1 if absent;
* ``decoded(query)``: the stored weight values the kernel decodes to float32 on every call (fp16 or
  8-bit weights it keeps as stored); 0 if absent.

``OUTPUT_ONLY`` (one pass, no multiply-adds, nothing beyond the output) is itself a declaration: the
registry refuses a kernel that declares nothing, so a new heavy op cannot be undercounted silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Shape = tuple[int | None, ...]
CONV, MATMUL, ATTENTION = "conv", "matmul", "attention"
KINDS = (CONV, MATMUL, ATTENTION)
FLOAT = 4
_WEIGHT_PATH_OPS = ("Cast", "DequantizeLinear", "Transpose", "Reshape", "Identity", "Squeeze", "Unsqueeze")


@dataclass(frozen=True)
class Work:
    """One node's compute: ``macs`` of ``kind`` (None for memory-bound ops) and activation bytes."""

    kind: str | None
    macs: int
    element_bytes: int = 0


def known(shape: Shape | None) -> bool:
    """Every dim known (a scalar's () included)."""
    return shape is not None and all(d is not None for d in shape)


def has_dims(shape: Shape | None) -> bool:
    """At least one dim, all known (what the scratch formulas need)."""
    return bool(shape) and all(d is not None for d in shape)  # type: ignore[union-attr]


def size(shape: Shape | None) -> int:
    """Elements of ``shape`` (a scalar's () is 1); 0 if it is unknown."""
    return math.prod(shape) if known(shape) else 0  # type: ignore[arg-type]


@dataclass(frozen=True)
class CostQuery:
    """What a cost declaration sees of one node: its attributes and the shapes around it.

    ``weights``: the graph's weights by name (their stored shapes and bytes); ``producers``: value name
    → (op type, inputs) of the node making it, to see a weight behind Cast/DequantizeLinear/Transpose;
    ``keywords``: what the kernel was bound with (a fused op's parts: the wrapped kernel, the
    normalisation's attributes, the attention budget); ``row_bytes``: a weight the op reads itself,
    block by block."""

    attrs: Mapping
    inputs: Sequence[str]
    outputs: Sequence[str]
    shapes: Mapping[str, Shape]
    itemsizes: Mapping[str, int] = field(default_factory=dict)
    weights: Mapping[str, Any] = field(default_factory=dict)
    producers: Mapping[str, tuple[str, list[str]]] = field(default_factory=dict)
    keywords: Mapping = field(default_factory=dict)
    row_bytes: int = 0

    def shape(self, i: int) -> Shape | None:
        """Shape of input ``i`` (None if absent or unknown)."""
        return self.shapes.get(self.inputs[i]) if i < len(self.inputs) and self.inputs[i] else None

    def out(self, i: int = 0) -> Shape | None:
        return self.shapes.get(self.outputs[i]) if i < len(self.outputs) and self.outputs[i] else None

    def nbytes(self, name: str) -> int:
        """Bytes of value ``name`` as the engine holds it (0 if its shape is not fully known)."""
        return size(self.shapes.get(name)) * self.itemsizes.get(name, 4)

    def reads_weight(self, name: str) -> bool:
        """Whether ``name`` is a weight, possibly behind Cast/DequantizeLinear/Transpose/Reshape."""
        for _ in range(8):
            if name in self.weights:
                return True
            producer = self.producers.get(name)
            if producer is None or producer[0] not in _WEIGHT_PATH_OPS or not producer[1]:
                return False
            name = producer[1][0]
        return False

    def kind_of(self, *inputs: int) -> str:
        """``matmul`` when one of ``inputs`` reads a weight, else ``attention`` (two activations)."""
        weighted = any(self.reads_weight(self.inputs[i]) for i in inputs if i < len(self.inputs))
        return MATMUL if weighted else ATTENTION


@dataclass(frozen=True)
class Cost:
    """A kernel's declared cost (see the module docstring)."""

    work: Callable[[CostQuery], Work | None] | None = None
    scratch: Callable[[CostQuery], int] | None = None
    passes: float = 1.0
    share: Callable[[CostQuery], float] | None = None
    decoded: Callable[[CostQuery], int] | None = None


OUTPUT_ONLY = Cost()
VIEW = Cost(passes=0.0)


def passes(count: float) -> Cost:
    """A memory-bound kernel making ``count`` passes over its activations, allocating only its output."""
    return Cost(passes=count)
