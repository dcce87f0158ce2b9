"""glibc tuning that returns freed buffers to the OS (what keeps peak RSS near live bytes)."""

from __future__ import annotations

import sys

import pytest

from frame.engine import memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_mmap_threshold_is_fixed_once():
    assert memory.return_freed_buffers_to_os() is True
    assert memory.return_freed_buffers_to_os() is True  # idempotent
