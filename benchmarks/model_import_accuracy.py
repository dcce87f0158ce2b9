"""Full-size SD 1.5 import against the reference: each imported component's output vs torch's.

Dev-only (torch, diffusers, transformers, onnxruntime). A full-size SD 1.5 pipeline with seeded random
weights (diffusers' own initialisers, built from the published configs of
tools/checkpoint_manifests.py) is written as a single-file checkpoint in the original key layout
(tools/checkpoint_layout.py, float32), imported by ``frame model import --weights fp32`` (frame's own
graphs, no torch), and each imported graph is run in onnxruntime on the inputs torch's module gets:
text encoder, UNet, VAE decoder and encoder (the import's encoder draws its noise in the graph, so
the encoder is also written in optimum's ``latent_parameters`` style from the same checkpoint, and its
mean compared). The relative error (max |frame - torch| / max |torch|)
of each must stay ≤ 1e-4 (issue 41). Needs about 12 GB of memory and a few minutes.

With ``--optimum-path DIR``, the same weights are also exported by optimum (``optimum-cli export onnx``'s
``main_export``, task text-to-image) from a diffusers folder written by this script, and each imported
graph is compared in onnxruntime against optimum's export in onnxruntime, on the same inputs (issue 41
item 4's last clause). optimum-onnx 0.1.0 pins transformers < 4.58 (and so huggingface_hub < 1.0, which
diffusers 0.42 cannot use), so it lives in a private folder put on the export child's path only, leaving
the development environment (torch 2.13, transformers 5, diffusers 0.42) as it is:

    .venv/bin/pip install --no-deps --target /tmp/optimum-pkgs optimum==2.1.0 optimum-onnx==0.1.0 \
        transformers==4.57.6 tokenizers==0.22.2 huggingface_hub==0.36.2 diffusers==0.35.2

    .venv/bin/python benchmarks/model_import_accuracy.py [--cache /tmp/frame-accuracy] [--optimum-path DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import checkpoint_layout as layout  # noqa: E402
import checkpoint_manifests as manifests  # noqa: E402

LIMIT = 1e-4


def build():
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    configs = manifests.KINDS["sd15"]
    torch.manual_seed(15)
    unet = UNet2DConditionModel(**configs["unet"]).eval()
    vae = AutoencoderKL(**configs["vae"]).eval()
    text_config = CLIPTextConfig(**configs["text_encoder"])
    text_config._attn_implementation = "eager"
    text = CLIPTextModel(text_config).eval()
    return unet, vae, text


def write_checkpoint(path: Path, unet, vae, text) -> None:
    from safetensors.numpy import save_file

    def state(module):
        return {k: v.detach().numpy() for k, v in module.state_dict().items() if not k.endswith("position_ids")}

    tensors = layout.unet_to_original(state(unet), unet.config)
    tensors.update(layout.vae_to_original(state(vae), vae.config))
    tensors.update(layout.clip_to_original(state(text), "cond_stage_model.transformer."))
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))


def encoder_parameters(checkpoint: Path, folder: Path) -> None:
    """The VAE encoder as optimum >= 1.23 writes it (mean and log-variance), from the same checkpoint
    through the import's own streaming writer."""
    from frame.convert.checkpoint.plan import detect
    from frame.convert.checkpoint.reader import open_checkpoint
    from frame.convert.graphs import VaeConfig, build_vae_encoder
    from frame.convert.importer.graph_weights import write_graph

    opened = open_checkpoint(str(checkpoint))
    try:
        vae = detect(opened).component("vae")
        folder.mkdir()
        write_graph(build_vae_encoder(VaeConfig.from_diffusers(vae.config), "parameters"), vae, folder, "fp32")
    finally:
        opened.close()


def write_diffusers(folder: Path, unet, vae, text) -> None:
    """The same modules as a diffusers pipeline folder for optimum. The text encoder's weights are written
    with the ``text_model.`` prefix transformers < 5 loads (transformers 5 saves them without it), and the
    tokenizer is frame's CLIP vocabulary files."""
    from diffusers import PNDMScheduler, StableDiffusionPipeline
    from safetensors.torch import save_file
    from transformers import CLIPTokenizer

    tokenizer = CLIPTokenizer.from_pretrained(str(ROOT / "frame" / "models" / "demo" / "tokenizer"))
    scheduler = PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                              skip_prk_steps=True, steps_offset=1)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet, scheduler=scheduler,
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    shutil.rmtree(folder, ignore_errors=True)
    pipe.save_pretrained(str(folder), safe_serialization=True)
    shutil.rmtree(folder / "tokenizer")  # transformers 5 writes tokenizer.json only; < 5 reads the BPE files
    shutil.copytree(ROOT / "frame" / "models" / "demo" / "tokenizer", folder / "tokenizer")
    for stale in (folder / "text_encoder").glob("model*.safetensors*"):
        stale.unlink()
    weights = {k if k.startswith("text_model.") else f"text_model.{k}": v.contiguous()
               for k, v in text.state_dict().items()}
    save_file(weights, str(folder / "text_encoder" / "model.safetensors"), metadata={"format": "pt"})


