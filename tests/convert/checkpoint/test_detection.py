"""How detection decides what the file does not say in its shapes: prediction type, native size,
Turbo, EMA weights, and a VAE from its own file (original or diffusers names)."""

from __future__ import annotations

import numpy as np
import pytest

from frame.convert.checkpoint.plan import Options, detect, detect_vae
from frame.convert.checkpoint.reader import open_checkpoint
from frame.errors import UsageError
from tests.convert.checkpoint.helpers import FIXTURES, ManifestCheckpoint, digest, expected, read_raw, write_safetensors


@pytest.mark.parametrize(("metadata", "prediction", "size"), [
    ({}, "v_prediction", 768),
    ({"modelspec.prediction_type": "epsilon"}, "epsilon", 512),
    ({"modelspec.architecture": "stable-diffusion-v2-768-v"}, "v_prediction", 768),
    ({"modelspec.prediction_type": "v", "modelspec.resolution": "768x768"}, "v_prediction", 768),
    ({"modelspec.prediction_type": "epsilon", "modelspec.resolution": "768x768"}, "epsilon", 768),
])
def test_sd2_prediction_from_the_file(metadata, prediction, size):
    found = detect(ManifestCheckpoint("sd21", metadata=metadata))
    assert (found.prediction, found.resolution) == (prediction, size)
    assert found.component("unet").config["sample_size"] == size // 8


def test_sd2_prediction_from_the_command_line():
    found = detect(ManifestCheckpoint("sd21"), Options(prediction="epsilon"))
    assert (found.prediction, found.resolution) == ("epsilon", 512)
    assert "prediction type from --prediction" in found.notes


def test_command_line_contradicting_the_file_is_refused():
    with pytest.raises(UsageError, match="--prediction says epsilon, but the file says v_prediction "
                                         r"\(its modelspec.prediction_type\)"):
        detect(ManifestCheckpoint("sd21", metadata={"modelspec.prediction_type": "v"}), Options(prediction="epsilon"))


def test_sd_turbo_by_name():
    found = detect(ManifestCheckpoint("sd21"), Options(name="sd_turbo.safetensors"))
    assert (found.family, found.turbo, found.prediction, found.resolution) == ("sd2", True, "epsilon", 512)
    assert ", Turbo," in found.label


def test_sdxl_turbo_by_title():
    found = detect(ManifestCheckpoint("sdxl", metadata={"modelspec.title": "SDXL Turbo"}))
    assert (found.turbo, found.prediction, found.resolution) == (True, "epsilon", 512)


def test_sdxl_v_pred_key():
    found = detect(ManifestCheckpoint("sdxl", extra={"v_pred": ()}))
    assert found.prediction == "v_prediction"


def test_sdxl_v_prediction_with_zero_terminal_snr():
    """NoobAI/"vpred" SDXL finetunes: v_pred and ztsnr keys; the scheduler is rescaled to zero SNR with
    trailing timesteps, which frame does not take for a Turbo model."""
    from frame.convert.importer.layout import scheduler_config

    found = detect(ManifestCheckpoint("sdxl", extra={"v_pred": (), "ztsnr": (), "denoiser.sigmas": (1000,)}))
    assert (found.prediction, found.zero_snr, found.turbo) == ("v_prediction", True, False)
    scheduler = scheduler_config(found)
    assert scheduler["rescale_betas_zero_snr"] is True and scheduler["timestep_spacing"] == "trailing"
    assert scheduler["prediction_type"] == "v_prediction"


def _with_ema(kind: str) -> ManifestCheckpoint:
    checkpoint = ManifestCheckpoint(kind)
    unet = [k for k in checkpoint.tensors if k.startswith("model.diffusion_model.")]
    checkpoint.tensors.update({"model_ema." + k[len("model."):].replace(".", ""): checkpoint.tensors[k] for k in unet})
    return checkpoint


