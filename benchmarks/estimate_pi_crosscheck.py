"""The Pi Zero 2 W projection against OnnxStream's published Pi Zero 2 figures.

OnnxStream (C++, XNNPACK; shared notes ``onnxstream.md``) renders on a Pi Zero 2: SD 1.5, 10 steps
(guidance, fp16 UNet): about 1.5 h; SDXL Turbo, 1 step at 512×512: 29 min. This projects the same
nights (a queued prompt: no taste choice) from the counts and the Pi constants of ``frame.estimate.pi``
(its op efficiencies from ``benchmarks/estimate_pi_constants.py``), once with the CPU rate from the published
GEMM figures alone (``pi.SOURCE_GEMM_MACS``) and once with the calibrated one (``pi.GEMM_MACS``). It
also prints the efficiency that makes the SD 1.5 night match, which is how ``pi.CALIBRATION`` is set;
SDXL Turbo is the check that was not used to set it.

    .venv/bin/python benchmarks/estimate_pi_crosscheck.py [--sd15 FOLDER] [--sdxl-turbo FOLDER]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = {"SD 1.5, 10 steps": 1.5 * 3600, "SDXL Turbo, 1 step": 29 * 60}


def _config(source: str, steps: int, guidance: float):
    from frame.config import load_config

    config = load_config(None)
    return replace(config, model=replace(config.model, source=source, size="512x512", steps=steps,
                                         guidance=guidance, sampler="euler_a"))


def _pi_seconds(plan, gemm: float) -> float:  # noqa: ANN001
    from frame.estimate import pi
    from frame.estimate.night import project

    rates = pi.pi_throughput([s.signature for r in plan.runs for s in r.count.steps if s.signature is not None])
    scale = gemm / rates.gemm_macs
    rates = replace(rates, gemm_macs=gemm, kind_macs={k: v * scale for k, v in rates.kind_macs.items()},
                    signature_macs={k: v * scale for k, v in rates.signature_macs.items()})
    return project(plan, rates, "prefetch").seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sd15", default="/work/cache/i12-estimate/sd15-full-pipeline-fp16")
    parser.add_argument("--sdxl-turbo", default="/work/cache/sdxl-full/turbo-fp16")
    parser.add_argument("--measure-seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from frame.estimate import pi
    from frame.estimate.configured import estimate_config

    cases = [("SD 1.5, 10 steps", _config(args.sd15, 10, 7.0))]
    if Path(args.sdxl_turbo).is_dir():  # the check that was not used to calibrate, when that export is here
        cases.append(("SDXL Turbo, 1 step", _config(args.sdxl_turbo, 1, 0.0)))
    else:
        print(f"no {args.sdxl_turbo}: SDXL Turbo not projected")
    results = []
    for name, config in cases:
        result = estimate_config(config, measure_seconds=args.measure_seconds, texts=0, alternative=False)
        results.append((name, result))
    print(f"{'night':20s} {'published':>10s} {'from sources':>13s} {'calibrated':>11s}")
    for name, result in results:
        plan = result.estimate.plan
        raw = _pi_seconds(plan, pi.SOURCE_GEMM_MACS)
        calibrated = _pi_seconds(plan, pi.GEMM_MACS)
        print(f"{name:20s} {PUBLISHED[name] / 60:8.0f} min {raw / 60:10.0f} min {calibrated / 60:8.0f} min")
    name, result = results[0]
    low, high = 0.05, 1.5  # efficiency E with GEMM = E * SOURCE_GEMM_MACS matching the SD 1.5 night
    for _ in range(40):
        mid = (low + high) / 2
        if _pi_seconds(result.estimate.plan, mid * pi.SOURCE_GEMM_MACS) > PUBLISHED[name]:
            low = mid
        else:
            high = mid
    print(f"efficiency that matches OnnxStream's SD 1.5 night: {mid:.2f} (pi.CALIBRATION = {pi.CALIBRATION})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
