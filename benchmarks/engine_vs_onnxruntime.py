"""Full-size SD 1.5 components: frame's streaming engine vs onnxruntime, peak RSS and seconds per run.

Dev-only (torch, diffusers, transformers, onnxruntime). Step 1 exports, with random weights, the
SD 1.5 UNet (diffusers default config + cross_attention_dim 768: 860M parameters, fp32, weights in
unet/model.onnx_data), the VAE decoder (64×64 latent → 512×512) and the CLIP ViT-L/14 text encoder
into the diffusers ONNX folder layout with optimum's I/O names, under --cache (reused when present):

    text_encoder/model.onnx   input_ids int64 [batch, sequence] → last_hidden_state, pooler_output
    unet/model.onnx (+ model.onnx_data)   sample, timestep float32 [1], encoder_hidden_states → out_sample
    vae_decoder/model.onnx    latent_sample → sample

Step 2 runs each model with each runtime in its own subprocess (so the peak is that runtime's
alone): load, one warm-up run, ``--runs`` timed runs; ``--rounds`` such process pairs alternate.
It prints the medians over all timed runs of wall and CPU seconds (process user+sys, all threads:
the fairer number on a shared machine), user and system time, the child's own peak (VmHWM), the
ratios and the relative L2 difference of the outputs. ``--models unet_sdxl`` also measures the
full-size SDXL base UNet exported by ``tools/sdxl_full_export.py`` (branch i11-sdxl; ``--sdxl`` folder, latent
``--sdxl-latent``, 128 = 1024×1024). ``--lock`` holds a flock file around each onnxruntime process
only (its peak is GBs; frame's is not). ``--frame-env NAME=VALUE`` (repeatable) sets an environment
variable in frame's children only: the BLAS column says which OpenBLAS kernels ran (a machine that
pins ``OPENBLAS_CORETYPE`` to an older core than it has gives frame's GEMMs a handicap onnxruntime,
which picks its own kernels, does not share). ``--baseline-tree DIR`` adds a third child per round,
frame imported from DIR (e.g. ``git archive BASE | tar -x -C DIR``), so an engine change is measured
before and after in the same run, alternating with onnxruntime. ``--threads 1,2`` measures each
thread count in turn and adds each runtime's 1 → 2 thread wall speedup; every line carries the load
average (the machine may be shared). Usage:

    .venv/bin/python benchmarks/engine_vs_onnxruntime.py [--cache DIR] [--models unet,vae_decoder,text_encoder]
    .venv/bin/python benchmarks/engine_vs_onnxruntime.py --models unet,unet_sdxl --rounds 3 --runs 1 \
        --lock /work/locks/bigmem.lock
    .venv/bin/python benchmarks/engine_vs_onnxruntime.py --models unet,vae_decoder --threads 1,2 --runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
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
DEFAULT_SDXL = "/work/cache/sdxl-full/fp32"


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
SDXL_MODEL = "unet_sdxl"  # the SDXL base UNet of --sdxl (tools/sdxl_full_export.py), not exported here


def model_path(name: str, cache: Path, sdxl: Path) -> Path:
    return sdxl / "unet" / "model.onnx" if name == SDXL_MODEL else cache / name / "model.onnx"


def feeds_for(name: str, latent: int = 64) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "text_encoder":
        ids = rng.integers(1, 49406, (1, 77)).astype(np.int64)
        ids[0, 0], ids[0, 20:] = 49406, 49407
        return {"input_ids": ids}
    if name in ("unet", SDXL_MODEL):
        context = 2048 if name == SDXL_MODEL else 768
        feeds = {"sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32),
                 "timestep": np.array([999.0], np.float32),
                 "encoder_hidden_states": rng.standard_normal((1, 77, context)).astype(np.float32)}
        if name == SDXL_MODEL:  # pooled text embedding and the (original size, crop, target size) ids
            feeds["text_embeds"] = rng.standard_normal((1, 1280)).astype(np.float32)
            feeds["time_ids"] = np.array([[latent * 8, latent * 8, 0, 0, latent * 8, latent * 8]], np.float32)
        return feeds
    return {"latent_sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32)}


def _vmhwm_mb() -> float:
    """This process's own peak resident memory (VmHWM; ru_maxrss would include the parent's)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _blas_core() -> str:
    try:
        from threadpoolctl import threadpool_info

        info = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
        return f"{info[0].get('architecture')} x{info[0]['num_threads']}" if info else "no OpenBLAS"
    except Exception:  # threadpoolctl missing: not worth failing the benchmark
        return "?"


