"""Which activation buffers are alive at each engine step, following the engine's liveness plan.

A value lives from the step that produces it to its last use (``Step.free``), as the executor does.
Views share their input's buffer, as numpy does in the engine's kernels: Reshape, Flatten, Squeeze,
Unsqueeze and Identity of a contiguous array, Transpose (the result is no longer contiguous, so a
Reshape of it copies), Slice and Split (unless the piece is under a quarter of its base: the executor
copies such small views so they do not pin the base), and Expand (a broadcast, no bytes at all). A
step allowed to overwrite its dying first input (``Step.reuse``) writes into that buffer when the
sizes match. A buffer is released when its last alias is freed.
"""

from __future__ import annotations

from dataclasses import dataclass

from frame.engine import graph as g
from frame.engine.counted_shapes import ShapeTable

_RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
_SLICES = ("Slice", "Split")


@dataclass
class _Buffer:
    nbytes: int
    aliases: int = 0


@dataclass
class _Alias:
    buffer: _Buffer
    contiguous: bool


class LiveBuffers:
    """Buffers alive during the run; ``run(step)`` returns the activation bytes alive during the step."""

    def __init__(self, table: ShapeTable, weights: set[str]) -> None:
        self.table = table
        self.weights = weights
        self.values: dict[str, _Alias] = {}

    def add_input(self, name: str) -> None:
        self._bind(name, _Buffer(self.table.nbytes(name)), True)

    def _bind(self, name: str, buffer: _Buffer, contiguous: bool) -> None:
        buffer.aliases += 1
        self.values[name] = _Alias(buffer, contiguous)

    def _drop(self, name: str) -> None:
        alias = self.values.pop(name, None)
        if alias is not None:
            alias.buffer.aliases -= 1

    def live_bytes(self) -> int:
        buffers = {id(a.buffer): a.buffer for a in self.values.values()}
        return sum(b.nbytes for b in buffers.values() if b.aliases > 0)

    def _output_alias(self, step: g.Step, name: str) -> tuple[_Buffer, bool]:
        """The buffer ``name`` (an output of ``step``) lands in, and whether it is contiguous."""
        node = step.node
        source = self.values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
        size = self.table.nbytes(name)
        op = node.op_type if not node.domain else ""
        if source is not None:
            if op in _RESHAPES and source.contiguous:
                return source.buffer, True
            if op == "Transpose":
                return source.buffer, False
            if op == "Expand":
                return _Buffer(0), False
            if op in _SLICES and size * 4 > source.buffer.nbytes:
                return source.buffer, False
            if step.reuse and size == source.buffer.nbytes and source.buffer.aliases == 1:
                return source.buffer, True
        return _Buffer(size), True

    def run(self, step: g.Step) -> int:
        """Bind the step's outputs, measure what is alive while it runs, then free its dead values."""
        outputs = [(name, *self._output_alias(step, name)) for name in step.node.outputs if name]
        new = {id(b): b for _, b, _ in outputs if b.aliases == 0}
        during = self.live_bytes() + sum(b.nbytes for b in new.values())
        for name, buffer, contiguous in outputs:
            self._bind(name, buffer, contiguous)
        for name in step.free:
            self._drop(name)
        return during
