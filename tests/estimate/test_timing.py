"""The time model: the prefetch reader replayed by hand, step compute from rates, and the step choice."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frame.engine.plan_costs import StepCost
from frame.estimate.choice import ESTIMATE_MARGIN, choose_steps, format_duration, minimum_steps
from frame.estimate.machine import Throughput
from frame.estimate.signature import Signature
from frame.estimate.timing import simulate, step_compute


def test_without_a_read_rate_time_is_the_compute():
    assert simulate([1.0, 2.0], [(10,), (20,)], None, 32) == 3.0


def test_reads_on_request_do_not_overlap_compute():
    """nocache: each op waits for its own reads: 1 + (1 + 2) = 4 s at 10 B/s."""
    assert simulate([1.0, 2.0], [(10,), (10,)], 10.0, None) == pytest.approx(1 + 1 + 1 + 2)


def test_small_weights_are_read_while_the_previous_op_computes():
    """Budget 100 B, 10 B/s: weight 2 (10 B) is read during op 1's 5 s of compute, so op 2 starts
    when op 1 ends: 1 (first read) + 5 + 1 = 7 s."""
    assert simulate([5.0, 1.0], [(10,), (10,)], 10.0, 100) == pytest.approx(7.0)


def test_a_weight_bigger_than_the_budget_is_read_when_asked():
    """Weight 2 (50 B) exceeds the 20 B budget: read after op 1 finishes: 1 + 5 + 5 + 1 = 12 s."""
    assert simulate([5.0, 1.0], [(10,), (50,)], 10.0, 20) == pytest.approx(12.0)


def test_the_budget_holds_the_reader_back():
    """Budget 15 B: during op 1 (10 s) the reader fetches weight 2 (10 B) but not weight 3 (10 B more
    than fits) until op 2 asks for weight 2 at t=11; op 3 then waits for its read: 11 + 1 (op 2)
    = 12 vs weight 3 read 11..12, op 3 runs 12..13."""
    assert simulate([10.0, 1.0, 1.0], [(10,), (10,), (10,)], 10.0, 15) == pytest.approx(13.0)


def test_a_row_streamed_weight_is_read_beside_its_ops_compute():
    """An op reading its own 40 B weight in 4 blocks at 10 B/s (1 s a block), 8 s of compute (2 s a
    block): the first block's read, then each block's compute beside the next read, 1 + 4 × 2 = 9 s,
    not 4 + 8. Reads no faster than the compute: 4 × 1 s blocks beside 0.5 s computes: 4 + 0.5."""
    assert simulate([8.0], [()], 10.0, 100, [(40, 4)]) == pytest.approx(9.0)
    assert simulate([2.0], [()], 10.0, 100, [(40, 4)]) == pytest.approx(4.5)
    assert simulate([8.0], [()], 10.0, 100, [(40, 1)]) == pytest.approx(12.0)  # one block: nothing to overlap


def test_row_reads_keep_the_storage_busy_for_the_next_ops_read_ahead():
    """One storage: op 2's 10 B weight is read only once op 1's 40 B of rows are in (t = 4). Op 1
    computing until 1 + 4 × 2 = 9 s hides that read; computing 0.25 s a block it ends at 4.25 and op 2
    waits for its weight (read 4..5), then runs 5..6."""
    assert simulate([8.0, 1.0], [(), (10,)], 10.0, 100, [(40, 4), (0, 0)]) == pytest.approx(10.0)
    assert simulate([1.0, 1.0], [(), (10,)], 10.0, 100, [(40, 4), (0, 0)]) == pytest.approx(6.0)


def _rates(**kinds: float) -> Throughput:
    return Throughput(gemm_macs=1e9, stream_bytes=1e9, step_seconds=0.001, kind_macs=kinds)


def test_step_compute_uses_the_signature_rate_else_the_kind_average():
    sig = Signature("conv", ((1, 4, 8, 8), (4, 4, 3, 3)))
    rates = _rates(conv=2e9, matmul=1e9, attention=1e9)
    rates.signature_macs[sig] = 4e9
    step = StepCost("Conv", (8e9, 0, 0), (8e9, 0, 0), 1e9, 0, (), 0, 0, 0, sig)
    assert step_compute(step, rates) == pytest.approx(0.001 + 2.0 + 1.0)
    other = StepCost("Conv", (8e9, 0, 0), (8e9, 0, 0), 0, 0, (), 0, 0, 0, None)
    assert step_compute(other, rates) == pytest.approx(0.001 + 4.0)


def test_attention_steps_do_not_add_their_fused_softmax_traffic_twice():
    sig = Signature("attention", ((1, 2, 8, 4), (1, 2, 4, 8), (1, 2, 8, 4)))
    rates = _rates(conv=1e9, matmul=1e9, attention=1e9)
    step = StepCost("SlicedAttention", (0, 0, 1e9), (0, 0, 1e9), 5e9, 0, (), 0, 0, 0, sig)
    assert step_compute(step, rates) == pytest.approx(0.001 + 1.0)


def test_step_choice_fits_reduces_and_keeps_the_minimum():
    full = choose_steps(20, 10, fixed_seconds=600, step_seconds=100, available_seconds=3000, margin=0.0)
    assert (full.steps, full.fits, full.reduced) == (20, True, False)
    assert "all 20 steps" in full.sentence() and "spare" not in full.sentence()
    reduced = choose_steps(20, 10, fixed_seconds=600, step_seconds=200, available_seconds=3500, margin=0.0)
    assert (reduced.steps, reduced.fits, reduced.reduced) == (14, True, True)
    assert reduced.projected_seconds == 600 + 14 * 200
    assert "14 of 20 steps" in reduced.sentence()
    short = choose_steps(20, 10, fixed_seconds=600, step_seconds=200, available_seconds=1000)
    assert (short.steps, short.fits) == (10, False)
    assert "the minimum" in short.sentence() and "will likely miss" in short.sentence()
    few = choose_steps(3, 10, fixed_seconds=0, step_seconds=1, available_seconds=100)
    assert few.steps == 3  # never more than configured, even when the minimum is higher


def test_step_choice_leaves_the_estimates_error_free_before_the_deadline():
    """The estimate ran 10-11 % short of real SD 1.5 renders (docs/estimate.md), and the deadline stops a
    render still running: a night chosen to fit its projection exactly is lost when the projection is
    short. With the default margin, a night 11 % slower than projected still ends in time."""
    assert ESTIMATE_MARGIN >= 0.11
    fixed, step, available = 600.0, 200.0, 3500.0
    choice = choose_steps(20, 10, fixed_seconds=fixed, step_seconds=step, available_seconds=available)
    real_night = 1.11 * (fixed + choice.steps * step)
    assert real_night <= available, choice
    assert (choice.steps, choice.fits, choice.margin) == (12, True, ESTIMATE_MARGIN)  # 14 without the margin
    assert "12 of 20 steps" in choice.sentence() and "15% to spare" in choice.sentence()
    # the minimum that fits only without the margin is rendered, and the owner is told it may miss
    tight = choose_steps(20, 10, fixed_seconds=600, step_seconds=200, available_seconds=2700)
    assert (tight.steps, tight.fits) == (10, False)
    assert "for the estimate's error" in tight.sentence() and "the picture may miss it" in tight.sentence()


def test_minimum_steps_by_model():
    assert minimum_steps(turbo=True, sampler="euler_a", configured=4) == 1
    assert minimum_steps(turbo=False, sampler="lcm", configured=8) == 4
    assert minimum_steps(turbo=False, sampler="euler_a", configured=20) == 10
    assert minimum_steps(turbo=False, sampler="euler_a", configured=6) == 6


def test_durations_read_plainly():
    assert format_duration(3.25) == "3.2 s"
    assert format_duration(75) == "1 min 15 s"
    assert format_duration(3 * 3600 + 5 * 60) == "3 h 05 min"


def _matmul_step(rows: int, signature: Signature | None = None, macs: float = 1e9) -> StepCost:
    sig = signature or Signature("matmul", ((1, rows, 64), (64, 64)))
    return StepCost("MatMul", (0, macs, 0), (0, macs, 0), 0, 0, (), 0, 0, 0, sig)


def test_unprobed_signatures_run_at_their_own_components_average():
    """SDXL Turbo: the text encoders' thin GEMMs were probed, the UNet's not; at the overall matmul
    average the UNet came out 10x too slow. Within a component, its own probed signatures count."""
    text, unet, unet_unprobed = _matmul_step(77), _matmul_step(256), _matmul_step(1024)
    rates = _rates(conv=1e9, matmul=2e9, attention=1e9)
    rates.signature_macs.update({text.signature: 2e9, unet.signature: 16e9})
    in_unet = rates.within([unet, unet_unprobed])
    assert in_unet.kind_macs["matmul"] == 16e9 and in_unet.kind_macs["conv"] == 1e9
    assert step_compute(unet_unprobed, in_unet) == pytest.approx(0.001 + 1 / 16)
    assert step_compute(unet_unprobed, rates) == pytest.approx(0.001 + 1 / 2)  # without: the overall average
    assert rates.within([_matmul_step(3)]) is rates  # nothing probed in it: the overall averages


def test_probing_order_gives_every_component_its_own_kinds_first():
    from frame.estimate.machine import component_leaders, heaviest_signatures

    text = [_matmul_step(77), _matmul_step(78, macs=0.5e9)]
    unet = [_matmul_step(256, macs=2e9), _matmul_step(257, macs=1.5e9)]
    order = [sig for sig, _ in heaviest_signatures([(text, 93), (unet, 1)])]
    # the text encoder's second GEMM outweighs the UNet's heaviest (93 runs), but the UNet's comes first
    assert order == [text[0].signature, unet[0].signature, text[1].signature, unet[1].signature]
    assert component_leaders([(text, 93), (unet, 1)]) == {text[0].signature, unet[0].signature}


def _conv_step(op: str, channels: int, element_bytes: float = 0.0, macs: float = 1e9) -> StepCost:
    sig = Signature(op, ((1, channels, 8, 8), (channels, channels, 3, 3)), (("pads", (1, 1, 1, 1)),), "fp16")
    return StepCost("DecodedWeight", (macs, 0, 0), (macs, 0, 0), element_bytes, 0, (), 0, 0, 0, sig)


def test_unprobed_signatures_run_at_their_own_ops_average_before_their_kinds():
    """The SD 1.5 UNet's GroupNorm convs ran at 0.3x the rate of its probed Winograd and upsampling
    convs: an unprobed NormConv takes the probed NormConvs' rate, not the conv average."""
    plain, norm, norm_unprobed = _conv_step("conv", 32), _conv_step("norm_conv", 64), _conv_step("norm_conv", 128)
    rates = _rates(conv=1e9, matmul=1e9, attention=1e9)
    rates.signature_macs.update({plain.signature: 40e9, norm.signature: 10e9})
    here = rates.within([plain, norm, norm_unprobed])
    assert here.op_macs == {"conv": 40e9, "norm_conv": 10e9}
    assert step_compute(norm_unprobed, here) == pytest.approx(0.001 + 1 / 10e9 * 1e9)
    assert here.kind_macs["conv"] == pytest.approx(2e9 / (1e9 / 40e9 + 1e9 / 10e9))  # both, weighted by MACs
    assert step_compute(_conv_step("upsample_conv", 32), here) == pytest.approx(0.001 + 1e9 / here.kind_macs["conv"])


