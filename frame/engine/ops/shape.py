"""Shape and layout kernels: reshape, transpose, concatenate, split, slice, squeeze, expand, tile.

These move data without arithmetic, so they keep the input dtype and return numpy views wherever
numpy can (Reshape, Transpose, Squeeze, Unsqueeze, Slice, Expand); the runtime's liveness tracking
accounts for a view keeping its base alive. Axes and shapes that are inputs arrive as int64 arrays.
Opset variants: attributes became inputs for Split/Squeeze/Unsqueeze in opset 13 and Slice in 10.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.registry import OUTPUT_ONLY, VIEW, UnsupportedOp, register

__all__ = ["normalize_axes"]


def normalize_axes(axes: object, rank: int) -> tuple[int, ...]:
    """ONNX axes (list or int64 array, negatives count from the end) as sorted non-negative ints."""
    values = [int(a) for a in np.asarray(axes).reshape(-1)]
    for axis in values:
        if not -rank <= axis < rank:
            raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return tuple(sorted(a % rank for a in values))


def _ints(array: np.ndarray | None) -> list[int] | None:
    return None if array is None else [int(v) for v in np.asarray(array).reshape(-1)]


@register("Reshape", 5, cost=VIEW)
def reshape(data: np.ndarray, shape: np.ndarray, allowzero: int = 0) -> np.ndarray:
    """A 0 in ``shape`` copies the input dimension unless ``allowzero`` (opset 14) is set."""
    target = _ints(shape)
    if not allowzero:
        target = [data.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return data.reshape(target)


@register("Flatten", 1, cost=VIEW)
def flatten(x: np.ndarray, axis: int = 1) -> np.ndarray:
    axis = axis + x.ndim if axis < 0 else axis
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(outer, -1) if x.size else x.reshape(outer, int(np.prod(x.shape[axis:], dtype=np.int64)))


@register("Transpose", 1, cost=VIEW)
def transpose(data: np.ndarray, perm: list[int] | None = None) -> np.ndarray:
    return data.transpose(perm) if perm is not None else data.transpose()


@register("Concat", 4, cost=OUTPUT_ONLY)
def concat(*inputs: np.ndarray, axis: int | None = None) -> np.ndarray:
    if axis is None:
        raise ValueError("Concat needs the 'axis' attribute")
    return np.concatenate(inputs, axis=axis)


def _split(x: np.ndarray, sizes: list[int] | None, axis: int, count: int | None) -> tuple[np.ndarray, ...]:
    length = x.shape[axis]
    if sizes is None:
        if count is None:
            raise ValueError("Split without split sizes needs the number of outputs (_num_outputs)")
        chunk = -(-length // count)  # ceil: the last chunk is smaller when uneven (opset 18)
        sizes = [min(chunk, max(length - i * chunk, 0)) for i in range(count)]
    if sum(sizes) != length:
        raise ValueError(f"Split sizes {sizes} do not add up to dimension {length} of axis {axis}")
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, bounds, axis=axis))


@register("Split", 2, cost=VIEW)
def split_v2(x: np.ndarray, axis: int = 0, split: list[int] | None = None,
             _num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    return _split(x, split, axis, _num_outputs)


@register("Split", 13, cost=VIEW)
def split_v13(x: np.ndarray, split: np.ndarray | None = None, /, *, axis: int = 0,
              _num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    return _split(x, _ints(split), axis, _num_outputs)


@register("Split", 18, cost=VIEW)
def split_v18(x: np.ndarray, split: np.ndarray | None = None, /, *, axis: int = 0,
              num_outputs: int | None = None, _num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    return _split(x, _ints(split), axis, num_outputs if num_outputs is not None else _num_outputs)


def _slice(data: np.ndarray, starts: list[int], ends: list[int], axes: list[int] | None,
           steps: list[int] | None) -> np.ndarray:
    """Python slices clamp out-of-range starts/ends exactly as the ONNX spec requires."""
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if step == 0:
            raise ValueError("Slice step must not be 0")
        index[axis % data.ndim] = slice(start, end, step)
    return data[tuple(index)]


@register("Slice", 1, cost=VIEW)
def slice_v1(data: np.ndarray, starts: list[int] | None = None, ends: list[int] | None = None,
             axes: list[int] | None = None) -> np.ndarray:
    if starts is None or ends is None:
        raise ValueError("Slice (opset 1) needs 'starts' and 'ends' attributes")
    return _slice(data, starts, ends, axes, None)


@register("Slice", 10, cost=VIEW)
def slice_v10(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, axes: np.ndarray | None = None,
              steps: np.ndarray | None = None, /) -> np.ndarray:
    return _slice(data, _ints(starts), _ints(ends), _ints(axes), _ints(steps))


def _squeeze(data: np.ndarray, axes: object) -> np.ndarray:
    if axes is None:
        return data.squeeze()
    return data.squeeze(normalize_axes(axes, data.ndim))


@register("Squeeze", 1, cost=VIEW)
def squeeze_v1(data: np.ndarray, axes: list[int] | None = None) -> np.ndarray:
    return _squeeze(data, axes)


@register("Squeeze", 13, cost=VIEW)
def squeeze_v13(data: np.ndarray, axes: np.ndarray | None = None, /) -> np.ndarray:
    return _squeeze(data, axes)


def _unsqueeze(data: np.ndarray, axes: object) -> np.ndarray:
    if axes is None:
        raise ValueError("Unsqueeze needs axes")
    return np.expand_dims(data, normalize_axes(axes, data.ndim + np.asarray(axes).size))


@register("Unsqueeze", 1, cost=VIEW)
def unsqueeze_v1(data: np.ndarray, axes: list[int] | None = None) -> np.ndarray:
    return _unsqueeze(data, axes)


@register("Unsqueeze", 13, cost=VIEW)
def unsqueeze_v13(data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    return _unsqueeze(data, axes)


@register("Expand", 8, cost=VIEW)
def expand(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """A read-only broadcast view: no copy until a consumer needs one."""
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(_ints(shape))))


@register("Tile", 6, cost=OUTPUT_ONLY)
def tile(x: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    return np.tile(x, _ints(repeats))


@register("Shape", 1, cost=VIEW)
def shape(data: np.ndarray, start: int = 0, end: int | None = None) -> np.ndarray:
    """``start``/``end`` (opset 15) select a range of dimensions and are clamped like slices."""
    return np.array(data.shape[start:end], dtype=np.int64)


@register("Size", 1, cost=VIEW)
def size(data: np.ndarray) -> np.ndarray:
    return np.array(data.size, dtype=np.int64)


@register("Trilu", 14, cost=OUTPUT_ONLY)
def trilu(x: np.ndarray, k: np.ndarray | None = None, /, *, upper: int = 1) -> np.ndarray:
    diagonal = 0 if k is None else int(k)
    return np.triu(x, diagonal) if upper else np.tril(x, diagonal)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _validate_pad(attrs: dict) -> None:
    mode = attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise UnsupportedOp(f"Pad attribute 'mode' = {mode!r} (expected one of {', '.join(_PAD_MODES)})")


def _pad(data: np.ndarray, pads: list[int], mode: str, value: object, axes: list[int] | None) -> np.ndarray:
    """``pads`` = [begin per axis..., end per axis...]; negative pads crop, as ONNX allows."""
    axes = list(range(data.ndim)) if axes is None else [a % data.ndim for a in axes]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad has {len(pads)} pads for {len(axes)} axes (expected {2 * len(axes)})")
    widths = [[0, 0] for _ in range(data.ndim)]
    crop = [slice(None)] * data.ndim
    for i, axis in enumerate(axes):
        begin, end = pads[i], pads[i + len(axes)]
        widths[axis] = [max(begin, 0), max(end, 0)]
        crop[axis] = slice(max(-begin, 0), data.shape[axis] - max(-end, 0))
    data = data[tuple(crop)]
    if not any(b or e for b, e in widths):
        return data
    if mode == "constant":
        return np.pad(data, widths, mode="constant", constant_values=np.asarray(value, dtype=data.dtype))
    return np.pad(data, widths, mode=_PAD_MODES[mode])


@register("Pad", 2, validate=_validate_pad, cost=OUTPUT_ONLY)
def pad_v2(data: np.ndarray, pads: list[int] | None = None, mode: str = "constant",
           value: float = 0.0) -> np.ndarray:
    if pads is None:
        raise ValueError("Pad (opset 2) needs the 'pads' attribute")
    return _pad(data, pads, mode, value, None)


@register("Pad", 11, validate=_validate_pad, cost=OUTPUT_ONLY)
def pad_v11(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None,
            axes: np.ndarray | None = None, /, *, mode: str = "constant") -> np.ndarray:
    """Pads as inputs (opset 11); ``axes`` input from opset 18; ``wrap`` mode from opset 19."""
    value = 0 if constant_value is None or constant_value.size == 0 else constant_value.reshape(-1)[0]
    return _pad(data, _ints(pads), mode, value, _ints(axes))


def _validate_depth_to_space(attrs: dict) -> None:
    if attrs.get("mode", "DCR") not in ("DCR", "CRD"):
        raise UnsupportedOp(f"attribute 'mode' = {attrs['mode']!r} (expected DCR or CRD)")


@register("DepthToSpace", 1, validate=_validate_depth_to_space, cost=OUTPUT_ONLY)
def depth_to_space(x: np.ndarray, blocksize: int = 1, mode: str = "DCR") -> np.ndarray:
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        blocks = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        blocks = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return blocks.reshape(n, c // (b * b), h * b, w * b)


@register("SpaceToDepth", 1, validate=_validate_depth_to_space, cost=OUTPUT_ONLY)
def space_to_depth(x: np.ndarray, blocksize: int = 1, mode: str = "DCR") -> np.ndarray:
    """``mode`` arrived in a later opset; DCR (the only layout before) puts the block offset first."""
    n, c, h, w = x.shape
    b = blocksize
    blocks = x.reshape(n, c, h // b, b, w // b, b)
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return blocks.transpose(order).reshape(n, c * b * b, h // b, w // b)
