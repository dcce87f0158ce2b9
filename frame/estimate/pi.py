"""A Raspberry Pi Zero 2 W, as constants: its CPU, memory, SD card and Wi-Fi (sources: docs/estimate.md).

The Pi cannot be measured from here, so its throughput is derived from published figures:

* GEMM: OpenBLAS's Cortex-A53 SGEMM kernel runs at 6.4 GFLOP/s on one core of an RK3399's A53
  cluster (OpenBLAS pull request #2643; ncnn's benchmark README gives that cluster's clock as
  1.5 GHz): 4.27 FLOP per cycle. The Zero 2 W has four A53 cores at 1.0 GHz, which throttle to
  about 0.9 GHz after 15 minutes of full load in a case (Thomas Kaiser's review of the Zero 2 W);
  four threads are taken to scale at 80 %. 4.27 × 0.9 GHz × 4 × 0.8 = 12.3 GFLOP/s = 6.15 G
  multiply-adds per second (``SOURCE_GEMM_MACS``).
* Cross-check: projected with that rate, OnnxStream's published Pi Zero 2 nights come out 2.4×
  (SD 1.5, 10 steps: 38 min against 1.5 h) and 2.6× (SDXL Turbo, 1 step: 11 min against 29 min)
  too short. Whole-model work on this board runs far below its GEMM figure (512 MB of LPDDR2 at
  1.3 GB/s feeding four cores), so the rate is calibrated on the SD 1.5 night (``CALIBRATION``:
  ``benchmarks/estimate_pi_crosscheck.py`` found 0.25, 0.36 and 0.24 in three runs on the loaded dev
  machine; 0.30 is used); SDXL Turbo, not used to calibrate, is the check (at 0.30: 18 min against
  29 min published, docs/estimate.md). ``GEMM_MACS`` = 1.85 G multiply-adds per second is what the
  projection uses.
* Memory-bound ops: tinymembench's memcpy on the Zero 2 W moves 1295 MB/s (same review), i.e.
  2.6 GB/s of bytes read plus written (``STREAM_BYTES``); decoding fp16/8-bit weights is memory-bound
  too, so its cost per value is this machine's scaled by the two stream rates.
* SD card: sequential reads top out at 23 MB/s, the limit of the Zero 2 W's High Speed SD mode
  (same review, iozone on a SanDisk Extreme Pro A2; a faster card does not help) (``SD_READ_BYTES``).
* Wi-Fi: 2.4 GHz 802.11n with one antenna: 72.2 Mbit/s on air at best, of which about half is
  usable throughput (cnlab's WLAN performance notes), less a room away from the router: 3 MB/s
  (``WIFI_READ_BYTES``; ``frame estimate --link-mbit`` sets the figure for your network).
* The engine's fixed cost per step (Python, numpy calls) is taken as 8 × this machine's: an
  in-order 1 GHz core against a desktop core. It is a small share of a night.

The projection keeps this machine's *efficiency* per step signature: a step that runs at 60 % of
this machine's large-GEMM rate is taken to run at 60 % of ``GEMM_MACS`` on the Pi.
"""

from __future__ import annotations

from dataclasses import replace

from frame.estimate.machine import Throughput

SOURCE_GEMM_MACS = 6.15e9  # from the published GEMM figures above
CALIBRATION = 0.30         # OnnxStream cross-check (docs/estimate.md): 0.25, 0.36, 0.24 in three runs
GEMM_MACS = SOURCE_GEMM_MACS * CALIBRATION
STREAM_BYTES = 2.6e9
SD_READ_BYTES = 23e6
WIFI_READ_BYTES = 3e6
STEP_OVERHEAD_FACTOR = 8.0
MEMORY_BYTES = 512 * 1024 * 1024
LABEL = "Raspberry Pi Zero 2 W"


def pi_throughput(here: Throughput, link_bytes: float | None = None, url: bool = False) -> Throughput:
    """The Pi's rates: this machine's per-signature efficiency applied to the Pi's GEMM rate, the
    Pi's memory, step cost and storage (SD card, or Wi-Fi for a URL model)."""
    scale = GEMM_MACS / here.gemm_macs
    read = (link_bytes or WIFI_READ_BYTES) if url else SD_READ_BYTES
    return replace(here, gemm_macs=GEMM_MACS, stream_bytes=STREAM_BYTES,
                   step_seconds=here.step_seconds * STEP_OVERHEAD_FACTOR,
                   kind_macs={k: v * scale for k, v in here.kind_macs.items()},
                   signature_macs={k: v * scale for k, v in here.signature_macs.items()},
                   op_macs={k: v * scale for k, v in here.op_macs.items()},
                   decode_seconds={k: v * here.stream_bytes / STREAM_BYTES for k, v in here.decode_seconds.items()},
                   read_bytes=read, cpu_share=1.0, label=LABEL)
