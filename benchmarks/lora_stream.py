"""What a streamed LoRA costs: an SD 1.5-sized UNet with a rank-32 LoRA against the same UNet without.

Issue 31's targets: ≤ +10 MB on the render peak, ≤ +10 % UNet CPU time. Each measurement is its own
process (python benchmarks/lora_stream.py --child ...) that loads the UNet (with or without the LoRA),
runs one guided step (two items through ``run_shared``, as the night's default guidance does) and
reports its own peak RSS (``VmHWM``), the step's CPU and wall time, the model's bytes read and the
LoRA factor bytes read. The LoRA is random (kohya keys, fp16 factors, alpha = rank) on every layer a
kohya SD 1.5 LoRA trains: the transformers' attention (to_q/k/v/out), feed-forward (ff.net.0.proj,
ff.net.2) and proj_in/proj_out, made from the export's own node names. Median of ``--runs`` pairs,
run alternately so a busy neighbour hits both sides alike.

    PYTHONPATH=$PWD python benchmarks/lora_stream.py --unet /tmp/nf/sd15-full-pipeline-uint8/unet/model.onnx \\
        --latent 32 --runs 3

The LoRA's cost is per weight, not per pixel, so a smaller latent than the night's 64×64 makes the
relative CPU cost larger (a conservative figure on a machine too slow for full-size steps).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KOHYA_TARGETS = ("attn1/to_q", "attn1/to_k", "attn1/to_v", "attn1/to_out.0", "attn2/to_q", "attn2/to_k",
                 "attn2/to_v", "attn2/to_out.0", "ff/net.0/proj", "ff/net.2", "proj_in", "proj_out")


def vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_lora(unet: str, rank: int, path: Path) -> int:
    """A random kohya LoRA on the UNet's transformer layers (found from its node names); its module count."""
    import numpy as np

    from frame.engine.lora.matching import module_keys
    from frame.engine.model import read_structure

    structure = read_structure(unet)
    rng = np.random.default_rng(0)
    tensors: dict[str, np.ndarray] = {}
    for node in structure.nodes:
        if node.op_type not in ("MatMul", "Conv", "Gemm") or not any(f"/{t}/" in node.name for t in KOHYA_TARGETS):
            continue
        ref = next((structure.weights.get(i) for i in node.inputs[1:2] if i in structure.weights), None)
        if ref is None:  # an 8-bit weight: the DequantizeLinear's input
            producer = {o: n for n in structure.nodes for o in n.outputs}.get(node.inputs[1])
            ref = structure.weights.get(producer.inputs[0]) if producer is not None else None
        if ref is None:
            continue
        shape = tuple(ref.shape)
        out, inner = (shape[1], shape[0]) if node.op_type == "MatMul" else (shape[0], int(np.prod(shape[1:])))
        key = "lora_unet_" + module_keys(node.name)[0]
        key = key.replace("lora_unet_model_", "lora_unet_")
        down = rng.standard_normal((rank, inner)).astype(np.float16) * np.float16(0.01)
        up = rng.standard_normal((out, rank)).astype(np.float16) * np.float16(0.01)
        if node.op_type == "Conv":
            down, up = down.reshape(rank, *shape[1:]), up.reshape(out, rank, 1, 1)
        tensors[f"{key}.lora_down.weight"], tensors[f"{key}.lora_up.weight"] = down, up
        tensors[f"{key}.alpha"] = np.array(float(rank), np.float16)
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": "F16", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return len(tensors) // 3


def child(unet: str, lora: str | None, latent: int) -> None:
    import numpy as np

    from frame.engine import load_model
    from frame.engine.lora import LoraUse, read_lora

    uses = [] if lora is None else [LoraUse("bench", read_lora(lora).modules("unet"), 1.0)]
    model = load_model(unet, loras=uses)
    rng = np.random.default_rng(0)
    context = next(i.shape for i in model.inputs if i.name == "encoder_hidden_states")
    width = context[-1] if context and isinstance(context[-1], int) else 768
    feeds = [{"sample": rng.standard_normal((1, 4, latent, latent), dtype=np.float32),
              "timestep": np.array([500.0], np.float32),
              "encoder_hidden_states": rng.standard_normal((1, 77, width), dtype=np.float32)} for _ in range(2)]
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    model.run_shared(feeds)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    fetched = model.last_run_fetched
    print(json.dumps({
        "peak_mb": vm_hwm_mb(), "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "wall_s": wall, "weight_bytes": sum(fetched.bytes.values()) if fetched is not None else None,
        "lora_bytes": getattr(model.provider, "factor_bytes_read", 0),
        "applied": model.lora_report.applied, "unmatched": sum(len(v) for v in model.lora_report.unmatched.values())}))


def measure(unet: str, lora: str | None, latent: int) -> dict:
    command = [sys.executable, __file__, "--child", "--unet", unet, "--latent", str(latent)]
    if lora:
        command += ["--lora", lora]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unet", default="/tmp/nf/sd15-full-pipeline-uint8/unet/model.onnx")
    parser.add_argument("--rank", type=int, default=32)
    parser.add_argument("--latent", type=int, default=32, help="latent side (64 = 512×512)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--lora")
    args = parser.parse_args()
    if args.child:
        child(args.unet, args.lora, args.latent)
        return
    with tempfile.TemporaryDirectory() as folder:
        lora = Path(folder) / "bench.safetensors"
        modules = write_lora(args.unet, args.rank, lora)
        print(f"LoRA: rank {args.rank}, {modules} modules, {lora.stat().st_size / 1e6:.1f} MB (fp16); "
              f"UNet {args.unet}, latent {args.latent}×{args.latent}, one guided step (2 items, run_shared)")
        results: dict[str, list[dict]] = {"without": [], "with LoRA": []}
        for run in range(args.runs):
            for label, path in (("without", None), ("with LoRA", str(lora))):
                results[label].append(measure(args.unet, path, args.latent))
                r = results[label][-1]
                print(f"  run {run + 1} {label:9}: peak {r['peak_mb']:.1f} MB, CPU {r['cpu_s']:.1f} s, "
                      f"wall {r['wall_s']:.1f} s, weights read {r['weight_bytes'] / 1e6:.0f} MB, "
                      f"LoRA factors read {r['lora_bytes'] / 1e6:.1f} MB, applied {r['applied']}", flush=True)
    med = {label: {k: statistics.median(r[k] for r in rows) for k in ("peak_mb", "cpu_s", "wall_s", "lora_bytes")}
           for label, rows in results.items()}
    base, lora_side = med["without"], med["with LoRA"]
    print(f"median of {args.runs}: peak {base['peak_mb']:.1f} -> {lora_side['peak_mb']:.1f} MB "
          f"({lora_side['peak_mb'] - base['peak_mb']:+.1f} MB; target <= +10), UNet CPU {base['cpu_s']:.1f} -> "
          f"{lora_side['cpu_s']:.1f} s ({100 * (lora_side['cpu_s'] / base['cpu_s'] - 1):+.1f} %; target <= +10 %), "
          f"wall {base['wall_s']:.1f} -> {lora_side['wall_s']:.1f} s; LoRA bytes read per step "
          f"{lora_side['lora_bytes'] / 1e6:.1f} MB")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    main()
