"""The estimate's conv scratch follows what the engine's Winograd conv allocates."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from frame.engine.ops import conv_winograd
from frame.engine.ops.conv import winograd_layout
from frame.estimate.scratch import conv_scratch


@pytest.mark.parametrize(("channels", "outputs", "size"), [(64, 64, 64), (320, 320, 32)])
def test_winograd_scratch_is_what_the_kernel_allocates(channels, outputs, size):
    """A band layout (64 channels at 64x64) and a chunk layout (320 at 32x32), one thread: the
    counted bytes within 3 % of tracemalloc's peak (the output allocated before tracing)."""
    layout = winograd_layout(channels, outputs, (size, size), 1)
    assert layout is not None and (layout.chunk >= outputs) == (size == 64)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((channels, size, size), dtype=np.float32)
    w = rng.standard_normal((outputs, channels, 3, 3), dtype=np.float32)
    out = np.empty((outputs, size, size), np.float32)
    tracemalloc.start()
    try:
        conv_winograd.winograd_conv3x3(x, w, [1, 1, 1, 1], out, layout)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    counted = conv_scratch((1, channels, size, size), (outputs, channels, 3, 3), (1, outputs, size, size),
                           {"pads": [1, 1, 1, 1]})
    assert counted == conv_winograd.scratch_bytes(layout, channels, outputs, (size, size))
    assert abs(counted - peak) <= 0.03 * peak, (counted, peak)
