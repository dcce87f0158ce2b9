"""Peak memory of one shared text-encoder pass for 1, 4, 8, 14 texts: why ``TEXTS_PER_PASS`` is 4.

The taste choice embeds a night's candidate texts in shared passes
(``frame.diffusion.conditioning.text_passes``): each pass reads the encoder's weights once for all
its texts, but holds every text's activations at once. Each count runs in its own child process, and
the child reports its own ``VmHWM``.

    .venv/bin/python benchmarks/text_passes_memory.py /work/cache/sdxl-full/turbo-fp16/text_encoder_2/model.onnx

Measured 2026-12-02 on SDXL's OpenCLIP encoder (fp16): 1 text 100.0 MB, 4 texts 143.2 MB with this
script; an earlier one-off run of the same measurement gave 104 / 148 / 206 / 300 MB for 1 / 4 / 8 / 14
texts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import numpy as np


def child(model_path: str, texts: int) -> None:
    from frame.engine import load_model

    with load_model(model_path) as model:
        declared = model.inputs[0]
        dtype = np.int64 if "64" in str(declared.dtype) else np.int32
        feeds = [{declared.name: np.full((1, 77), 320 + n, dtype=dtype)} for n in range(texts)]
        if texts == 1:
            model.run(feeds[0])
        else:
            model.run_shared(feeds)
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(peak / 1024)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a CLIP text encoder model.onnx")
    parser.add_argument("--counts", default="1,4,8,14", help="texts per pass to measure")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.model, args.child)
        return 0
    for count in (int(c) for c in args.counts.split(",")):
        out = subprocess.run([sys.executable, __file__, args.model, "--child", str(count)],
                             capture_output=True, text=True, check=True)
        print(f"{count:3d} texts per pass: peak {float(out.stdout.split()[-1]):.1f} MB (VmHWM)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
