"""W8A8: OnnxStream's static activation quantisation, driven by a folder's ``range_data.txt``.

OnnxStream's SD 1.5 ``vae_decoder_qu8`` runs in "uint8 arithmetic": its uint8 weights meet uint8
activations, and the ops that compute in uint8 (Conv, MatMul, Add, Mul, Sigmoid,
InstanceNormalization) write their output quantised with a fixed range per op, measured once by a
calibration run and stored one op per line as ``op name,min,max``. The range becomes a scale and
zero point as for weights: a range on one side of 0 is widened to reach 0, ``scale = (max-min)/255``,
``zero_point = int(|min| / scale)``.

frame computes in float32, so the same numbers are obtained with standard ONNX ops: each such output
goes through ``QuantizeLinear`` right after its op and a ``DequantizeLinear`` right before each op that
reads it. Between the two, only the uint8 copy is alive, so activations kept for later ops (skip
connections) take a quarter of the memory, which is what W8A8 is for on a Pi.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from onnx import helper

from frame.engine.errors import ModelFormatError
from frame.engine.io.weights import WeightRef

log = logging.getLogger(__name__)

QUANTISED_OPS = frozenset({"Conv", "MatMul", "Add", "Mul", "Sigmoid", "InstanceNormalization"})


def parse_range_data(text: str, where: str = "range_data.txt") -> dict[str, tuple[float, float]]:
    """``{op name: (min, max)}``; ModelFormatError naming the line for anything else."""
    ranges = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        parts = line.rsplit(",", 2)
        try:
            if len(parts) != 3 or not parts[0]:
                raise ValueError
            low, high = float(parts[1]), float(parts[2])
        except ValueError:
            raise ModelFormatError(f"{where} line {number}: expected 'op name,min,max', got {line!r}") from None
        ranges[parts[0]] = (low, high)
    return ranges


def range_to_scale(low: float, high: float) -> tuple[np.float32, np.uint8]:
    """OnnxStream's ``range_to_scale``: the (scale, zero point) of a calibrated output range."""
    if low > 0 and high > 0:
        low = 0.0
    elif low < 0 and high < 0:
        high = 0.0
    scale = np.float32((high - low) / 255.0)
    if not scale > 0:
        scale = np.float32(1.0)
    return scale, np.uint8(min(int(abs(low) / scale), 255))


def quantise_activations(ranges: dict[str, tuple[float, float]]) -> Callable:
    """A ``build_structure`` transform putting Quantize/DequantizeLinear around each calibrated output."""

    def transform(builder, outputs: list[str]) -> None:
        quantised: dict[str, tuple[str, str, str]] = {}  # value → (uint8 value, scale, zero point)
        rebuilt = []
        counter = 0
        skipped = 0
        for node, opset, line in builder.nodes:
            for position, name in enumerate(list(node.input)):
                if name in quantised:
                    q, scale, zero = quantised[name]
                    counter += 1
                    restored = f"{name}:dq{counter}"
                    rebuilt.append((helper.make_node("DequantizeLinear", [q, scale, zero], [restored],
                                                     name=f"{node.name}:dequantize{position}"), opset, line))
                    for at, other in enumerate(node.input):
                        if other == name:
                            node.input[at] = restored
            rebuilt.append((node, opset, line))
            if node.op_type not in QUANTISED_OPS or len(node.output) != 1:
                continue
            if node.name not in ranges:
                skipped += 1
                continue
            value = node.output[0]
            scale_value, zero_value = range_to_scale(*ranges[node.name])
            scale, zero, q = f"{value}:act_scale", f"{value}:act_zero_point", f"{value}:uint8"
            builder.weights[scale] = _inline(scale, scale_value)
            builder.weights[zero] = _inline(zero, zero_value)
            node.output[0] = f"{value}:float"
            rebuilt.append((helper.make_node("QuantizeLinear", [node.output[0], scale, zero], [q],
                                             name=f"{node.name}:quantize"), opset, line))
            if value in outputs:
                rebuilt.append((helper.make_node("DequantizeLinear", [q, scale, zero], [value],
                                                 name=f"{node.name}:output"), opset, line))
            quantised[value] = (q, scale, zero)
        builder.nodes = rebuilt
        if skipped:
            log.warning("%s: %d op(s) with no range in range_data.txt keep float32 outputs", builder.where, skipped)

    return transform


def _inline(name: str, value: np.generic) -> WeightRef:
    array = np.asarray(value)
    return WeightRef(name, array.dtype, (), value=array, length=int(array.nbytes))
