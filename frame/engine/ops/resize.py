"""Resize (opsets 10, 11, 13, 18, 19) and the older Upsample: nearest, linear and cubic, separably.

Each resized axis is handled on its own: compute the source coordinate of every output index with
the node's ``coordinate_transformation_mode``, then gather (nearest) or blend 2 (linear) or 4 (cubic)
source slices along that axis. N-linear and N-cubic interpolation are separable, so this equals the
spec's formulas. Shrinking with ``antialias`` (opset 18) applies a widened filter as a small dense
(out, in) weight matrix per axis. Nearest keeps the input dtype (it only copies values); linear/cubic compute in
float32 and cast back.
"""

from __future__ import annotations

import numpy as np

from frame.engine.ops.registry import OUTPUT_ONLY, UnsupportedOp, passes, register

_COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                     "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_MODES = ("nearest", "linear", "cubic")
_ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")


def _validate_resize(attrs: dict) -> None:
    allowed = {"mode": _MODES, "coordinate_transformation_mode": _COORDINATE_MODES,
               "nearest_mode": _NEAREST_MODES, "keep_aspect_ratio_policy": _ASPECT_POLICIES}
    for name, values in allowed.items():
        if name in attrs and attrs[name] not in values:
            raise UnsupportedOp(f"Resize attribute {name!r} = {attrs[name]!r} (expected one of {', '.join(values)})")


