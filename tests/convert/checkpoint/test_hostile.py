"""Files that are not what they claim, or not checkpoints at all: one line naming the file and what was
found, and no tensor allocated from a size the file made up."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from frame.convert.checkpoint.plan import Options, detect
from frame.convert.checkpoint.reader import open_checkpoint
from frame.errors import UsageError
from tests.convert.checkpoint.helpers import FIXTURES, ManifestCheckpoint, read_raw, write_safetensors


def _refusal(path, **options) -> str:
    with pytest.raises(UsageError) as info:
        checkpoint = open_checkpoint(str(path))
        try:
            detect(checkpoint, Options(**options))
        finally:
            checkpoint.close()
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


def _small(path, header_edit=None, **tensors):
    return write_safetensors(path, tensors or {"a": np.ones((2, 3), np.float32)}, header_edit=header_edit)


def test_truncated_checkpoint(tmp_path):
    data = (FIXTURES / "sd15.safetensors").read_bytes()
    path = tmp_path / "cut.safetensors"
    path.write_bytes(data[:len(data) // 2])
    assert "reach past the file's 70719 data bytes (a truncated file?)" in _refusal(path)


def test_header_bomb(tmp_path):
    path = tmp_path / "bomb.safetensors"
    path.write_bytes((1 << 62).to_bytes(8, "little") + b"{" + b" " * 100)
    assert "header length 4611686018427387904 does not fit the file" in _refusal(path)


def test_offsets_out_of_range(tmp_path):
    def edit(header):
        header["a"]["data_offsets"] = [0, 10 ** 12]
    assert "'a': data_offsets [0, 1000000000000] reach past the file's 24 data bytes" in _refusal(
        _small(tmp_path / "far.safetensors", edit))


def test_dtype_lie(tmp_path):
    def edit(header):
        header["a"]["dtype"] = "F16"  # 24 bytes of float32 declared as 6 float16s
    assert "'a': shape [2, 3] of F16 needs 12 bytes, data_offsets give 24" in _refusal(
        _small(tmp_path / "lie.safetensors", edit))


def test_shape_too_large_to_multiply_in_int64(tmp_path):
    """2^120 elements in no bytes: numpy's int64 product wraps to 0, which matched the empty range."""
    def edit(header):
        header["a"]["shape"] = [1 << 40, 1 << 40, 1 << 40]
        header["a"]["data_offsets"] = [0, 0]
    assert "'a': shape [1099511627776, 1099511627776, 1099511627776] of F32 needs more bytes" in _refusal(
        _small(tmp_path / "huge.safetensors", edit))


def test_unreadable_dtype(tmp_path):
    def edit(header):
        header["a"]["dtype"] = "F8_E4M3"
    assert "dtype F8_E4M3, which frame cannot read" in _refusal(_small(tmp_path / "fp8.safetensors", edit))


def test_not_a_checkpoint_at_all(tmp_path):
    path = tmp_path / "picture.safetensors"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert "neither a .safetensors nor a .ckpt checkpoint" in _refusal(path)


def test_empty_torch_checkpoint(tmp_path):
    path = tmp_path / "model.ckpt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    assert "holds no tensors, not a checkpoint" in _refusal(path)


def test_unknown_architecture_names_its_keys(tmp_path):
    path = _small(tmp_path / "flux.safetensors", **{"double_blocks.0.img_attn.qkv.weight": np.ones(3, np.float32),
                                                     "double_blocks.0.img_mod.lin.bias": np.ones(3, np.float32)})
    message = _refusal(path)
    assert "not a Stable Diffusion checkpoint frame knows" in message
    assert "2 under 'double_blocks.0'" in message


def test_lora_given_as_checkpoint(tmp_path):
    path = _small(tmp_path / "style.safetensors", **{
        "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": np.ones((4, 8), np.float16),
        "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": np.ones((8, 4), np.float16),
        "lora_unet_down_blocks_0_attentions_0_proj_in.alpha": np.ones((), np.float16)})
    message = _refusal(path)
    assert "a LoRA (3 LoRA keys such as lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight)" in message


def test_peft_lora_given_as_checkpoint(tmp_path):
    path = _small(tmp_path / "peft.safetensors", **{
        "unet.down_blocks.0.attentions.0.proj_in.lora_A.weight": np.ones((4, 8), np.float16)})
    assert "a LoRA" in _refusal(path)


def test_embedding_given_as_checkpoint(tmp_path):
    path = _small(tmp_path / "ti.safetensors", emb_params=np.ones((2, 768), np.float16))
    assert "a textual-inversion embedding" in _refusal(path)


def test_unknown_unet_key(tmp_path):
    tensors = read_raw(FIXTURES / "sd15.safetensors")
    tensors["model.diffusion_model.input_blocks.1.2.extra.weight"] = np.ones(2, np.float32)
    message = _refusal(write_safetensors(tmp_path / "odd.safetensors", tensors))
    assert "1 UNet key(s) frame does not know: input_blocks.1.2.extra.weight" in message


def test_unet_without_text_encoder(tmp_path):
    tensors = {k: v for k, v in read_raw(FIXTURES / "sd15.safetensors").items() if k.startswith("model.")}
    message = _refusal(write_safetensors(tmp_path / "unet_only.safetensors", tensors))
    assert "a UNet without the text encoder(s) it needs (found model.diffusion_model)" in message


def test_missing_vae_asks_for_one(tmp_path):
    tensors = {k: v for k, v in read_raw(FIXTURES / "sd15.safetensors").items() if not k.startswith("first_stage")}
    message = _refusal(write_safetensors(tmp_path / "no_vae.safetensors", tensors))
    assert "no VAE in it (no first_stage_model.* keys); give one with --vae FILE" in message


@pytest.mark.parametrize(("channels", "what"), [(9, "an inpainting model"), (8, "an instruct-pix2pix model")])
def test_inpainting_unet_is_refused(channels, what):
    conv_in = "model.diffusion_model.input_blocks.0.0.weight"
    checkpoint = ManifestCheckpoint("sd15", extra={conv_in: (320, channels, 3, 3)})
    with pytest.raises(UsageError, match=f"{what} \\({channels} input channels\\)"):
        detect(checkpoint)


def test_sdxl_refiner_is_refused():
    checkpoint = ManifestCheckpoint("sdxl")
    checkpoint.tensors = {k.replace("conditioner.embedders.1.", "conditioner.embedders.0."): v
                          for k, v in checkpoint.tensors.items() if not k.startswith("conditioner.embedders.0.")}
    with pytest.raises(UsageError, match="an SDXL refiner"):
        detect(checkpoint)


def test_context_width_must_match_the_text_encoder():
    checkpoint = ManifestCheckpoint("sd15")
    checkpoint.tensors = {k: v for k, v in checkpoint.tensors.items() if not k.startswith("cond_stage_model.")}
    sd21 = ManifestCheckpoint("sd21")
    checkpoint.tensors.update({k: v for k, v in sd21.tensors.items() if k.startswith("cond_stage_model.")})
    with pytest.raises(UsageError, match="the UNet attends to width 768, but the text encoder\\(s\\) give 1024"):
        detect(checkpoint)
