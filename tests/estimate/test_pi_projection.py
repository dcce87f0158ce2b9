"""The Pi Zero 2 W projection is counted work at documented constants only (issue 28 item 4): the same
settings give the same Pi figures whatever this machine measured. It once kept this machine's measured
efficiency per step signature, its step cost and its load times, and three runs of one night on a
loaded machine projected 29 s, 1 min 45 s and 46 s."""

from __future__ import annotations

import dataclasses

import pytest

from frame.config import Config, ModelConfig
from frame.diffusion import load_pipeline
from frame.estimate import configured, pi
from frame.estimate.machine import measure_throughput
from frame.estimate.signature import Signature
from frame.models import demo_model_path


@pytest.fixture(scope="module")
def demo():
    return load_pipeline(str(demo_model_path()))


def _perturbed(rates, factor: float):
    """This machine under another load: every measured figure off by its own factor."""
    return dataclasses.replace(
        rates, gemm_macs=rates.gemm_macs * factor, stream_bytes=rates.stream_bytes / factor,
        step_seconds=rates.step_seconds * 3 * factor, kind_macs={k: v * factor for k, v in rates.kind_macs.items()},
        signature_macs={s: v * factor ** (1 + i % 3) for i, (s, v) in enumerate(rates.signature_macs.items())},
        op_macs={k: v / factor for k, v in rates.op_macs.items()},
        decode_seconds={k: v * 7 for k, v in rates.decode_seconds.items()}, read_bytes=1e6 * factor)


def test_the_pi_projection_is_the_same_under_any_measurement(demo, monkeypatch):
    config = dataclasses.replace(Config(), model=ModelConfig(size="256x256", steps=8))
    measured = measure_throughput([], budget_seconds=0.2)
    results = []
    for factor in (1.0, 0.2, 4.5):
        monkeypatch.setattr(configured, "measure_throughput", lambda *a, f=factor, **k: _perturbed(measured, f))
        results.append(configured.estimate_config(config, pipe=demo, ratings=0))
    here = [r.estimate.here for r in results]
    board = [r.estimate.projections[1] for r in results]
    assert len({round(h.seconds, 6) for h in here}) == 3  # this machine's figures follow its measurement
    assert all(b.phases == board[0].phases and b.step_seconds == board[0].step_seconds for b in board), board
    alternatives = [r.alternative.projections[1].phases for r in results]
    assert all(a == alternatives[0] for a in alternatives)


def test_the_pi_rates_are_a_function_of_the_signature_alone():
    unet = Signature("matmul", ((1, 4096, 320), (320, 320)))
    text = Signature("matmul", ((1, 77, 768), (768, 768)))
    rates = pi.pi_throughput([unet, text, unet])
    assert rates.signature_macs[unet] == pytest.approx(pi.GEMM_MACS * pi.OP_EFFICIENCY["matmul"])
    assert rates.signature_macs[text] == pytest.approx(pi.GEMM_MACS * pi.FEW_ROWS_EFFICIENCY["matmul"])
    assert rates.decode_seconds["fp16"] == pytest.approx(6 / pi.STREAM_BYTES)
    assert rates.decode_seconds["uint8"] < rates.decode_seconds["fp16"]  # fewer bytes read per value
    assert (rates.worker_start_seconds, rates.load_seconds_per_node) == (pi.WORKER_START_SECONDS,
                                                                          pi.LOAD_SECONDS_PER_NODE)
    assert pi.pi_throughput([text], url=True).read_bytes == pi.WIFI_READ_BYTES



