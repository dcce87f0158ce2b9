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

    .venv/bin/python benchmarks/model_import_accuracy.py [--cache /tmp/frame-accuracy]
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


def relative(frame: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(frame - reference).max() / np.abs(reference).max())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/frame-accuracy"))
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
    verdict = "OK" if all(v <= LIMIT for v in results.values()) else "over 1e-4"
    print(json.dumps({"relative_error": {k: float(f"{v:.2e}") for k, v in results.items()}}) + f"  {verdict}")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    raise SystemExit(main())