def test_a_norm_conv_probe_includes_its_group_norm_traffic_only_when_it_is_its_own_ops_rate():
    norm = _conv_step("norm_conv", 64, element_bytes=2e9)
    rates = _rates(conv=1e9, matmul=1e9, attention=1e9)
    assert step_compute(norm, rates) == pytest.approx(0.001 + 1.0 + 2.0)  # kind average: traffic added
    rates.signature_macs[norm.signature] = 1e9
    assert step_compute(norm, rates) == pytest.approx(0.001 + 1.0)  # its probe ran the GroupNorm and SiLU
    plain = _conv_step("conv", 64, element_bytes=2e9)
    rates.signature_macs[plain.signature] = 1e9
    assert step_compute(plain, rates) == pytest.approx(0.001 + 1.0 + 2.0)  # a plain conv fuses nothing


def test_weight_decoding_is_counted_per_call_once_for_all_items_of_a_shared_run():
    """The fp16 SD 1.5 UNet's 1280-channel convs at 8x8 ran 3-4x longer than their multiply-adds at
    the GroupNorm convs' rate: each call decodes 15-30 M weight values. A shared run decodes each
    weight once for all its items (``decoded_weight_items``), row-streamed or fetched whole."""
    rates = _rates(conv=1e9, matmul=1e9, attention=1e9)
    rates.decode_seconds["fp16"] = 1e-9
    sig = Signature("norm_conv", ((1, 8, 8, 8), (8, 8, 3, 3)), (), "fp16")
    step = StepCost("DecodedWeight", (1e9, 0, 0), (1e9, 0, 0), 0, 2 * 10**9, (), 0, 0, 0, sig)
    assert step_compute(step, rates) == pytest.approx(0.001 + 1.0 + 2.0)
    assert step_compute(step, rates, items=2) == pytest.approx(2 * (0.001 + 1.0) + 2.0)
    streamed = replace(step, row_bytes=10**9)
    assert step_compute(streamed, rates, items=2) == pytest.approx(2 * (0.001 + 1.0) + 2.0)
    assert step_compute(replace(step, signature=replace(sig, storage="uint8")), rates) == pytest.approx(1.001)


