"""``frame model import`` on the command line: what it prints, its exit codes, --into."""

from __future__ import annotations

import json

import numpy as np

from frame.cli.program import main
from tests.convert.checkpoint.helpers import FIXTURES, read_raw, write_safetensors

SD15 = str(FIXTURES / "sd15.safetensors")
CONFIGS = str(FIXTURES / "sd15")


def test_import_says_what_it_found_and_writes_the_folder(tmp_path, capsys):
    dst = tmp_path / "model"
    assert main(["model", "import", SD15, str(dst), "--weights", "uint8", "--config-from", CONFIGS]) == 0
    out = capsys.readouterr().out
    assert out.startswith("detected: SD 1.x (CLIP ViT-L text encoder, context 768), epsilon prediction, 512 px\n")
    assert f"wrote {dst}: weights" in out
    assert json.loads((dst / "model_index.json").read_text())["_class_name"] == "StableDiffusionPipeline"
    assert (dst / "unet" / "model.onnx").is_file()


def test_refusals_are_one_line_and_exit_2(tmp_path, capsys):
    lora = write_safetensors(tmp_path / "style.safetensors",
                             {"lora_unet_mid_block_attentions_0_proj_in.lora_down.weight": np.ones((2, 4), np.float16)})
    assert main(["model", "import", str(lora), str(tmp_path / "model")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "a LoRA" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["style.safetensors"]


def test_into_replaces_a_models_vae(tmp_path, capsys):
    dst = tmp_path / "model"
    assert main(["model", "import", SD15, str(dst), "--weights", "fp32", "--config-from", CONFIGS]) == 0
    tensors = read_raw(FIXTURES / "sd15.safetensors")
    vae = {k[len("first_stage_model."):]: (v * 0.5).astype(v.dtype) for k, v in tensors.items()
           if k.startswith("first_stage_model.")}
    vae_file = write_safetensors(tmp_path / "vae-ft-mse.safetensors", vae)
    before = (dst / "vae_decoder" / "model.onnx_data").read_bytes()
    assert main(["model", "import", str(vae_file), "--into", str(dst), "--weights", "fp32"]) == 0
    assert "replaced the VAE of" in capsys.readouterr().out
    after = (dst / "vae_decoder" / "model.onnx_data").read_bytes()
    assert after != before and len(after) == len(before)
    assert sorted(p.name for p in dst.iterdir() if p.name.startswith(".")) == []
    config = json.loads((dst / "vae_decoder" / "config.json").read_text())
    assert config["norm_num_groups"] == 4  # the model's own config, not the SD defaults


def test_into_refuses_a_vae_of_other_widths(tmp_path, capsys):
    dst = tmp_path / "model"
    assert main(["model", "import", SD15, str(dst), "--weights", "fp32", "--config-from", CONFIGS]) == 0
    vae = {k[len("first_stage_model."):]: v for k, v in read_raw(FIXTURES / "sd15.safetensors").items()
           if k.startswith("first_stage_model.")}
    vae["decoder.conv_out.weight"] = np.ones((4, 4, 3, 3), np.float16)
    vae["decoder.conv_out.bias"] = np.ones(4, np.float16)
    vae_file = write_safetensors(tmp_path / "odd-vae.safetensors", vae)
    before = (dst / "vae_decoder" / "model.onnx_data").read_bytes()
    assert main(["model", "import", str(vae_file), "--into", str(dst)]) == 2
    assert "out_channels is 3, but the checkpoint's vae weights say 4" in capsys.readouterr().err
    assert (dst / "vae_decoder" / "model.onnx_data").read_bytes() == before
