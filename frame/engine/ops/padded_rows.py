"""Rows of a zero-padded image, filled band by band into one reusable buffer (shared by the conv kernels)."""

from __future__ import annotations

import numpy as np

from frame.engine import buffers


class PaddedRows:
    """Reusable buffer holding rows of the zero-padded image, so the image is never padded whole.

    Padding a 256x512x512 VAE activation at once would cost another 256 MB. The pad columns are
    zeroed once at allocation and never written; only rows beyond the image are cleared per band.
    """

    def __init__(self, channels: int, rows: int, width: int, pads, dtype) -> None:
        self.buffer = buffers.empty((channels, rows, pads[1] + width + pads[3]), dtype)
        self.buffer.fill(0)  # a reused buffer holds old data
        self.pads = pads

    def fill(self, x: np.ndarray, first: int, count: int, transform=None) -> np.ndarray:
        """Rows ``first .. first+count`` (padded coordinates) of the padded ``x`` (C, H, W); ``x`` may
        have fewer channels than the buffer (the last block of a channel-blocked caller).

        ``transform`` (``frame.engine.passes.norm_conv``) maps the copied rows in place before the conv reads
        them (normalisation + SiLU of the conv's input, so that input never exists whole); the pads
        are zeroed after it, as the conv pads the transformed image."""
        c, h, w = x.shape
        top_pad, left = self.pads[0], self.pads[1]
        rows = self.buffer[:c, :count]
        top, bottom = max(first - top_pad, 0), min(first + count - top_pad, h)
        begin, end = top + top_pad - first, bottom + top_pad - first
        if bottom <= top:
            rows[:] = 0
            return rows
        rows[:, :begin] = 0
        rows[:, end:] = 0
        rows[:, begin:end, left:left + w] = x[:, top:bottom]
        if transform is not None:
            transform(rows[:, begin:end])
            rows[:, begin:end, :left] = 0
            rows[:, begin:end, left + w:] = 0
        return rows