def test_ema_weights_are_noticed_and_left_by_default():
    found = detect(_with_ema("sd15"))
    assert any("EMA weights; the regular ones are used" in note for note in found.notes)
    assert found.component("unet").takes["conv_in.weight"].source == "model.diffusion_model.input_blocks.0.0.weight"


def test_ema_weights_on_request():
    found = detect(_with_ema("sd15"), Options(use_ema=True))
    take = found.component("unet").takes["down_blocks.0.attentions.0.proj_in.weight"]
    assert take.source == "model_ema.diffusion_modelinput_blocks11proj_inweight"


def test_ema_without_ema_weights_is_refused():
    with pytest.raises(UsageError, match="--ema, but 686 UNet weights have no EMA copy"):
        detect(ManifestCheckpoint("sd15"), Options(use_ema=True))


def _vae_tensors(prefix_from: str = "first_stage_model.") -> dict[str, np.ndarray]:
    tensors = read_raw(FIXTURES / "sd15.safetensors")
    return {k[len(prefix_from):]: v for k, v in tensors.items() if k.startswith(prefix_from)}


def test_standalone_vae_in_original_names(tmp_path):
    checkpoint = open_checkpoint(str(write_safetensors(tmp_path / "vae-ft-mse.safetensors", _vae_tensors())))
    found = detect(checkpoint)
    assert found.family == "vae"
    assert {k: digest(v) for k, v in found.component("vae").weights()} == expected("sd15")["vae"]


def test_standalone_vae_in_old_diffusers_names(tmp_path):
    """A diffusers-layout VAE file as diffusers < 0.15 saved it: query/key/value/proj_attn."""
    original = open_checkpoint(str(FIXTURES / "sd15.safetensors"))
    vae = detect(original).component("vae")
    old = {"to_q": "query", "to_k": "key", "to_v": "value", "to_out.0": "proj_attn"}
    tensors = {}
    for key, value in vae.weights():
        for new, name in old.items():
            key = key.replace(f"attentions.0.{new}.", f"attentions.0.{name}.")
        tensors[key] = value
    path = write_safetensors(tmp_path / "diffusion_pytorch_model.safetensors", tensors)
    found = detect_vae(open_checkpoint(str(path)))
    assert {k: digest(v) for k, v in found.weights()} == expected("sd15")["vae"]


def test_vae_option_replaces_the_checkpoints_vae(tmp_path):
    other = {k: (v * 2).astype(v.dtype) for k, v in _vae_tensors().items()}
    vae_file = open_checkpoint(str(write_safetensors(tmp_path / "vae.safetensors", other)))
    found = detect(open_checkpoint(str(FIXTURES / "sd15.safetensors")), Options(vae=vae_file))
    vae = found.component("vae")
    assert vae.checkpoint is vae_file
    weights = dict(vae.weights())
    assert np.array_equal(weights["decoder.conv_in.weight"], other["decoder.conv_in.weight"].astype(np.float32))
    assert any("VAE from" in note for note in found.notes)


def test_vae_option_must_be_a_vae(tmp_path):
    with pytest.raises(UsageError, match="not a VAE file"):
        detect(open_checkpoint(str(FIXTURES / "sd15.safetensors")),
               Options(vae=open_checkpoint(str(FIXTURES / "sd2v.safetensors"))))


def test_clip_keys_without_text_model_level():
    """Files saved with transformers < 4.19 name SD 1.x's CLIP ``cond_stage_model.transformer.encoder...``."""
    plain = ManifestCheckpoint("sd15")
    old = ManifestCheckpoint("sd15")
    prefix = "cond_stage_model.transformer.text_model."
    old.tensors = {k.replace(prefix, "cond_stage_model.transformer."): v for k, v in old.tensors.items()}
    text, text_old = detect(plain).component("text_encoder"), detect(old).component("text_encoder")
    assert text_old.shapes() == text.shapes()
    assert text_old.takes["text_model.final_layer_norm.weight"].source == \
        "cond_stage_model.transformer.final_layer_norm.weight"
