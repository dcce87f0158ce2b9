"""What a night runs (passes, batching, tiles, encoders) and the probes that time it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frame.config import load_config
from frame.diffusion import load_pipeline
from frame.estimate.plan import build_plan, choose_texts
from frame.estimate.probes import build_probe
from frame.estimate.signature import Signature

PIPELINES = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines"


@pytest.fixture(scope="module")
def sd15():
    return load_pipeline(PIPELINES / "sd15" / "model")


def test_guidance_reads_the_unet_twice_per_step_only_one_after_the_other(sd15):
    w, h = 512, 512
    plan = build_plan(sd15, w, h, 6, 7.5, "euler_a", guidance_mode="sequential", vae_tile=32, vae_tile_overlap=8,
                      choose_texts=13)
    unet = plan.runs_of("unet")[0]
    assert (plan.passes, plan.weight_reads, plan.batched, unet.evaluations) == (2, 2, False, 2)
    assert unet.count.input_shapes["sample"] == (1, 4, 64, 64)
    batched = build_plan(sd15, w, h, 6, 7.5, "euler_a", guidance_mode="batched")
    unet2 = batched.runs_of("unet")[0]
    assert (batched.passes, batched.weight_reads, batched.batched, unet2.evaluations) == (2, 1, True, 1)
    assert unet2.count.input_shapes["sample"] == (2, 4, 64, 64)
    assert unet2.count.weight_bytes == unet.count.weight_bytes  # the same weights, read once for both
    assert unet2.count.macs == 2 * unet.count.macs
    shared = build_plan(sd15, w, h, 6, 7.5, "euler_a")  # the default: guidance_plan.choose, no limit given
    unet3 = shared.runs_of("unet")[0]
    assert (shared.guidance_mode, shared.weight_reads, unet3.evaluations, unet3.items) == ("shared", 1, 1, 2)
    assert unet3.count.input_shapes["sample"] == (1, 4, 64, 64)
    choose = plan.runs_of("choose")[0]  # 13 texts: shared passes of 4, 4, 3, 3 (text_passes)
    assert plan.runs_of("text")[0].evaluations == 2 and (choose.evaluations, choose.items) == (4, 4)
    many = build_plan(sd15, w, h, 6, 7.5, "euler_a", choose_texts=40).runs_of("choose")[0]
    assert (many.evaluations, many.items) == (10, 4)  # the encoder's weights read 10 times, not 40
    vae = plan.runs_of("vae")[0]  # 64x64 latent, 32x32 tiles stepping 24: starts 0, 24, 32 -> 3 x 3
    assert (vae.evaluations, vae.count.input_shapes["latent_sample"]) == (9, (1, 4, 32, 32))


def test_no_guidance_means_one_pass_and_one_prompt(sd15):
    plan = build_plan(sd15, 256, 256, 4, 1.0, "euler", choose_texts=0)
    assert (plan.passes, plan.guided) == (1, False)
    assert plan.runs_of("text")[0].evaluations == 1 and not plan.runs_of("choose")
    assert plan.runs_of("vae")[0].evaluations == 1  # a 32x32 latent fits one tile


def test_sdxl_runs_both_text_encoders_and_the_turbo_minimum_is_one_step():
    pipe = load_pipeline(PIPELINES / "sdxl" / "model")
    plan = build_plan(pipe, 256, 256, None, None, None, choose_texts=5)
    assert [r.name for r in plan.runs_of("text")] == ["text_encoder", "text_encoder_2"]
    assert plan.runs_of("choose")[0].name == "text_encoder_2"  # the pooled embedding the picker uses
    assert set(plan.runs_of("unet")[0].count.input_shapes) >= {"text_embeds", "time_ids"}
    assert plan.min_steps == (1 if plan.turbo else min(10, plan.steps))


def test_choose_texts_follow_the_picker():
    config = load_config(None)
    themes, styles = len(config.taste.themes), len(config.taste.styles)
    assert choose_texts(config, ratings=0) == 12 + 1  # choosing for variety: axis ends + the choice
    assert choose_texts(config, ratings=30) == 12 + themes * styles + 30 + 1


@pytest.mark.parametrize("signature", [
    Signature("conv", ((1, 32, 16, 16), (32, 32, 3, 3)), (("pads", (1, 1, 1, 1)),)),
    Signature("conv", ((1, 16, 16, 16), (32, 16, 3, 3)), (("pads", (1, 1, 1, 1)), ("strides", (2, 2))), "uint8"),
    Signature("upsample_conv", ((1, 16, 40, 40), (16, 16, 3, 3)), (("pads", (1, 1, 1, 1)),), "fp16"),
    Signature("matmul", ((1, 64, 32), (32, 48)), (), "uint8"),
    Signature("attention", ((1, 2, 64, 8), (1, 2, 8, 64), (1, 2, 64, 8))),
    Signature("activation_matmul", ((1, 2, 16, 8), (1, 2, 8, 12))),
])
def test_every_probe_runs_on_the_engine_and_fuses_like_the_model(signature, tmp_path):
    import onnx

    from frame.engine import load_model
    from frame.estimate.counting import count_graph

    proto, feeds = build_probe(signature, 1 << 30, np.random.default_rng(0))
    path = str(tmp_path / "probe.onnx")
    onnx.save(proto, path)
    with load_model(path) as probe:
        probe.run(feeds)
    count = count_graph(path, {k: v.shape for k, v in feeds.items()})
    signatures = {s.signature for s in count.steps if s.signature is not None}
    assert signatures and all(s.storage == signature.storage for s in signatures)
    assert {s.op for s in signatures} == {signature.op}


def test_probes_are_cut_to_the_cap_but_keep_one_band_of_the_kernel():
    from frame.engine.ops.conv import band_rows, winograd_layout
    from frame.estimate.probes import conv_probe

    sig = Signature("conv", ((1, 128, 256, 256), (128, 128, 3, 3)), (("pads", (1, 1, 1, 1)),))
    band = band_rows((256, 256), 128 * 9)  # the VAE's 128-channel conv at 256 x 256: 28 rows an im2col band
    layout = winograd_layout(128, 128, (256, 256), 1)  # ... and it runs as Winograd: one band of its layout
    _, feeds = conv_probe(sig, 1, np.random.default_rng(0))
    assert feeds["x"].shape == (1, 128, max(band, layout.tile * layout.tile_rows), 256)
    per_row = 128 * 128 * 9 * 256
    _, feeds = conv_probe(sig, 100 * per_row, np.random.default_rng(0))
    assert feeds["x"].shape == (1, 128, 100, 256)


def test_measuring_takes_the_heaviest_signatures_first():
    from frame.estimate.machine import measure_throughput

    heavy = Signature("conv", ((1, 32, 16, 16), (32, 32, 3, 3)), (("pads", (1, 1, 1, 1)),))
    light = Signature("matmul", ((1, 8, 8), (8, 8)))
    rates = measure_throughput([(heavy, 1e9), (light, 1.0)], budget_seconds=0.0, min_seconds=0.01)
    assert not rates.signature_macs  # no budget: the fixed probes only
    rates = measure_throughput([(heavy, 1e9), (light, 1.0)], budget_seconds=0.0, min_seconds=0.01,
                               required={light})
    assert set(rates.signature_macs) == {light}  # ... and the required ones (each component's leaders)
    assert rates.gemm_macs > 0 and rates.stream_bytes > 0 and rates.step_seconds > 0
    rates = measure_throughput([(heavy, 1e9), (light, 1.0)], budget_seconds=30.0, min_seconds=0.01)
    assert set(rates.signature_macs) == {heavy, light}
    assert rates.kind_macs["conv"] == pytest.approx(rates.signature_macs[heavy], rel=1e-12)  # a sum of floats


def test_an_onnxstream_folder_counts_like_the_onnx_export_it_was_written_from(tmp_path):
    """tools/onnxstream_layout.py writes OnnxStream's published SD 1.5 layout from the fixture export:
    the same graphs, so the same multiply-adds per step and per decode."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("onnxstream_layout", root / "tools" / "onnxstream_layout.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool
    spec.loader.exec_module(tool)
    folder = tool.write_sd15(PIPELINES / "sd15" / "model", tmp_path / "sd15")
    onnx_plan = build_plan(load_pipeline(PIPELINES / "sd15" / "model"), 256, 256, 4, 7.5, "euler")
    stream_plan = build_plan(load_pipeline(folder), 256, 256, 4, 7.5, "euler")
    for phase in ("unet", "text", "vae"):
        stream, onnx_count = stream_plan.runs_of(phase)[0].count, onnx_plan.runs_of(phase)[0].count
        assert (stream.macs, stream.unknown_shapes) == (onnx_count.macs, 0)
    assert stream_plan.passes == onnx_plan.passes == 2
