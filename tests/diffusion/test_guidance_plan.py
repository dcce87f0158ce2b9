"""``guidance_plan.choose``: weights read once per step wherever the worker's memory limit allows."""

from __future__ import annotations

import numpy as np
import pytest

from frame.diffusion import guidance_plan as plan
from frame.engine.io.weights import WeightRef


def test_sd15_at_its_native_size_shares_the_fetches_within_the_default_worker_limit():
    chosen = plan.choose("sd15", 512, 512, "fp32", 440)
    assert chosen.mode == "shared" and chosen.estimated_peak_mb + plan.WORKER_EXTRA_MB <= 440
    assert "weights read once per step" in chosen.reason


@pytest.mark.parametrize("limit", [300, 400])
def test_a_limit_too_small_keeps_the_passes_one_after_the_other(limit):
    chosen = plan.choose("sd15", 512, 512, "fp32", limit)
    assert chosen.mode == "sequential" and f"over the worker's {limit} MB" in chosen.reason


def test_larger_pictures_need_more_and_fall_back():
    native = plan.estimate_render_peak_mb("sd15", 512, 512, "fp32", 2)
    wide = plan.estimate_render_peak_mb("sd15", 768, 512, "fp32", 2)
    assert wide > native > plan.estimate_render_peak_mb("sd15", 512, 512, "fp32", 1)
    assert plan.choose("sd15", 768, 512, "fp32", 440).mode == "sequential"
    assert plan.choose("sd15", 768, 512, "fp32", 1024).mode == "shared"


def test_no_figures_no_guidance_and_no_limit():
    assert plan.choose("sdxl", 1024, 1024, "fp16", 440).mode == "sequential"  # not measured: smallest peak
    assert plan.choose("sdxl", 1024, 1024, "fp16", None).mode == "shared"  # nothing to stay within
    assert plan.choose("sd15", 512, 512, "fp32", 200, guided=False).mode == "sequential"
    assert plan.estimate_render_peak_mb("sdxl", 1024, 1024, "fp16", 1) is None


def test_precision_of_streamed_weights():
    def ref(dtype, n):
        r = WeightRef("w", np.dtype(dtype), (n,))
        r.length = n * np.dtype(dtype).itemsize
        return r

    assert plan.precision_of([ref(np.float32, 10), ref(np.float16, 10)]) == "fp32"
    assert plan.precision_of([ref(np.float32, 2), ref(np.float16, 100)]) == "fp16"
    assert plan.precision_of([ref(np.float32, 100), ref(np.uint8, 10)]) == "uint8"
    assert plan.precision_of([]) == "fp32"