def optimum_export(folder: Path, out: Path, optimum_path: Path) -> None:
    """optimum's ONNX export of ``folder`` into ``out``, in a child with ``optimum_path`` first on its path."""
    shutil.rmtree(out, ignore_errors=True)
    code = ("import sys; from optimum.exporters.onnx import main_export; "
            "main_export(sys.argv[1], sys.argv[2], task='text-to-image', device='cpu', no_post_process=True)")
    subprocess.run([sys.executable, "-c", code, str(folder), str(out)], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(optimum_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2"})


def against_optimum(model: Path, exported: Path, feeds: dict) -> dict[str, float]:
    """Each imported graph and optimum's in onnxruntime on the same inputs (the encoder's mean: optimum
    writes mean and log-variance, as the import's ``parameters`` encoder does)."""
    import onnxruntime as ort

    theirs = {"text_encoder": "text_encoder", "unet": "unet", "vae_decoder": "vae_decoder",
              "vae_encoder_parameters": "vae_encoder"}
    results = {}
    for graph, other in theirs.items():
        outputs = []
        for path in (model / graph / "model.onnx", exported / other / "model.onnx"):
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            given = {}
            for arg in session.get_inputs():
                value = feeds[graph][arg.name]
                if not arg.shape:  # optimum's timestep is a scalar, frame's one value per step
                    value = value.reshape(())
                given[arg.name] = value.astype({"tensor(int64)": np.int64, "tensor(int32)": np.int32,
                                                "tensor(float)": np.float32}.get(arg.type, value.dtype))
            outputs.append(session.run(None, given)[0])
            del session
        mine, reference = outputs
        if graph == "vae_encoder_parameters":
            mine, reference = mine[:, :4], reference[:, :4]
        results[graph] = relative(mine, reference)
    return results


def relative(frame: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(frame - reference).max() / np.abs(reference).max())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/frame-accuracy"))
    parser.add_argument("--optimum-path", type=Path, help="a folder holding optimum and optimum-onnx (see above)")
    parser.add_argument("--reuse-export", action="store_true",
                        help="keep optimum's export in the cache from an earlier run (same seed, same weights)")
    args = parser.parse_args()
    import onnxruntime as ort

    torch.set_num_threads(2)
    args.cache.mkdir(parents=True, exist_ok=True)
    unet, vae, text = build()
    checkpoint, model = args.cache / "sd15-fp32.safetensors", args.cache / "imported"
    write_checkpoint(checkpoint, unet, vae, text)
    shutil.rmtree(model, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "frame", "model", "import", str(checkpoint), str(model), "--weights",
                    "fp32"], check=True, env={"PYTHONPATH": str(ROOT)}, cwd=ROOT)
    encoder_parameters(checkpoint, model / "vae_encoder_parameters")
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 49406, (1, 77)).astype(np.int64)
    ids[0, 0], ids[0, 12:] = 49406, 49407
    sample = rng.standard_normal((2, 4, 32, 32), dtype=np.float32)
    context = rng.standard_normal((2, 77, 768), dtype=np.float32)
    latent = rng.standard_normal((1, 4, 32, 32), dtype=np.float32)
    picture = rng.uniform(-1, 1, (1, 3, 128, 128)).astype(np.float32)
    results = {}
    with torch.no_grad():
        references = {
            "text_encoder": text(torch.from_numpy(ids)).last_hidden_state.numpy(),
            "unet": unet(torch.from_numpy(sample), torch.tensor([501.0]), torch.from_numpy(context)).sample.numpy(),
            "vae_decoder": vae.decode(torch.from_numpy(latent)).sample.numpy(),
            "vae_encoder_parameters": vae.encode(torch.from_numpy(picture)).latent_dist.mean.numpy(),
        }
    feeds = {"text_encoder": {"input_ids": ids.astype(np.int32)},
             "unet": {"sample": sample, "timestep": np.array([501.0], np.float32), "encoder_hidden_states": context},
             "vae_decoder": {"latent_sample": latent}, "vae_encoder_parameters": {"sample": picture}}
    for graph, reference in references.items():
        session = ort.InferenceSession(str(model / graph / "model.onnx"), providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        outputs = session.run(None, {n: feeds[graph][n] for n in names})
        out = outputs[0][:, :reference.shape[1]] if graph == "vae_encoder_parameters" else outputs[0]  # the mean
        results[graph] = relative(out, reference)
        del session
    report = {"relative_error": {k: float(f"{v:.2e}") for k, v in results.items()}}
    if args.optimum_path:
        if not (args.reuse_export and (args.cache / "optimum" / "unet" / "model.onnx").is_file()):
            write_diffusers(args.cache / "diffusers", unet, vae, text)
            del unet, vae, text
            optimum_export(args.cache / "diffusers", args.cache / "optimum", args.optimum_path)
        against = against_optimum(model, args.cache / "optimum", feeds)
        report["relative_error_vs_optimum"] = {k: float(f"{v:.2e}") for k, v in against.items()}
        results.update({f"{k} (optimum)": v for k, v in against.items()})
    verdict = "OK" if all(v <= LIMIT for v in results.values()) else "over 1e-4"
    print(json.dumps(report) + f"  {verdict}")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    raise SystemExit(main())
