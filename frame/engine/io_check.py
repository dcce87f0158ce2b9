"""Checking feeds against the declared graph inputs, so bad input fails loudly and by name.

What is checked is what onnxruntime checks: names, dtypes, ranks and fixed dims. A symbolic dim
(``"batch"``, ``"?"``, ``"p2o.DynamicDimension.0"``) is a hint, never a constraint: two axes sharing a
name must agree only where the model's own shape logic needs it (an Add of the two inputs), and
there the failing node says so. PaddlePaddle exports name every free axis ``"?"``, so an image input
``[-1, 3, "?", "?"]`` of 48×192 is fine. When a node does fail, ``symbolic_conflicts`` lists the
shared names the feeds disagree on, as a hint next to the node's error (``?``, empty and numeric
names are never reported: they are placeholders, not names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from frame.engine.errors import InputError


def _describe(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def check_feeds(feeds: Mapping[str, object], inputs: Sequence) -> dict[str, np.ndarray]:
    """The feeds as arrays; InputError naming the input for anything missing, extra or mismatched.

    Dtypes must match exactly (a silent cast could hide a caller's bug, e.g. int32 token ids for an
    int64 input); ranks and fixed dims must match; symbolic dims are free (see the module docstring).
    """
    declared = {info.name: info for info in inputs}
    missing = [name for name in declared if name not in feeds]
    extra = [name for name in feeds if name not in declared]
    if missing:
        raise InputError(f"missing input(s): {', '.join(missing)} (model inputs: {', '.join(declared)})")
    if extra:
        raise InputError(f"unexpected input(s): {', '.join(extra)} (model inputs: {', '.join(declared)})")
    arrays: dict[str, np.ndarray] = {}
    for name, info in declared.items():
        value = feeds[name]
        if not isinstance(value, np.ndarray):
            raise InputError(f"input {name!r}: expected a numpy array, got {type(value).__name__}")
        if info.dtype is not None and value.dtype != info.dtype:
            raise InputError(f"input {name!r}: dtype {value.dtype}, expected {info.dtype}")
        if info.shape is not None:
            _check_shape(name, value.shape, info.shape)
        arrays[name] = value
    return arrays


def _check_shape(name: str, shape: tuple[int, ...], declared: tuple) -> None:
    expected = f"expected {_describe(declared)}"
    if len(shape) != len(declared):
        raise InputError(f"input {name!r}: shape {list(shape)} has rank {len(shape)}, {expected}")
    for axis, (got, want) in enumerate(zip(shape, declared)):
        if isinstance(want, int) and want > 0 and got != want:
            raise InputError(f"input {name!r}: shape {list(shape)}, {expected} (axis {axis} must be {want})")


def is_placeholder(dim_param: str) -> bool:
    """``?``, empty, ``-1`` or any numeric string: exporters' ways of saying "any size"."""
    text = dim_param.strip()
    return text in ("", "?") or text.lstrip("+-").isdigit()


def symbolic_conflicts(feeds: Mapping[str, np.ndarray], inputs: Sequence) -> list[str]:
    """One line per symbolic dim name that the feeds give two different sizes, e.g.
    ``'batch' is 2 in input 'a' (axis 0) but 3 in input 'b' (axis 0)``."""
    first: dict[str, tuple[int, str, int]] = {}
    lines: list[str] = []
    for info in inputs:
        value = feeds.get(info.name)
        if info.shape is None or not isinstance(value, np.ndarray) or value.ndim != len(info.shape):
            continue
        for axis, (want, got) in enumerate(zip(info.shape, value.shape)):
            if not isinstance(want, str) or is_placeholder(want):
                continue
            seen = first.setdefault(want, (got, info.name, axis))
            if seen[0] != got:
                lines.append(f"{want!r} is {seen[0]} in input {seen[1]!r} (axis {seen[2]}) but {got} in input "
                             f"{info.name!r} (axis {axis})")
    return lines