def _source_coords(mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """Source coordinate of each output index along one axis, per the ONNX spec.

    Computed in float32 like onnxruntime, so that nearest-neighbour ties round the same way.
    """
    o = np.arange(out_len, dtype=np.float32)
    scale = np.float32(scale)
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = np.float32(out_len) / (scale * np.float32(in_len))
        offset = np.float32(in_len) / 2 * (1 - adjustment)
        return offset + (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_len > 1 else np.zeros(out_len, np.float32)
    if mode == "align_corners":
        return o * np.float32(in_len - 1) / np.float32(out_len - 1) if out_len > 1 else np.zeros(out_len, np.float32)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    start, end = np.float32(roi[0]), np.float32(roi[1])  # tf_crop_and_resize
    if out_len > 1:
        return start * (in_len - 1) + o * (end - start) * (in_len - 1) / np.float32(out_len - 1)
    return np.full(out_len, 0.5 * (start + end) * (in_len - 1), dtype=np.float32)


def _nearest_index(coords: np.ndarray, nearest_mode: str, in_len: int) -> np.ndarray:
    if nearest_mode == "round_prefer_floor":
        index = np.ceil(coords - 0.5)
    elif nearest_mode == "round_prefer_ceil":
        index = np.floor(coords + 0.5)
    elif nearest_mode == "floor":
        index = np.floor(coords)
    else:
        index = np.ceil(coords)
    return np.clip(index, 0, in_len - 1).astype(np.int64)


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic convolution weights for the taps at offsets -1, 0, 1, 2 from floor(x)."""
    d = np.stack([t + 1, t, 1 - t, 2 - t], axis=-1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far)


def _antialias_matrix(coords: np.ndarray, in_len: int, scale: float, opts: dict) -> np.ndarray:
    """(out_len, in_len) weights of the widened linear/cubic filter used when shrinking with antialias.

    Follows the ONNX reference: the filter is stretched by 1/scale; taps sit at ``base + k`` with
    ``base = ceil(x) - 1`` (ties take the left pixel); edges repeat the border pixel unless
    ``exclude_outside``; weights are normalised to sum to 1.
    """
    coords = coords.astype(np.float64)
    base = np.ceil(coords) - 1
    ratio = coords - base
    support = 2 if opts["mode"] == "cubic" else 1
    start = int(np.floor(-support / scale) + 1)
    offsets = np.arange(start, 2 - start)
    distance = np.abs(scale * (offsets[None, :] - ratio[:, None]))
    if support == 1:
        weights = np.clip(1 - distance, 0, 1)
    else:
        a = opts["cubic_coeff_a"]
        near = ((a + 2) * distance - (a + 3)) * distance * distance + 1
        far = ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a
        weights = np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))
    positions = base.astype(np.int64)[:, None] + offsets[None, :]
    if opts["exclude_outside"]:
        weights = np.where((positions < 0) | (positions >= in_len), 0.0, weights)
    weights /= weights.sum(axis=1, keepdims=True)
    matrix = np.zeros((coords.size, in_len))
    rows = np.repeat(np.arange(coords.size), offsets.size)
    np.add.at(matrix, (rows, np.clip(positions, 0, in_len - 1).reshape(-1)), weights.reshape(-1))
    return matrix.astype(np.float32)


def _along(x: np.ndarray, axis: int, shape: tuple[int, ...]) -> np.ndarray:
    view = [1] * len(shape)
    view[axis] = -1
    return x.reshape(view)


def _resize_axis(x: np.ndarray, axis: int, out_len: int, scale: float, roi, opts: dict) -> np.ndarray:
    in_len = x.shape[axis]
    coords = _source_coords(opts["coordinate_transformation_mode"], out_len, in_len, scale, roi)
    mode = opts["mode"]
    if mode != "nearest" and opts.get("antialias") and scale < 1:
        matrix = _antialias_matrix(coords, in_len, float(scale), opts)
        result = np.moveaxis(np.moveaxis(x, axis, -1) @ matrix.T, -1, axis)
    elif mode == "nearest":
        result = np.take(x, _nearest_index(coords, opts["nearest_mode"], in_len), axis=axis)
    elif mode == "linear":
        clamped = np.clip(coords, 0, in_len - 1)
        low = np.floor(clamped).astype(np.int64)
        high = np.minimum(low + 1, in_len - 1)
        w = _along((clamped - low).astype(np.float32), axis, x.ndim * [0])
        result = np.take(x, low, axis=axis) * (1 - w)
        result += np.take(x, high, axis=axis) * w
    else:
        base = np.floor(coords).astype(np.int64)
        weights = _cubic_weights(coords - base, opts["cubic_coeff_a"])
        taps = base[:, None] + np.arange(-1, 3)
        if opts["exclude_outside"]:
            weights = np.where((taps < 0) | (taps >= in_len), 0.0, weights)
            weights /= weights.sum(axis=1, keepdims=True)
        taps = np.clip(taps, 0, in_len - 1)
        result = sum(np.take(x, taps[:, k], axis=axis) * _along(weights[:, k].astype(np.float32), axis,
                                                                 x.ndim * [0]) for k in range(4))
    if opts["coordinate_transformation_mode"] == "tf_crop_and_resize":
        outside = _along((coords < 0) | (coords > in_len - 1), axis, x.ndim * [0])
        result = np.where(outside, np.asarray(opts["extrapolation_value"], result.dtype), result)
    return result


def _output_plan(x: np.ndarray, scales, sizes, axes, policy: str, crop: bool, roi) -> list[tuple]:
    """(axis, out_len, scale, roi pair) for every axis the node resizes."""
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    starts_ends = [(0.0, 1.0)] * len(axes)
    if crop and roi is not None and roi.size:
        roi = [float(v) for v in roi.reshape(-1)]
        if len(roi) == 2 * x.ndim and len(axes) != x.ndim:
            roi = [roi[a] for a in axes] + [roi[x.ndim + a] for a in axes]
        starts_ends = list(zip(roi[: len(axes)], roi[len(axes):]))
    in_lens = [x.shape[a] for a in axes]
    if sizes is not None and sizes.size:
        out_lens = [int(v) for v in sizes.reshape(-1)]
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(o / i for o, i in zip(out_lens, in_lens))
            out_lens = [int(np.floor(common * i + 0.5)) for i in in_lens]
            factors = [common] * len(axes)
        else:
            factors = [np.float32(o) / np.float32(i) for o, i in zip(out_lens, in_lens)]
    elif scales is not None and scales.size:
        factors = [float(v) for v in scales.reshape(-1)]
        spans = [end - start for start, end in starts_ends] if crop else [1.0] * len(axes)
        out_lens = [int(np.floor(i * span * f)) for i, span, f in zip(in_lens, spans, factors)]
    else:
        raise ValueError("Resize needs either scales or sizes")
    if len(out_lens) != len(axes):
        raise ValueError(f"Resize got {len(out_lens)} scales/sizes for {len(axes)} axes")
    return list(zip(axes, out_lens, factors, starts_ends))


def _nearest_gather(x: np.ndarray, plan: list[tuple], opts: dict) -> np.ndarray:
    """Nearest resize of several axes as one gather, so no half-size intermediate is allocated
    (134 MB for the SD VAE's last 2x upsample). Advanced indices keep their place only when the
    resized axes are adjacent, so the index arrays span every axis from the first to the last."""
    axes = [step[0] for step in plan]
    first, last = min(axes), max(axes)
    index: list = [slice(None)] * x.ndim
    span = last - first + 1
    for position, axis in enumerate(range(first, last + 1)):
        step = next((p for p in plan if p[0] == axis), None)
        if step is None:
            chosen = np.arange(x.shape[axis])
        else:
            coords = _source_coords(opts["coordinate_transformation_mode"], step[1], x.shape[axis], step[2], step[3])
            chosen = _nearest_index(coords, opts["nearest_mode"], x.shape[axis])
        shape = [1] * span
        shape[position] = -1
        index[axis] = chosen.reshape(shape)
    return x[tuple(index)]


def _resize(x: np.ndarray, roi, scales, sizes, opts: dict, axes=None, policy: str = "stretch") -> np.ndarray:
    crop = opts["coordinate_transformation_mode"] == "tf_crop_and_resize"
    plan = _output_plan(x, scales, sizes, axes, policy, crop, roi)
    plan = [step for step in plan if not (step[1] == x.shape[step[0]] and step[2] == 1.0 and not crop)]
    if opts["mode"] == "nearest" and not crop and len(plan) > 1:
        return _nearest_gather(x, plan, opts)
    work = x if opts["mode"] == "nearest" or x.dtype == np.float32 else x.astype(np.float32)
    for axis, out_len, factor, axis_roi in plan:
        work = _resize_axis(work, axis, out_len, factor, axis_roi, opts)
    if work.dtype != x.dtype:
        work = (np.rint(work) if x.dtype.kind in "iu" else work).astype(x.dtype)
    return work


def _legacy_opts(mode: str, scales) -> dict:
    """Upsample and Resize-10: asymmetric coordinates; nearest floors when enlarging, ceils when shrinking
    (onnxruntime's behaviour, which exporters of that era were written against)."""
    shrinking = scales is not None and bool(np.any(np.asarray(scales) < 1))
    return {"mode": mode, "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "ceil" if shrinking else "floor", "cubic_coeff_a": -0.75, "exclude_outside": 0,
            "extrapolation_value": 0.0}


@register("Upsample", 7, validate=_validate_resize, cost=OUTPUT_ONLY)
def upsample_v7(x: np.ndarray, mode: str = "nearest", scales: list[float] | None = None) -> np.ndarray:
    return _resize(x, None, np.asarray(scales), None, _legacy_opts(mode, scales))


@register("Upsample", 9, validate=_validate_resize, cost=OUTPUT_ONLY)
def upsample_v9(x: np.ndarray, scales: np.ndarray, mode: str = "nearest") -> np.ndarray:
    return _resize(x, None, scales, None, _legacy_opts(mode, scales))


@register("Resize", 10, validate=_validate_resize, cost=passes(2.0))
def resize_v10(x: np.ndarray, scales: np.ndarray, mode: str = "nearest") -> np.ndarray:
    return _resize(x, None, scales, None, _legacy_opts(mode, scales))


@register("Resize", 11, validate=_validate_resize, cost=passes(2.0))
def resize_v11(x: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
               sizes: np.ndarray | None = None, /, *, coordinate_transformation_mode: str = "half_pixel",
               cubic_coeff_a: float = -0.75, exclude_outside: int = 0, extrapolation_value: float = 0.0,
               mode: str = "nearest", nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    opts = {"mode": mode, "coordinate_transformation_mode": coordinate_transformation_mode,
            "nearest_mode": nearest_mode, "cubic_coeff_a": cubic_coeff_a, "exclude_outside": exclude_outside,
            "extrapolation_value": extrapolation_value}
    return _resize(x, roi, scales, sizes, opts)


@register("Resize", 18, validate=_validate_resize, cost=passes(2.0))
def resize_v18(x: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
               sizes: np.ndarray | None = None, /, *, antialias: int = 0, axes: list[int] | None = None,
               coordinate_transformation_mode: str = "half_pixel", cubic_coeff_a: float = -0.75,
               exclude_outside: int = 0, extrapolation_value: float = 0.0,
               keep_aspect_ratio_policy: str = "stretch", mode: str = "nearest",
               nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    """Adds ``axes``, ``keep_aspect_ratio_policy`` and ``antialias`` (a widened filter when shrinking
    with linear/cubic); half_pixel_symmetric arrives in opset 19."""
    opts = {"mode": mode, "coordinate_transformation_mode": coordinate_transformation_mode,
            "nearest_mode": nearest_mode, "cubic_coeff_a": cubic_coeff_a, "exclude_outside": exclude_outside,
            "extrapolation_value": extrapolation_value, "antialias": antialias}
    return _resize(x, roi, scales, sizes, opts, axes, keep_aspect_ratio_policy)
