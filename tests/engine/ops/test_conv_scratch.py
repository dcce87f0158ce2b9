"""The conv scratch the Conv kernel declares follows what the engine's Winograd conv allocates."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from frame.engine.ops import conv_winograd
from frame.engine.ops.conv import conv_image_scratch, winograd_layout


def _traced_peak(x: np.ndarray, w: np.ndarray, out: np.ndarray, layout: conv_winograd.Plan) -> int:
    """tracemalloc's peak while the Winograd kernel runs ``layout`` (the output allocated before)."""
    tracemalloc.start()
    try:
        conv_winograd.winograd_conv3x3(x, w, [1, 1, 1, 1], out, layout)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("channels", "outputs", "size", "tile", "chunks"),
                         [(64, 32, 64, 2, False), (320, 320, 24, 2, True), (64, 64, 64, 4, False),
                          (320, 320, 32, 4, True)])
def test_winograd_scratch_is_what_the_kernel_allocates(channels, outputs, size, tile, chunks):
    """Band layouts, chunk layouts of both tile sizes, one
    thread: the counted bytes within 3 % of tracemalloc's peak (the output allocated before tracing)."""
    layout = winograd_layout(channels, outputs, (size, size), 1)
    assert layout is not None and (layout.chunk < outputs) == chunks and layout.tile == tile, layout
    rng = np.random.default_rng(0)
    x = rng.standard_normal((channels, size, size), dtype=np.float32)
    w = rng.standard_normal((outputs, channels, 3, 3), dtype=np.float32)
    out = np.empty((outputs, size, size), np.float32)
    peak = _traced_peak(x, w, out, layout)
    counted = conv_image_scratch((1, channels, size, size), (outputs, channels, 3, 3), (1, outputs, size, size),
                           {"pads": [1, 1, 1, 1]})
    assert counted == conv_winograd.scratch_bytes(layout, channels, outputs, (size, size))
    assert abs(counted - peak) <= 0.03 * peak, (counted, peak)


def _assert_counted_within_3_percent_or_80_kb(layout):
    """96 -> 192 channels at 40x40: the counted scratch against tracemalloc's peak."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 40, 40), dtype=np.float32)
    w = rng.standard_normal((192, 96, 3, 3), dtype=np.float32)
    out = np.empty((192, 40, 40), np.float32)
    peak = _traced_peak(x, w, out, layout)
    counted = conv_winograd.scratch_bytes(layout, 96, 192, (40, 40))
    assert abs(counted - peak) <= max(0.03 * peak, 80_000), (counted, peak)


@pytest.mark.parametrize("layout", [conv_winograd.Plan(5, 64, 1, 4), conv_winograd.Plan(4, 96, 1, 2),
                                    conv_winograd.Plan(1, 192, 1, 4, 40)])
def test_banded_chunk_scratch_is_what_the_kernel_allocates(layout):
    """Chunks within bands of tile rows (F(4x4)'s layout for 512 channels at 128x128, here small), and
    bands of one tile row with 40 input channels a block of the input transform: within
    3 % or 80 kB (numpy's buffers for ufuncs on strided views, about 70 kB here for F(2x2), not counted)."""
    _assert_counted_within_3_percent_or_80_kb(layout)


@pytest.mark.parametrize("layout", [conv_winograd.Plan(5, 64, 1, 4), conv_winograd.Plan(4, 96, 1, 2),
                                    conv_winograd.Plan(10, 64, 1, 4)])
def test_blocked_weight_chunk_scratch_is_what_the_kernel_allocates(monkeypatch, layout):
    """U in input-channel blocks (WEIGHT_BLOCK 32 of 96 channels here): each thread's U block, GEMM
    result and partial result counted as allocated, within 3 % or 80 kB (as above)."""
    monkeypatch.setattr(conv_winograd, "WEIGHT_BLOCK", 32)
    _assert_counted_within_3_percent_or_80_kb(layout)
