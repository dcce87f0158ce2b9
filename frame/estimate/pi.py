"""A Raspberry Pi Zero 2 W, as constants: its CPU, memory, SD card and Wi-Fi (sources: docs/estimate.md).

The Pi cannot be measured from here, so its throughput is derived from published figures and the
count alone:

* GEMM: OpenBLAS's Cortex-A53 SGEMM kernel runs at 6.4 GFLOP/s on one core of an RK3399's A53
  cluster (OpenBLAS pull request #2643; ncnn's benchmark README gives that cluster's clock as
  1.5 GHz): 4.27 FLOP per cycle. The Zero 2 W has four A53 cores at 1.0 GHz, which throttle to
  about 0.9 GHz after 15 minutes of full load in a case (Thomas Kaiser's review of the Zero 2 W);
  four threads are taken to scale at 80 %. 4.27 × 0.9 GHz × 4 × 0.8 = 12.3 GFLOP/s = 6.15 G
  multiply-adds per second (``SOURCE_GEMM_MACS``).
* Cross-check: projected with that rate, OnnxStream's published Pi Zero 2 nights come out 2.4×
  (SD 1.5, 10 steps: 38 min against 1.5 h) and 2.6× (SDXL Turbo, 1 step: 11 min against 29 min)
  too short. Whole-model work on this board runs far below its GEMM figure (512 MB of LPDDR2 at
  1.3 GB/s feeding four cores), so the rate is calibrated on the SD 1.5 night (``CALIBRATION``):
  with the op efficiencies below, ``benchmarks/estimate_pi_crosscheck.py`` finds 0.37, the same on
  every run now that the projection depends on the count alone (it found 0.25, 0.36 and 0.24 while it
  kept the loaded dev machine's measured efficiencies, and 0.30 was used). SDXL Turbo, not used to
  calibrate, is the check (docs/estimate.md). ``GEMM_MACS`` = 2.28 G multiply-adds per second is what
  the projection uses.
* Memory-bound ops: tinymembench's memcpy on the Zero 2 W moves 1295 MB/s (same review), i.e.
  2.6 GB/s of bytes read plus written (``STREAM_BYTES``). Decoding an fp16 or 8-bit weight to float32
  inside its op is memory-bound too: the stored bytes read plus 4 written per value, at that rate
  (``DECODE_BYTES``).
* SD card: sequential reads top out at 23 MB/s, the limit of the Zero 2 W's High Speed SD mode
  (same review, iozone on a SanDisk Extreme Pro A2; a faster card does not help) (``SD_READ_BYTES``).
* Wi-Fi: 2.4 GHz 802.11n with one antenna: 72.2 Mbit/s on air at best, of which about half is
  usable throughput (cnlab's WLAN performance notes), less a room away from the router: 3 MB/s
  (``WIFI_READ_BYTES``; ``frame estimate --link-mbit`` sets the figure for your network).
* Each engine op reaches a share of ``GEMM_MACS`` (``OP_EFFICIENCY``; a product of fewer than
  ``FEW_ROWS`` rows, such as a text encoder's 77 tokens, ``FEW_ROWS_EFFICIENCY`` instead). The engine's
  fixed cost per step (Python, numpy calls) is ``STEP_SECONDS``, loading a component
  ``LOAD_SECONDS_PER_NODE`` per graph node (``KEPT_PLAN_LOAD_SHARE`` of it from a kept plan), a
  worker's imports ``WORKER_START_SECONDS``. The shares are
  the medians of three runs of ``benchmarks/estimate_pi_constants.py`` on the full-size SD 1.5 export
  on the development machine (the share of its own large-GEMM rate each op reached, the way
  ``CALIBRATION`` was fitted); the costs are that machine's medians × 8, for an in-order 1 GHz core
  against a desktop core (docs/estimate.md).

The Pi's figures are the count at these constants only: the same settings give the same Pi projection
on any machine under any load. (They once kept this machine's measured efficiency per step
signature, and three runs of one night on a loaded machine projected 29 s, 1 min 45 s and 46 s.) This
machine's measurement is used for the "this machine" figures alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from frame.engine.ops.conv import FUSED_MIN_INPUT_PIXELS, winograd_layout
from frame.engine.ops.conv_winograd import weight_blocked
from frame.estimate.machine import Throughput
from frame.estimate.signature import Signature

SOURCE_GEMM_MACS = 6.15e9  # from the published GEMM figures above
CALIBRATION = 0.37         # OnnxStream's SD 1.5 night (docs/estimate.md; 0.30 when it followed the load)
GEMM_MACS = SOURCE_GEMM_MACS * CALIBRATION
STREAM_BYTES = 2.6e9
DECODE_BYTES = {"fp16": 2 + 4, "uint8": 1 + 4}  # stored bytes read + float32 written, per weight value
SD_READ_BYTES = 23e6
WIFI_READ_BYTES = 3e6
# benchmarks/estimate_pi_constants.py, full-size SD 1.5 export at 512x512, medians of three runs (CPU-time
# rates, dev machine at load average 13-15): each op's rate as a share of that machine's large-GEMM rate.
# norm_conv: those runs predate its Winograd path (220544e); 0.94 x 1.22, the gain the same script
# measured across that change on one quiet machine (op norm_conv medians 0.707 before, 0.862 after;
# plain conv 0.896 / 0.841), its multiply-adds still counted as the direct conv's, like plain conv's
NORM_CONV_WINOGRAD_GAIN = 0.862 / 0.707
OP_EFFICIENCY = {"conv": 1.29, "upsample_conv": 1.62, "norm_conv": round(0.94 * NORM_CONV_WINOGRAD_GAIN, 2),
                 "matmul": 1.09, "geglu": 1.04, "attention": 0.66, "activation_matmul": 0.66}
# Winograd F(4x4, 3x3) (b792ddd), the same script, three runs each, interleaved with the code before it
# (e6bc9c8 via git archive, the probe rule of 4e232a6 in both) on this shared 2-core machine at load
# average 5-10: the VAE decoder's norm_conv medians 0.997 before, 1.264 after; the UNet's 1.030 / 1.012
# and plain conv's 0.943 / 0.926 (no gain: the UNet's convs at 512x512 are at most 64x64, F(4x4)'s
# weight transform is paid over few tiles, and 16x16 stays F(2x2)). So the gain is applied where it was
# measured: norm convs the engine runs as F(4x4) on more than 64x64 output pixels (docs/estimate.md).
NORM_CONV_WINOGRAD4_GAIN = 1.264 / 0.997
WINOGRAD4_GAIN_MIN_PIXELS = 64 * 64
# The chunk layout's transformed weight in blocks of input channels (``conv_winograd.weight_block``),
# F(4x4)'s input transform in fewer numpy calls and wider input blocks for thin bands (872a394), the
# same script, six runs each, interleaved with the code before it (6bffd8a via git archive) on the
# shared 2-core machine, load average 6-7. The GEMM rate the shares divide by read 36.9-44.3 G/s, so
# each gain is the median of share x that run's GEMM rate, after / before (unchanged code the same
# way: matmul 1.030, attention 1.014, the VAE's fused upsample_conv 1.010, plain conv 1.000):
# the UNet's norm_conv 1.231 and its upsample_conv (16 -> 32 and 8 -> 16: upsampled, then convolved
# at 32x32 / 16x16) 1.308, applied to the convs that take the weight blocks (the UNet's 64x64 norm
# convs, about a third of its norm-conv work, do not: the subset's own gain is larger, so this is
# conservative); the VAE decoder's norm_conv 1.114, of which its 36x36 stage (11 % of its norm-conv
# multiply-adds, weight blocks) takes 1.231, which leaves 1.10 for its F(4x4) stages above 64x64.
WEIGHT_BLOCK_GAIN = {"norm_conv": 1.231, "upsample_conv": 1.308}
NORM_CONV_WINOGRAD4_TRANSFORM_GAIN = 1.10
FEW_ROWS = 256
FEW_ROWS_EFFICIENCY = {"matmul": 0.54, "geglu": 0.54, "attention": 0.54, "activation_matmul": 0.54}  # text encoder
KIND_EFFICIENCY = {"conv": 0.98, "matmul": 1.03, "attention": 0.66}  # a step with no signature of its own
STEP_SECONDS = 8 * 8.9e-6          # the dev machine's engine step: 13.4, 8.9, 7.6 us
LOAD_SECONDS_PER_NODE = 8 * 281e-6  # the dev machine's load per ONNX node: 473, 281, 160 us
# benchmarks/plan_cache_load.py (docs/estimate.md): a component loaded from its kept plan
# (frame.engine.plan_cache) takes this share of the CPU time of planning it afresh: SDXL Turbo uint8's
# four components, medians of five runs each side, interleaved, summed: 0.282 / 1.297 s = 0.217 (UNet
# 0.194 / 1.018 s; the small graphs' fixed costs make their shares 0.22-0.55). The Pi's load per node
# (LOAD_SECONDS_PER_NODE) times this share: a kept plan is read and bound, not parsed and rewritten.
KEPT_PLAN_LOAD_SHARE = 0.22
WORKER_START_SECONDS = 8 * 2.0     # a render worker's imports there (docs/benchmarks-pi.md footprint table: 1.4-1.9 s)
MEMORY_BYTES = 512 * 1024 * 1024
LABEL = "Raspberry Pi Zero 2 W"


def rows(signature: Signature) -> int:
    """Rows of a product's activation operand (tokens, query rows); a conv's output pixels."""
    first = signature.shapes[0] if signature.shapes else ()
    if signature.kind == "conv":
        return first[-1] * first[-2] if len(first) >= 2 else 0
    return first[-2] if len(first) >= 2 else 0


def runs_large_winograd4(signature: Signature) -> bool:
    """Whether ``signature`` is a norm conv the engine runs as Winograd F(4×4, 3×3) on more than
    ``WINOGRAD4_GAIN_MIN_PIXELS`` output pixels (where ``NORM_CONV_WINOGRAD4_GAIN`` and
    ``NORM_CONV_WINOGRAD4_TRANSFORM_GAIN`` were measured)."""
    if signature.op != "norm_conv" or len(signature.shapes) < 2 or len(signature.shapes[0]) != 4:
        return False
    (_, c, h, w), (m, cg, kh, kw) = signature.shapes[:2]
    strides = tuple(signature.attr("strides") or (1, 1))
    if (kh, kw) != (3, 3) or c != cg or any(int(v) != 1 for v in strides) or h * w <= WINOGRAD4_GAIN_MIN_PIXELS:
        return False
    layout = winograd_layout(cg, m, (h, w), 1)
    return layout is not None and layout.tile == 4


def runs_weight_blocks(signature: Signature) -> bool:
    """Whether ``signature`` is a norm conv, or an upsample conv on a small image (upsampled, then
    convolved), that the engine runs as Winograd chunks whose U is made in blocks of input channels
    (``conv_winograd.weight_blocked``: where ``WEIGHT_BLOCK_GAIN`` was measured)."""
    if signature.op not in WEIGHT_BLOCK_GAIN or len(signature.shapes) < 2 or len(signature.shapes[0]) != 4:
        return False
    (_, c, h, w), (m, cg, kh, kw) = signature.shapes[:2]
    if signature.op == "upsample_conv":
        if h * w >= FUSED_MIN_INPUT_PIXELS:  # the fused sub-pixel kernel: not Winograd
            return False
        h, w = 2 * h, 2 * w
    strides = tuple(signature.attr("strides") or (1, 1))
    if (kh, kw) != (3, 3) or c != cg or any(int(v) != 1 for v in strides):
        return False
    layout = winograd_layout(cg, m, (h, w), 1)
    return layout is not None and weight_blocked(layout, cg, m, (h, w))


def efficiency(signature: Signature) -> float:
    """The share of ``GEMM_MACS`` a step of ``signature`` runs at on the Pi."""
    if signature.op in FEW_ROWS_EFFICIENCY and rows(signature) < FEW_ROWS:
        return FEW_ROWS_EFFICIENCY[signature.op]
    share = OP_EFFICIENCY.get(signature.op, KIND_EFFICIENCY[signature.kind])
    if runs_large_winograd4(signature):
        return share * NORM_CONV_WINOGRAD4_GAIN * NORM_CONV_WINOGRAD4_TRANSFORM_GAIN
    return share * WEIGHT_BLOCK_GAIN[signature.op] if runs_weight_blocks(signature) else share


def pi_throughput(signatures: Iterable[Signature], link_bytes: float | None = None, url: bool = False) -> Throughput:
    """The Pi's rates for the step ``signatures`` of the nights to project, from the constants above
    (storage: the SD card, or Wi-Fi for a URL model)."""
    read = (link_bytes or WIFI_READ_BYTES) if url else SD_READ_BYTES
    return Throughput(
        gemm_macs=GEMM_MACS, stream_bytes=STREAM_BYTES, step_seconds=STEP_SECONDS,
        kind_macs={kind: GEMM_MACS * share for kind, share in KIND_EFFICIENCY.items()},
        signature_macs={s: GEMM_MACS * efficiency(s) for s in set(signatures)},
        read_bytes=read, label=LABEL,
        decode_seconds={storage: size / STREAM_BYTES for storage, size in DECODE_BYTES.items()},
        worker_start_seconds=WORKER_START_SECONDS, load_seconds_per_node=LOAD_SECONDS_PER_NODE)