def test_the_winograd4_gain_applies_to_the_large_norm_convs_it_was_measured_on():
    """NORM_CONV_WINOGRAD4_GAIN and _TRANSFORM_GAIN (the VAE decoder's norm convs, measured across F(4x4)
    and across its faster input transform): a VAE-size
    norm conv the engine runs as F(4x4) gets it; a UNet-size one (64x64, no gain measured), a plain
    conv and a 3-output conv_out (F(2x2)) do not."""
    def sig(op, c, m, size):
        return Signature(op, ((1, c, size, size), (m, c, 3, 3)), (("pads", (1, 1, 1, 1)), ("strides", (1, 1))))

    base = pi.OP_EFFICIENCY["norm_conv"]
    for gained in (sig("norm_conv", 512, 512, 72), sig("norm_conv", 256, 256, 256)):
        assert pi.efficiency(gained) == pytest.approx(
            base * pi.NORM_CONV_WINOGRAD4_GAIN * pi.NORM_CONV_WINOGRAD4_TRANSFORM_GAIN)
    for plain in (sig("norm_conv", 320, 320, 64), sig("norm_conv", 128, 3, 512)):
        assert pi.efficiency(plain) == base
    assert pi.efficiency(sig("conv", 512, 512, 128)) == pi.OP_EFFICIENCY["conv"]


def test_the_weight_block_gain_applies_to_the_convs_that_make_u_in_blocks():
    """WEIGHT_BLOCK_GAIN (the UNet's norm and upsample convs, measured across the blocked weight
    layout): the 32x32 and 16x16 norm convs and the upsample convs of 16x16 and 8x8 images (convolved
    at twice their size) get it; a 64x64 norm conv (256 F(4x4) tiles: one block), an 8x8 one
    (im2col), a fused 32 -> 64 upsample, a plain conv and a 96-channel conv (one block) do not."""
    def sig(op, c, m, size):
        return Signature(op, ((1, c, size, size), (m, c, 3, 3)), (("pads", (1, 1, 1, 1)), ("strides", (1, 1))))

    for op, c, m, size in [("norm_conv", 640, 640, 32), ("norm_conv", 2560, 1280, 16),
                           ("upsample_conv", 1280, 1280, 16), ("upsample_conv", 1280, 1280, 8)]:
        assert pi.efficiency(sig(op, c, m, size)) == pytest.approx(pi.OP_EFFICIENCY[op] * pi.WEIGHT_BLOCK_GAIN[op])
    for op, c, m, size in [("norm_conv", 320, 320, 64), ("norm_conv", 1280, 1280, 8),
                           ("upsample_conv", 640, 640, 32), ("conv", 640, 640, 32), ("norm_conv", 96, 96, 32)]:
        assert pi.efficiency(sig(op, c, m, size)) == pi.OP_EFFICIENCY[op]


def test_a_night_with_kept_plans_loads_each_component_at_the_kept_share(demo, monkeypatch, tmp_path):
    """The render keeps each component's plan in the state folder (frame.engine.plan_cache), so every
    night after the first loads the components at pi.KEPT_PLAN_LOAD_SHARE of planning them; without a
    state folder every night plans them. The first night's extra is said in a note."""
    measured = measure_throughput([], budget_seconds=0.2)
    monkeypatch.setattr(configured, "measure_throughput", lambda *a, **k: measured)
    runs = {}
    for name, state in (("kept", str(tmp_path / "state")), ("planned", None)):
        config = dataclasses.replace(Config(), model=ModelConfig(size="256x256", steps=8), state_dir=state)
        runs[name] = configured.estimate_config(config, pipe=demo, ratings=0, alternative=False)
    kept, planned = (runs[n].estimate for n in ("kept", "planned"))
    assert kept.plan.kept_plans and not planned.plan.kept_plans
    nodes = sum(r.count.node_count for r in kept.plan.runs)
    saved = nodes * pi.LOAD_SECONDS_PER_NODE * (1 - pi.KEPT_PLAN_LOAD_SHARE)
    assert planned.projections[1].seconds - kept.projections[1].seconds == pytest.approx(saved)
    assert kept.projections[1].phases["unet"] < planned.projections[1].phases["unet"]
    assert any(f"{saved:.0f} s more" in note and "model-plans" in note for note in kept.notes)
    assert not any("plans each model once" in note for note in planned.notes)