def test_the_decode_probe_is_all_decoding(tmp_path):
    import numpy as np
    import onnx

    from frame.estimate.counting import count_graph
    from frame.estimate.probes import DECODE_SHAPE, decode_probe

    proto, feeds = decode_probe("fp16", np.random.default_rng(0))
    onnx.save(proto, str(tmp_path / "decode.onnx"))
    count = count_graph(str(tmp_path / "decode.onnx"), {k: v.shape for k, v in feeds.items()})
    values = DECODE_SHAPE[0] * DECODE_SHAPE[1]
    assert count.decoded_elements == values and count.macs == values  # one multiply-add per value
    assert sum(s.row_bytes for s in count.steps) == 2 * values  # read block by block, as big weights are


def _norm_conv_at(pixels_side: int, channels: int, macs: float) -> StepCost:
    sig = Signature("norm_conv", ((1, channels, pixels_side, pixels_side), (channels, channels, 3, 3)),
                    (("pads", (1, 1, 1, 1)),), "fp16")
    return StepCost("DecodedWeight", (macs, 0, 0), (macs, 0, 0), 0, 0, (), 0, 0, 0, sig)


def test_an_ops_most_weight_bound_signature_is_probed_beside_its_heaviest():
    """The SD 1.5 UNet's 1280-channel NormConvs at 8x8 spend their time on the weight, not on their
    multiply-adds: with only the 64x64 one probed they were estimated at a third of their time."""
    from frame.estimate.machine import component_leaders

    heavy, bound, light = _norm_conv_at(64, 320, 60e9), _norm_conv_at(8, 1280, 10e9), _norm_conv_at(4, 1280, 1e9)
    mid = _norm_conv_at(32, 640, 29e9)
    # the 4x4 one reuses its weight least but has under 3 % of the op's work: the 8x8 one is the leader
    assert component_leaders([([heavy, mid, bound, light], 1)]) == {heavy.signature, bound.signature}
    # reuse within WEIGHT_BOUND_REUSE_RATIO of the heaviest's: one regime, one probe
    assert component_leaders([([heavy, _norm_conv_at(48, 640, 29e9)], 1)]) == {heavy.signature}


