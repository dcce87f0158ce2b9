"""Checking feeds against the declared graph inputs, so bad input fails loudly and by name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from frame.engine.errors import InputError


def _describe(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def check_feeds(feeds: Mapping[str, object], inputs: Sequence) -> dict[str, np.ndarray]:
    """The feeds as arrays; InputError naming the input for anything missing, extra or mismatched.

    Symbolic dims (e.g. "batch") must take one value across all inputs; dtypes must match exactly
    (a silent cast could hide a caller's bug, e.g. int32 token ids for an int64 input).
    """
    declared = {info.name: info for info in inputs}
    missing = [name for name in declared if name not in feeds]
    extra = [name for name in feeds if name not in declared]
    if missing:
        raise InputError(f"missing input(s): {', '.join(missing)} (model inputs: {', '.join(declared)})")
    if extra:
        raise InputError(f"unexpected input(s): {', '.join(extra)} (model inputs: {', '.join(declared)})")
    bound: dict[str, tuple[int, str]] = {}
    arrays: dict[str, np.ndarray] = {}
    for name, info in declared.items():
        value = feeds[name]
        if not isinstance(value, np.ndarray):
            raise InputError(f"input {name!r}: expected a numpy array, got {type(value).__name__}")
        if info.dtype is not None and value.dtype != info.dtype:
            raise InputError(f"input {name!r}: dtype {value.dtype}, expected {info.dtype}")
        if info.shape is not None:
            _check_shape(name, value.shape, info.shape, bound)
        arrays[name] = value
    return arrays


def _check_shape(name: str, shape: tuple[int, ...], declared: tuple, bound: dict) -> None:
    expected = f"expected {_describe(declared)}"
    if len(shape) != len(declared):
        raise InputError(f"input {name!r}: shape {list(shape)} has rank {len(shape)}, {expected}")
    for axis, (got, want) in enumerate(zip(shape, declared)):
        if isinstance(want, int) and want > 0 and got != want:
            raise InputError(f"input {name!r}: shape {list(shape)}, {expected} (axis {axis} must be {want})")
        if isinstance(want, str):
            if want in bound and bound[want][0] != got:
                first_value, first_input = bound[want]
                raise InputError(
                    f"input {name!r}: axis {axis} ({want!r}) is {got}, but input {first_input!r} set "
                    f"{want!r} = {first_value}")
            bound.setdefault(want, (got, name))