def worker(runtime: str, name: str, path: Path, runs: int, out_path: str, weights: str, threads: int,
           latent: int, tree: str | None = None) -> None:
    """Runs in the subprocess: load, one warm-up run, ``runs`` timed runs, report JSON on stdout."""
    import resource

    feeds = feeds_for(name, latent)
    start = time.perf_counter()
    if runtime == "frame":
        sys.path.insert(0, tree or str(Path(__file__).resolve().parents[1]))
        from frame.engine import load_model

        model = load_model(str(path), weights=weights)
        run = model.run
    else:
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]

        def run(f):
            return dict(zip(names, session.run(names, f)))
    load_seconds = time.perf_counter() - start
    run(feeds)  # warm-up: page cache, allocator arenas, thread pools
    times, cpu, user, system = [], [], [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_SELF)
        start, start_cpu = time.perf_counter(), time.process_time()
        outputs = run(feeds)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        after = resource.getrusage(resource.RUSAGE_SELF)
        user.append(after.ru_utime - before.ru_utime)
        system.append(after.ru_stime - before.ru_stime)
    np.savez(out_path, **outputs)
    print(json.dumps({"load_s": load_seconds, "run_s": times, "cpu_s": cpu, "user_s": user, "sys_s": system,
                      "peak_rss_mb": _vmhwm_mb(), "blas": _blas_core() if runtime == "frame" else "MLAS"}))


@contextlib.contextmanager
def _maybe_locked(lock: str | None):
    """Hold the machine's big-memory lock (flock) around one onnxruntime child, if given."""
    if not lock:
        yield
        return
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


BASELINE = "frame-baseline"  # frame from --baseline-tree


