"""A weight's LoRA change, computed for one block of its channels at a time.

``WeightDelta`` knows how the changed layer's weight is stored in the ONNX graph: output channels
first (Conv ``[out, in, kh, kw]``, Gemm with transB ``[out, in]``) or last (MatMul ``[in, out]``, the
transposed torch Linear weight). For each LoRA module on it, ``up [out, r] @ down [r, in·kh·kw]``
times ``scale · alpha / rank`` is the change in torch's layout; ``block`` returns it sliced along
either axis of the stored layout, so a decoded block of channels gets exactly its part and no
float32 copy of the whole delta ever exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from frame.engine.lora.files import LoraModule

ADD_ELEMENTS = 1 << 18  # float32 elements of delta computed at a time (1 MB)
Factors = list[tuple[np.ndarray, np.ndarray]]  # per module: up·multiplier [out, r], down [r, in·k]


@dataclass
class WeightDelta:
    weight: str  # the initializer's name
    shape: tuple[int, ...]  # the stored (and decoded) weight's shape
    out_axis: int  # 0: output channels first (Conv, Gemm transB); 1: MatMul's [in, out]
    terms: list[tuple[LoraModule, float]]  # (module, owner's scale)
    label: str = ""  # the layer, for messages
    in_op: bool = False  # every reader decodes it per block and adds the change there (else: merged copy)

    @property
    def nbytes(self) -> int:
        """Bytes of LoRA factors read each time this weight streams."""
        return sum(module.nbytes for module, _ in self.terms)

    def factors(self) -> Factors:
        out = []
        for module, scale in self.terms:
            up = module.up.read().reshape(module.up.shape[0], -1)
            down = module.down.read().reshape(module.rank, -1)
            up *= np.float32(scale * module.factor)
            out.append((up, down))
        return out

    def block(self, factors: Factors, axis: int, start: int, stop: int) -> np.ndarray:
        """The summed change of channels ``start:stop`` along ``axis`` of the stored layout (float32)."""
        axis %= len(self.shape)
        total = None
        for up, down in factors:
            if self.out_axis == 0:
                if axis == 0:
                    part = (up[start:stop] @ down).reshape((stop - start,) + self.shape[1:])
                else:
                    inner = down.reshape(down.shape[0], self.shape[1], -1)[:, start:stop].reshape(down.shape[0], -1)
                    part = (up @ inner).reshape(self.shape[:1] + (stop - start,) + self.shape[2:])
            else:
                part = down[:, start:stop].T @ up.T if axis == 0 else down.T @ up[start:stop].T
            total = part if total is None else np.add(total, part, out=total)
        return total

    def merged(self, weight: np.ndarray, factors: Factors, offset: int = 0) -> np.ndarray:
        """A float32 copy of ``weight`` (rows ``offset:`` of the stored weight) with the change added,
        ``ADD_ELEMENTS`` at a time so the delta's temporary stays small."""
        out = np.array(weight, dtype=np.float32, copy=True)
        rows = max(1, ADD_ELEMENTS // max(1, out.size // max(1, out.shape[0]))) if out.ndim else 1
        if not out.ndim:
            return out
        for first in range(0, out.shape[0], rows):
            last = min(out.shape[0], first + rows)
            out[first:last] += self.block(factors, 0, offset + first, offset + last)
        return out


class LoraStored:
    """A stored 8-bit or fp16 weight (or rows ``offset:`` of it) handed to the op with its LoRA change:
    ``weight_decoding.decode_block`` adds ``delta_block`` to each block it decodes. Deliberately not an
    ndarray (no indexing): an op that does not know about it fails loudly instead of dropping the change."""

    def __init__(self, stored: np.ndarray, delta: WeightDelta, factors: Factors, offset: int = 0) -> None:
        self.stored, self.delta, self.factors, self.offset = stored, delta, factors, offset
        self.shape, self.dtype, self.ndim = stored.shape, stored.dtype, stored.ndim
        self.size, self.nbytes = stored.size, stored.nbytes

    def add_to(self, block: np.ndarray, axis: int, start: int, stop: int) -> None:
        """Add the change of this array's channels ``start:stop`` along ``axis`` to the decoded ``block``
        in place, ``ADD_ELEMENTS`` at a time: a delta as large as the block (16 MB) would raise the peak."""
        axis %= self.ndim
        shift = self.offset if axis == 0 else 0
        per_channel = max(1, block.size // max(1, stop - start))
        step = max(1, ADD_ELEMENTS // per_channel)
        index = [slice(None)] * block.ndim
        for first in range(0, stop - start, step):
            last = min(stop - start, first + step)
            index[axis] = slice(first, last)
            block[tuple(index)] += self.delta.block(self.factors, axis, shift + start + first, shift + start + last)