def test_unprobed_signatures_take_their_ops_rate_at_their_weight_reuse():
    """Probes at 64x64 (4096 output pixels) and 8x8 (64) fix seconds per multiply-add and per weight
    value; a 16x16 conv (256 pixels) between them is priced by that line, not by the op's average."""
    from frame.estimate.machine import weight_reuse

    heavy, bound, between = _norm_conv_at(64, 320, 60e9), _norm_conv_at(8, 1280, 10e9), _norm_conv_at(16, 1280, 5e9)
    per_mac, per_weight = 1e-11, 2e-9  # the machine the rates below come from
    rates = _rates(conv=1e9, matmul=1e9, attention=1e9)
    for step in (heavy, bound):
        rates.signature_macs[step.signature] = 1 / (per_mac + per_weight / weight_reuse(step.signature))
    here = rates.within([heavy, bound, between])
    assert here.op_costs["norm_conv"] == pytest.approx((per_mac, per_weight))
    assert weight_reuse(between.signature) == 256
    assert step_compute(between, here) == pytest.approx(0.001 + 5e9 * (per_mac + per_weight / 256))
    assert step_compute(between, here) > 0.001 + 5e9 / here.op_macs["norm_conv"]  # the average was too fast
    # probes of one regime only (or a fit with a negative term): the op's average, as before
    near = _norm_conv_at(48, 640, 29e9)
    rates.signature_macs[near.signature] = rates.signature_macs[heavy.signature] / 1.2
    same = rates.within([heavy, near])
    assert "norm_conv" not in same.op_costs
