"""Full-size SD 1.5 components: frame's streaming engine vs onnxruntime, peak RSS and seconds per run.

Dev-only (torch, diffusers, transformers, onnxruntime). Step 1 exports, with random weights, the
SD 1.5 UNet (diffusers default config + cross_attention_dim 768: 860M parameters, fp32, weights in
unet/model.onnx_data), the VAE decoder (64×64 latent → 512×512) and the CLIP ViT-L/14 text encoder
into the diffusers ONNX folder layout with optimum's I/O names, under --cache (reused when present):

    text_encoder/model.onnx   input_ids int64 [batch, sequence] → last_hidden_state, pooler_output
    unet/model.onnx (+ model.onnx_data)   sample, timestep float32 [1], encoder_hidden_states → out_sample
    vae_decoder/model.onnx    latent_sample → sample

Step 2 runs each model with each runtime in its own subprocess (so peak RSS is that runtime's
alone) and prints peak RSS (its own VmHWM), seconds per run (wall and CPU: the CPU time is the fairer
number on a shared machine), the ratios, and the relative L2 difference of the outputs. Usage:

    /work/venv/bin/python benchmarks/engine_vs_onnxruntime.py [--cache DIR] [--models unet,vae_decoder,text_encoder]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MODELS = ("text_encoder", "vae_decoder", "unet")
DEFAULT_CACHE = "/work/cache/sd15-full"


# ----------------------------------------------------------------------------------------- export
def _export_torchscript(module, args, path: Path, inputs, outputs, axes, external: bool) -> None:
    """TorchScript export, then (for > 2 GB models) one ``model.onnx_data`` file as diffusers has."""
    import warnings

    import onnx
    import torch

    tmp = path.parent / "_export"
    tmp.mkdir(parents=True, exist_ok=True)
    raw = tmp / "model.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(raw), dynamo=False, opset_version=17, input_names=inputs,
                          output_names=outputs, dynamic_axes=axes, do_constant_folding=True)
    proto = onnx.load(str(raw))  # also pulls in any per-tensor external files the exporter wrote
    for node in proto.graph.node:
        node.doc_string = ""
    if external:
        onnx.save_model(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx_data", size_threshold=1024)
    else:
        onnx.save_model(proto, str(path))
    del proto
    for leftover in tmp.iterdir():
        leftover.unlink()
    tmp.rmdir()


def export_text_encoder(folder: Path) -> None:
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                            num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
                            projection_dim=768)
    torch.manual_seed(0)
    model = CLIPTextModel(config).eval()

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            out = self.model(input_ids=input_ids)
            return out.last_hidden_state, out.pooler_output

    ids = torch.randint(0, 49407, (1, 77), dtype=torch.int64)
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "last_hidden_state": {0: "batch_size", 1: "sequence_length"}, "pooler_output": {0: "batch_size"}}
    _export_torchscript(Wrapper().eval(), (ids,), folder / "model.onnx", ["input_ids"],
                        ["last_hidden_state", "pooler_output"], axes, external=False)


def export_unet(folder: Path) -> None:
    import torch
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(sample_size=64, cross_attention_dim=768).eval()  # SD 1.5 config

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.unet = unet

        def forward(self, sample, timestep, encoder_hidden_states):
            return self.unet(sample, timestep, encoder_hidden_states, return_dict=False)[0]

    args = (torch.randn(1, 4, 64, 64), torch.tensor([999.0]), torch.randn(1, 77, 768))
    axes = {"sample": {0: "batch_size", 2: "height", 3: "width"}, "timestep": {0: "steps"},
            "encoder_hidden_states": {0: "batch_size", 1: "sequence_length"},
            "out_sample": {0: "batch_size", 2: "height", 3: "width"}}
    _export_torchscript(Wrapper().eval(), args, folder / "model.onnx",
                        ["sample", "timestep", "encoder_hidden_states"], ["out_sample"], axes, external=True)


def export_vae_decoder(folder: Path) -> None:
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
                        up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[128, 256, 512, 512],
                        layers_per_block=2, latent_channels=4, sample_size=512).eval()

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vae = vae

        def forward(self, latent_sample):
            return self.vae.decode(latent_sample, return_dict=False)[0]

    axes = {"latent_sample": {0: "batch_size", 2: "height_latent", 3: "width_latent"},
            "sample": {0: "batch_size", 2: "height", 3: "width"}}
    _export_torchscript(Decoder().eval(), (torch.randn(1, 4, 64, 64),), folder / "model.onnx",
                        ["latent_sample"], ["sample"], axes, external=False)


EXPORTERS = {"text_encoder": export_text_encoder, "unet": export_unet, "vae_decoder": export_vae_decoder}


def ensure_exported(cache: Path, names) -> None:
    for name in names:
        folder = cache / name
        if (folder / "model.onnx").is_file():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        print(f"exporting {name} to {folder} ...", flush=True)
        start = time.perf_counter()
        EXPORTERS[name](folder)
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)


# ------------------------------------------------------------------------------------- measuring
def feeds_for(name: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "text_encoder":
        ids = rng.integers(1, 49406, (1, 77)).astype(np.int64)
        ids[0, 0], ids[0, 20:] = 49406, 49407
        return {"input_ids": ids}
    if name == "unet":
        return {"sample": rng.standard_normal((1, 4, 64, 64)).astype(np.float32),
                "timestep": np.array([999.0], np.float32),
                "encoder_hidden_states": rng.standard_normal((1, 77, 768)).astype(np.float32)}
    return {"latent_sample": rng.standard_normal((1, 4, 64, 64)).astype(np.float32)}


def own_peak_mb() -> float:
    """This process's own peak RSS (VmHWM). ``ru_maxrss`` is not: it survives exec, so a child started
    by a parent that once held more (e.g. after an export in the same run) would report the parent's."""
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def worker(runtime: str, name: str, cache: Path, runs: int, out_path: str, weights: str, threads: int) -> None:
    """Runs in the subprocess: load, run ``runs`` times, report JSON on stdout."""
    feeds = feeds_for(name)
    path = str(cache / name / "model.onnx")
    start = time.perf_counter()
    if runtime == "frame":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from frame.engine import load_model

        model = load_model(path, weights=weights)
        run = model.run
    else:
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]

        def run(f):
            return dict(zip(names, session.run(names, f)))
    load_seconds = time.perf_counter() - start
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        outputs = run(feeds)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    np.savez(out_path, **outputs)
    peak_mb = own_peak_mb()
    print(json.dumps({"load_s": load_seconds, "run_s": times, "cpu_s": cpu, "peak_rss_mb": peak_mb}))


