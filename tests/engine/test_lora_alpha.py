"""A LoRA's alpha from diffusers' ``lora_adapter_metadata`` (issue 40 item 9): diffusers 0.42's
``save_lora_weights`` keeps it there as flat keys (``"unet.lora_alpha": 8, "unet.r": 4``), older
writers as one object per component; frame read only the nested form, so a rank-4/alpha-8 LoRA
painted at half strength. The render against diffusers' own file is in tests/diffusion/test_lora_pipeline.py
(case ``reed_1``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from frame.engine.lora import read_lora
from frame.errors import UsageError
from tests.lora_files import lora_tensors, write_safetensors

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pipelines"
PEFT = ("unet.down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q",)


def _peft_lora(path: Path, metadata: dict | None) -> Path:
    tensors = {}
    for name, array in lora_tensors(("unet.x",), rank=4).items():
        tensors[name.replace("unet.x", PEFT[0]).replace("lora_down", "lora_A").replace("lora_up", "lora_B")] = array
    return write_safetensors(path, tensors, None if metadata is None else
                             {"lora_adapter_metadata": json.dumps(metadata), "format": "pt"})


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
def test_diffusers_save_lora_weights_alpha_is_read(kind):
    """``reed`` was written by diffusers' ``save_lora_weights`` (tools/build_lora_fixtures.py): rank 4,
    alpha 8 in the metadata only, for the UNet and the text encoder(s)."""
    lora = read_lora(FIXTURES / kind / "loras" / "reed.safetensors")
    assert set(lora.components) >= {"unet", "text_encoder"}
    for modules in lora.components.values():
        assert {(m.rank, m.alpha, m.factor) for m in modules.values()} == {(4, 8.0, 2.0)}


def test_flat_and_nested_metadata_give_the_same_alpha(tmp_path):
    flat = read_lora(_peft_lora(tmp_path / "flat.safetensors", {"unet.lora_alpha": 8.0, "unet.r": 4}))
    nested = read_lora(_peft_lora(tmp_path / "nested.safetensors", {"unet": {"lora_alpha": 8, "r": 4}}))
    none = read_lora(_peft_lora(tmp_path / "none.safetensors", None))
    factors = [next(iter(lora.modules("unet").values())).factor for lora in (flat, nested, none)]
    assert factors == [2.0, 2.0, 1.0]


def test_rslora_scales_by_the_square_root_of_the_rank(tmp_path):
    lora = read_lora(_peft_lora(tmp_path / "rs.safetensors", {"unet.lora_alpha": 8, "unet.r": 4,
                                                               "unet.use_rslora": True}))
    assert math.isclose(next(iter(lora.modules("unet").values())).factor, 8 / 2)


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), "8", True])
def test_a_metadata_alpha_that_is_no_finite_number_is_refused_by_name(tmp_path, alpha):
    path = _peft_lora(tmp_path / "bad.safetensors", {"unet.lora_alpha": alpha, "unet.r": 4})
    with pytest.raises(UsageError, match=r"bad\.safetensors: unet\.lora_alpha .* not a finite number"):
        read_lora(path)


def test_metadata_of_another_shape_is_ignored(tmp_path):
    for i, metadata in enumerate(([1, 2], {"unet": [8]}, {"vae.lora_alpha": 3}, "text")):
        lora = read_lora(_peft_lora(tmp_path / f"m{i}.safetensors", metadata))
        assert next(iter(lora.modules("unet").values())).factor == 1.0