def measure(runtime: str, name: str, args: argparse.Namespace) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "out.npz")
        tree = ["--tree", str(Path(args.baseline_tree).resolve())] if runtime == BASELINE else []
        runtime = "frame" if runtime == BASELINE else runtime
        cmd = [sys.executable, __file__, "--worker", runtime, name, *tree, "--cache", args.cache, "--sdxl", args.sdxl,
               "--runs", str(args.runs), "--out", out_path, "--weights", args.weights, "--threads",
               str(args.threads), "--latent", str(latent_of(name, args))]
        env = dict(os.environ)
        if args.threads:  # BLAS reads these when numpy loads, so they must be set for the subprocess
            env.update(OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
        if runtime == "frame":
            env.update(dict(item.split("=", 1) for item in args.frame_env))
        with _maybe_locked(args.lock if runtime == "onnxruntime" else None):
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{runtime} {name} failed:\n{proc.stderr[-3000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        with np.load(out_path) as data:
            outputs = {k: data[k] for k in data.files}
    return result, outputs


def latent_of(name: str, args: argparse.Namespace) -> int:
    return args.sdxl_latent if name == SDXL_MODEL else 64


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _summary(results: list[dict]) -> dict:
    """Medians over every timed run of every round; the largest peak."""
    runs = {key: [v for r in results for v in r[key]] for key in ("run_s", "cpu_s", "user_s", "sys_s")}
    return {**{key: float(np.median(v)) for key, v in runs.items()}, "n": len(runs["run_s"]),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in results), "blas": results[0]["blas"],
            "all_cpu": runs["cpu_s"]}


def _load() -> str:
    return "load " + " ".join(open("/proc/loadavg").read().split()[:3])


def compare(name: str, args: argparse.Namespace) -> dict[str, dict]:
    """``args.rounds`` rounds of one child per runtime (alternating), then medians and ratios."""
    runtimes = ("onnxruntime", BASELINE, "frame") if args.baseline_tree else ("onnxruntime", "frame")
    results: dict[str, list[dict]] = {runtime: [] for runtime in runtimes}
    outputs: dict[str, dict] = {}
    for _ in range(args.rounds):
        for runtime in runtimes:
            result, out = measure(runtime, name, args)
            results[runtime].append(result)
            outputs[runtime] = out
            print(f"  {name} {runtime}: wall {', '.join(f'{t:.2f}' for t in result['run_s'])} s, CPU "
                  f"{', '.join(f'{t:.2f}' for t in result['cpu_s'])} s, VmHWM {result['peak_rss_mb']:.0f} MB, "
                  f"threads {args.threads or 'default'}, {_load()}", flush=True)
    summaries = {runtime: _summary(results[runtime]) for runtime in runtimes}
    for runtime, s in summaries.items():
        print(f"{name:<10} {runtime:<12} {s['peak_rss_mb']:>9.0f} {s['run_s']:>8.2f} {s['cpu_s']:>8.2f} "
              f"{s['user_s']:>7.2f} {s['sys_s']:>7.2f} {s['n']:>3}  {s['blas']}", flush=True)
    ort_s = summaries["onnxruntime"]
    for runtime in runtimes[1:]:
        fr_s = summaries[runtime]
        diffs = ", ".join(f"{k} {rel_l2(outputs[runtime][k], want):.1e}" for k, want in outputs["onnxruntime"].items())
        print(f"{name:<10} {runtime}/ORT: peak ×{fr_s['peak_rss_mb'] / ort_s['peak_rss_mb']:.3f}, wall ×"
              f"{fr_s['run_s'] / ort_s['run_s']:.2f}, CPU ×{fr_s['cpu_s'] / ort_s['cpu_s']:.2f}; "
              f"output rel L2: {diffs}; threads {args.threads or 'default'}, {_load()}", flush=True)
    return summaries


def speedups(name: str, by_threads: dict[int, dict[str, dict]]) -> None:
    """Each runtime's wall-time speedup from the fewest to each higher thread count (same run)."""
    counts = sorted(by_threads)
    for count in counts[1:]:
        cells = [f"{runtime} ×{by_threads[counts[0]][runtime]['run_s'] / s['run_s']:.2f}"
                 for runtime, s in by_threads[count].items()]
        print(f"{name:<10} wall speedup {counts[0]} → {count} threads: {', '.join(cells)}; {_load()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default=DEFAULT_CACHE)
    parser.add_argument("--sdxl", default=DEFAULT_SDXL, help=f"SDXL diffusers ONNX folder (for --models {SDXL_MODEL})")
    parser.add_argument("--sdxl-latent", type=int, default=128, help="SDXL latent size (128 = 1024x1024)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--runs", type=int, default=3, help="timed runs per process (after one warm-up)")
    parser.add_argument("--rounds", type=int, default=1, help="processes per runtime, alternating; medians of all")
    parser.add_argument("--lock", help="flock file held around each onnxruntime process (e.g. /work/locks/bigmem.lock)")
    parser.add_argument("--weights", default="prefetch", help="frame weights provider")
    parser.add_argument("--threads", default="0",
                        help="compute threads for both runtimes (0 = library defaults: all cores); a list such "
                             "as 1,2 measures each count in turn and prints each runtime's speedup between them")
    parser.add_argument("--frame-env", action="append", default=[], metavar="NAME=VALUE",
                        help="environment variable for frame's children only, e.g. OPENBLAS_CORETYPE=SkylakeX "
                             "(OpenBLAS picks its kernels when numpy loads; onnxruntime's MLAS ignores it)")
    parser.add_argument("--baseline-tree", metavar="DIR",
                        help="also run frame imported from DIR (a checkout of the base commit) in every round")
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--export-only", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("RUNTIME", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--latent", type=int, default=64, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    thread_counts = [int(t) for t in str(args.threads).split(",") if t]
    args.threads = thread_counts[0]
    if args.worker:
        runtime, name = args.worker
        worker(runtime, name, model_path(name, Path(args.cache), Path(args.sdxl)), args.runs, args.out,
               args.weights, args.threads, args.latent, args.tree)
        return
    names = [n for n in args.models.split(",") if n]
    ensure_exported(Path(args.cache), [n for n in names if n != SDXL_MODEL])
    if args.export_only:
        return
    print(f"{'model':<10} {'runtime':<12} {'VmHWM MB':>9} {'s/run':>8} {'CPU s':>8} {'user':>7} {'sys':>7} "
          f"{'n':>3}  BLAS   (medians)")
    for name in names:
        by_threads = {}
        for count in thread_counts:
            args.threads = count
            by_threads[count] = compare(name, args)
        if len(by_threads) > 1:
            speedups(name, by_threads)


if __name__ == "__main__":
    main()
