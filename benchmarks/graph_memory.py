"""frame's own graphs (frame.convert.graphs) against optimum-style exports of the same weights, in the engine.

The importer builds each component's graph instead of exporting it with torch; the layers are
written in the layouts the engine's passes fuse, so a built graph should run in the memory and time
of the TorchScript export optimum makes (opset 14, optimum's names and dynamic axes). This measures
it at full width: a random-weight SD 1.5 component (diffusers/transformers, seeded) is exported with
torch's TorchScript exporter and built by frame from its config with the same state dict; each graph
runs once in the engine in its own process, which reports its peak RSS (``VmHWM``, Python and numpy
included) and the run's time, and the two outputs are compared.

Dev-only (torch, diffusers, transformers). The exports are kept in ``--cache``.

    PYTHONPATH=. .venv/bin/python benchmarks/graph_memory.py [--only vae_decoder,text_encoder,unet] [--latent 32]
        [--weights fp32|fp16|uint8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

SD15_UNET = {"attention_head_dim": 8, "block_out_channels": [320, 640, 1280, 1280], "cross_attention_dim": 768,
             "layers_per_block": 2, "sample_size": 64}
SD_VAE = {"block_out_channels": [128, 256, 512, 512], "down_block_types": ["DownEncoderBlock2D"] * 4,
          "up_block_types": ["UpDecoderBlock2D"] * 4, "layers_per_block": 2, "latent_channels": 4,
          "norm_num_groups": 32}
CLIP_L = {"vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
          "num_attention_heads": 12, "max_position_embeddings": 77, "hidden_act": "quick_gelu", "projection_dim": 768}


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(model: str, feeds: str, out: str) -> None:
    """Run one graph once; print its peak RSS and time as JSON and keep its outputs in ``out``."""
    from frame.engine import load_model

    with np.load(feeds) as data:
        arrays = {k: data[k] for k in data.files}
    start = time.perf_counter()
    with load_model(model) as m:
        loaded = time.perf_counter()
        result = m.run(arrays)
        ran = time.perf_counter()
        rewrites = {k: v for k, v in m.rewrites.items() if v}
    np.savez(out, **result)
    print(json.dumps({"peak_mb": round(_status_mb("VmHWM"), 1), "load_s": round(loaded - start, 2),
                      "run_s": round(ran - loaded, 2), "rewrites": rewrites}))


def _feeds(name: str, latent: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "vae_decoder":
        return {"latent_sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32)}
    if name == "text_encoder":
        ids = rng.integers(1, 49405, (1, 77)).astype(np.int32)
        ids[0, 0], ids[0, 20:] = 49406, 49407
        return {"input_ids": ids}
    return {"sample": rng.standard_normal((1, 4, latent, latent)).astype(np.float32),
            "timestep": np.array([999.0], np.float32),
            "encoder_hidden_states": rng.standard_normal((1, 77, 768)).astype(np.float32)}


def _component(name: str, latent: int):
    """(torch module, optimum input names, output names, dynamic axes, feeds, state dict, frame graph builder)."""
    import tiny_models as tm
    import torch

    from frame.convert import graphs

    torch.manual_seed(0)
    feeds = _feeds(name, latent)
    if name == "vae_decoder":
        from diffusers import AutoencoderKL

        vae = AutoencoderKL(**SD_VAE).eval()
        axes = {"latent_sample": {0: "batch", 2: "h", 3: "w"}, "sample": {0: "batch", 2: "H", 3: "W"}}
        state = {k: v for k, v in vae.state_dict().items() if k.startswith(("decoder.", "post_quant_conv."))}
        return (tm.VaeDecoderWrapper(vae), ["latent_sample"], ["sample"], axes, feeds, state,
                lambda: graphs.build_vae_decoder(graphs.VaeConfig.from_diffusers(dict(vae.config))))
    if name == "text_encoder":
        model = tm.clip_text(0, CLIP_L)
        axes = {"input_ids": {0: "batch", 1: "seq"}, "last_hidden_state": {0: "batch", 1: "seq"},
                "pooler_output": {0: "batch"}}
        state = {f"text_model.{k}" if not k.startswith("text_model.") else k: v for k, v in model.state_dict().items()}
        cfg = model.config.to_dict()
        return (tm.ClipTextWrapper(model, False), ["input_ids"], ["last_hidden_state", "pooler_output"], axes,
                feeds, state,
                lambda: graphs.build_text_encoder(graphs.TextEncoderConfig.from_transformers(cfg)))
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel(**SD15_UNET).eval()
    axes = {"sample": {0: "batch", 2: "h", 3: "w"}, "timestep": {0: "steps"},
            "encoder_hidden_states": {0: "batch", 1: "seq"}, "out_sample": {0: "batch", 2: "h", 3: "w"}}
    return (tm.UNetWrapper(unet, False), list(feeds), ["out_sample"], axes, feeds, unet.state_dict(),
            lambda: graphs.build_unet(graphs.UNetConfig.from_diffusers(dict(unet.config))))


def export(module, args: tuple, path: Path, inputs: list[str], outputs: list[str], axes: dict) -> None:
    """optimum's export: TorchScript at opset 14, written to a file (a UNet is past protobuf's 2 GB), then
    gathered into one ``model.onnx_data`` as diffusers' ONNX folders have it."""
    import warnings

    import onnx
    import torch

    raw = path.parent / "_export" / "model.onnx"
    raw.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(raw), dynamo=False, opset_version=14, input_names=inputs,
                          output_names=outputs, dynamic_axes=axes, do_constant_folding=True)
    proto = onnx.load(str(raw))
    onnx.save_model(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx_data", size_threshold=1024)
    del proto
    for leftover in raw.parent.iterdir():
        leftover.unlink()
    raw.parent.rmdir()


def prepare(name: str, latent: int, cache: Path) -> tuple[Path, Path, Path]:
    """The optimum-style export, the built graph (same weights) and the feeds, made once in ``cache``."""
    folder = cache / name  # the graphs have dynamic sizes: one export, feeds per latent size
    optimum, built = folder / "optimum" / "model.onnx", folder / "frame" / "model.onnx"
    feeds_path = folder / f"feeds-{latent}.npz"
    if optimum.is_file() and built.is_file():
        if not feeds_path.is_file():
            np.savez(feeds_path, **_feeds(name, latent))
        return optimum, built, feeds_path
    import onnx
    import torch

    from frame.convert import graphs

    module, inputs, outputs, axes, feeds, state, build = _component(name, latent)
    args = tuple(torch.from_numpy(np.array(v, copy=True)) for v in feeds.values())
    export(module, args, optimum, inputs, outputs, axes)
    weights = {k: v.detach().numpy() for k, v in state.items()}
    model = graphs.attach_weights(build(), weights)
    built.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, os.fspath(built), save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.onnx_data", size_threshold=0)
    np.savez(feeds_path, **feeds)
    return optimum, built, feeds_path


def converted(model: Path, weights: str) -> Path:
    """``model`` as ``frame model convert --weights WEIGHTS`` writes it (kept beside it)."""
    if weights == "fp32":
        return model
    from frame.convert.files import Options, convert_file

    target = model.parent.parent / f"{model.parent.name}-{weights}" / "model.onnx"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        convert_file(model, target, Options(weights))
    return target


def measure(model: Path, feeds: Path) -> tuple[dict, dict[str, np.ndarray]]:
    out = model.parent / "outputs.npz"
    done = subprocess.run([sys.executable, __file__, "--child", str(model), "--feeds", str(feeds), "--out", str(out)],
                          capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    with np.load(out) as data:
        return json.loads(done.stdout.strip().splitlines()[-1]), {k: data[k] for k in data.files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="vae_decoder,text_encoder,unet")
    parser.add_argument("--latent", type=int, default=32, help="latent side for the VAE decoder and the UNet")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/frame-graph-memory"))
    parser.add_argument("--weights", default="fp32", choices=["fp32", "fp16", "uint8"],
                        help="run both graphs as frame model convert writes them")
    parser.add_argument("--child")
    parser.add_argument("--feeds")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.feeds, args.out)
        return
    for name in args.only.split(","):
        optimum, built, feeds = prepare(name, args.latent, args.cache)
        optimum, built = converted(optimum, args.weights), converted(built, args.weights)
        ref, ref_out = measure(optimum, feeds)
        own, own_out = measure(built, feeds)
        errors = {k: float(np.linalg.norm(own_out[k] - v) / np.linalg.norm(v)) for k, v in ref_out.items()}
        print(f"{name} (latent {args.latent}, {args.weights}): optimum export {ref['peak_mb']} MB peak, "
              f"{ref['run_s']} s run, {ref['load_s']} s load; frame graph {own['peak_mb']} MB, {own['run_s']} s, "
              f"{own['load_s']} s; relative L2 between them {max(errors.values()):.1e}")
        print(f"  rewrites: optimum {ref['rewrites']}\n            frame   {own['rewrites']}")


if __name__ == "__main__":
    main()