def measure(runtime: str, name: str, cache: Path, runs: int, weights: str, threads: int) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "out.npz")
        cmd = [sys.executable, __file__, "--worker", runtime, name, "--cache", str(cache), "--runs", str(runs),
               "--out", out_path, "--weights", weights, "--threads", str(threads)]
        env = dict(os.environ)
        if threads:  # BLAS reads these when numpy loads, so they must be set for the subprocess
            env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{runtime} {name} failed:\n{proc.stderr[-3000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        with np.load(out_path) as data:
            outputs = {k: data[k] for k in data.files}
    return result, outputs


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--runs", type=int, default=2, help="runs per process; the best is reported")
    parser.add_argument("--weights", default="prefetch", help="frame weights provider")
    parser.add_argument("--threads", type=int, default=0,
                        help="compute threads for both runtimes (0 = library defaults: all cores)")
    parser.add_argument("--export-only", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("RUNTIME", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cache = Path(args.cache)
    if args.worker:
        worker(args.worker[0], args.worker[1], cache, args.runs, args.out, args.weights, args.threads)
        return
    names = [n for n in args.models.split(",") if n]
    ensure_exported(cache, names)
    if args.export_only:
        return
    print(f"{'model':<13} {'runtime':<12} {'peak RSS MB':>11} {'s/run':>8} {'CPU s':>8} {'load s':>7}")
    for name in names:
        results = {}
        for runtime in ("onnxruntime", "frame"):
            result, outputs = measure(runtime, name, cache, args.runs, args.weights, args.threads)
            results[runtime] = (result, outputs)
            runs = ", ".join(f"{t:.2f}" for t in result["run_s"])
            print(f"{name:<13} {runtime:<12} {result['peak_rss_mb']:>11.0f} {min(result['run_s']):>8.2f} "
                  f"{min(result['cpu_s']):>8.2f} {result['load_s']:>7.2f}   runs: {runs}", flush=True)
        (ort_r, ort_out), (fr_r, fr_out) = results["onnxruntime"], results["frame"]
        diffs = ", ".join(f"{k} {rel_l2(fr_out[k], ort_out[k]):.1e}" for k in ort_out)
        print(f"{name:<13} frame/ORT: RSS ×{fr_r['peak_rss_mb'] / ort_r['peak_rss_mb']:.3f}, "
              f"time ×{min(fr_r['run_s']) / min(ort_r['run_s']):.2f}, CPU time ×"
              f"{min(fr_r['cpu_s']) / min(ort_r['cpu_s']):.2f}; output rel L2: {diffs}", flush=True)


if __name__ == "__main__":
    main()
