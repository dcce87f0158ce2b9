"""``frame model import --tiny-vae``: madebyollin's single files and a diffusers AutoencoderTiny folder into
a tiny-VAE folder, decoded by frame's engine as diffusers decodes (the taesd_* graph fixtures' torch outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from frame.cli.program import main
from frame.convert.graphs import TinyVaeConfig, attach_weights, build_taesd_decoder, weight_specs
from frame.convert.importer.vae import import_tiny_vae
from frame.engine import load_model
from frame.errors import UsageError
from tests.convert.checkpoint.helpers import write_safetensors
from tests.convert.graph_cases import FIXTURES, load_case
from tests.convert.test_taesd import MIN_PSNR, psnr


def _fixture_folder(tmp_path: Path) -> tuple[Path, object]:
    """A diffusers AutoencoderTiny folder holding the fixtures' (16-channel) weights."""
    dec, enc = load_case(FIXTURES / "taesd_decoder"), load_case(FIXTURES / "taesd_encoder")
    folder = tmp_path / "taesd-diffusers"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"_class_name": "AutoencoderTiny", **dec.config}))  # as saved
    write_safetensors(folder / "diffusion_pytorch_model.safetensors",
                      {k: v.astype(np.float16) for k, v in {**dec.weights, **enc.weights}.items()})
    return folder, (dec, enc)


def _run(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    with load_model(path) as model:
        return next(iter(model.run(feeds).values()))


def test_diffusers_folder_decodes_and_encodes_as_diffusers(tmp_path: Path):
    folder, (dec, enc) = _fixture_folder(tmp_path)
    reports = import_tiny_vae(str(folder), tmp_path / "tiny", weights="fp32")
    assert set(reports) == {"vae_decoder", "vae_encoder"}
    assert psnr(_run(tmp_path / "tiny/vae_decoder/model.onnx", dec.feeds()), dec.expected["sample"]) >= MIN_PSNR
    latents = _run(tmp_path / "tiny/vae_encoder/model.onnx", enc.feeds())
    want = enc.expected["latent_sample"]
    assert np.linalg.norm(latents - want) / np.linalg.norm(want) < 1e-4
    config = json.loads((tmp_path / "tiny/vae_decoder/config.json").read_text())
    assert config["_class_name"] == "AutoencoderTiny" and config["scaling_factor"] == 1.0
    assert not list(tmp_path.glob(".tiny*")), "nothing left aside"


def test_published_single_files_uint8(tmp_path: Path):
    """madebyollin's layout: decoder indices one higher (its Clamp is index 0); the encoder found beside it."""
    rng = np.random.default_rng(3)
    specs = weight_specs(build_taesd_decoder(TinyVaeConfig()))
    state = {k: (0.05 * rng.standard_normal(s)).astype(np.float32) for k, s in specs}
    published = {f"{int(k.split('.')[2]) + 1}.{'.'.join(k.split('.')[3:])}": v for k, v in state.items()}
    src = write_safetensors(tmp_path / "taesd_decoder.safetensors", {k: v.astype(np.float16) for k, v in
                                                                       published.items()})
    assert main(["model", "import", "--tiny-vae", "--weights", "uint8", str(src), str(tmp_path / "tiny")]) == 0
    assert not (tmp_path / "tiny/vae_encoder").exists(), "no encoder file beside it: decoder only"
    feeds = {"latent_sample": rng.standard_normal((1, 4, 6, 6)).astype(np.float32)}
    reference = attach_weights(build_taesd_decoder(TinyVaeConfig()),
                               {k: v.astype(np.float16).astype(np.float32) for k, v in state.items()})
    onnx.save(reference, tmp_path / "ref.onnx")
    got, want = _run(tmp_path / "tiny/vae_decoder/model.onnx", feeds), _run(tmp_path / "ref.onnx", feeds)
    assert got.shape == (1, 3, 48, 48)
    assert psnr(got, want) > 30.0  # uint8 weights: close, not exact


def test_refusals_leave_nothing(tmp_path: Path):
    bad = write_safetensors(tmp_path / "taesd_decoder.safetensors", {"1.weight": np.zeros((64, 4, 3, 3), np.float32)})
    with pytest.raises(UsageError, match="not a TAESD decoder of this config .missing"):
        import_tiny_vae(str(bad), tmp_path / "tiny")
    assert not (tmp_path / "tiny").exists() and not list(tmp_path.glob(".tiny*"))
    (tmp_path / "exists").mkdir()
    with pytest.raises(UsageError, match="exists already"):
        import_tiny_vae(str(bad), tmp_path / "exists")
    (tmp_path / "kl").mkdir()
    (tmp_path / "kl/config.json").write_text(json.dumps({"_class_name": "AutoencoderKL"}))
    with pytest.raises(UsageError, match="not an AutoencoderTiny config"):
        import_tiny_vae(str(tmp_path / "kl"), tmp_path / "tiny")
