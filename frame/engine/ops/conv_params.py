"""Spatial parameters shared by the conv families (``conv``, ``conv_nd``) and pooling: strides,
dilations and pads with ``auto_pad`` resolved. Its own module so ``conv`` and ``conv_nd`` (which
``conv`` dispatches 3-D convs to) need not import each other."""

from __future__ import annotations


def spatial_params(kernel: tuple[int, ...], in_shape: tuple[int, ...], strides, dilations, pads,
                   auto_pad: str) -> tuple[list[int], list[int], list[int]]:
    """Strides, dilations and [begin..., end...] pads for the spatial dims, resolving auto_pad."""
    rank = len(kernel)
    strides = list(strides or [1] * rank)
    dilations = list(dilations or [1] * rank)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(in_shape, kernel, strides, dilations):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begins.append(large if auto_pad == "SAME_LOWER" else small)
            ends.append(small if auto_pad == "SAME_LOWER" else large)
        pads = begins + ends
    elif auto_pad == "VALID" or not pads:
        pads = [0] * (2 * rank)
    return strides, dilations, list(pads)
