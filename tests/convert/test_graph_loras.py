"""LoRAs reach a built UNet as they reach an exported one: the engine finds each kohya module by the
graph's node names (``down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q/Gemm``) and streams
the change into the weight, giving the graph with the change merged into its state dict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from frame.convert.graphs import attach_weights
from frame.engine import load_model
from frame.engine.lora import LoraUse, read_lora
from tests.convert.graph_cases import FIXTURES, build_case, load_case, rel_l2

RANK, ALPHA, SCALE = 2, 1.0, 0.7


def _lora_of(weights: dict[str, np.ndarray], rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict]:
    """A rank-2 LoRA on every Linear and conv of the UNet: its tensors, and the merged state dict."""
    tensors, merged = {}, dict(weights)
    for key, w in weights.items():
        if not key.endswith(".weight") or w.ndim not in (2, 4) or key.startswith(("conv_in", "conv_out")):
            continue
        module = "lora_unet_" + key[:-len(".weight")].replace(".", "_")
        down = rng.standard_normal((RANK, *w.shape[1:])).astype(np.float32) * 0.3
        up = rng.standard_normal((w.shape[0], RANK) + (1, 1) * (w.ndim == 4)).astype(np.float32) * 0.3
        tensors.update({f"{module}.lora_down.weight": down, f"{module}.lora_up.weight": up,
                        f"{module}.alpha": np.array(ALPHA, np.float32)})
        change = up.reshape(w.shape[0], RANK) @ down.reshape(RANK, -1)
        merged[key] = w + np.float32(SCALE * ALPHA / RANK) * change.reshape(w.shape)
    return tensors, merged


@pytest.mark.parametrize("case_name", ["unet_sd1", "unet_sdxl"])
def test_a_lora_streams_into_a_built_unet(case_name, tmp_path: Path):
    safetensors = pytest.importorskip("safetensors.numpy")
    case = load_case(FIXTURES / case_name)
    tensors, merged = _lora_of(case.weights, np.random.default_rng(3))
    safetensors.save_file(tensors, str(tmp_path / "lora.safetensors"))
    lora = read_lora(tmp_path / "lora.safetensors")
    plain, want = tmp_path / "plain.onnx", tmp_path / "merged.onnx"
    onnx.save(case.model(), plain, save_as_external_data=True, location="plain.onnx_data", size_threshold=0)
    onnx.save(attach_weights(build_case(case.kind, case.config, case.options), merged), want,
              save_as_external_data=True, location="merged.onnx_data", size_threshold=0)
    with load_model(want) as model:
        expected = model.run(case.feeds())["out_sample"]
    with load_model(plain, loras=[LoraUse("all", lora.modules("unet"), SCALE)]) as model:
        assert not model.lora_report.unmatched, model.lora_report.lines()[:5]
        assert model.lora_report.applied == {"all": len(tensors) // 3}
        got = model.run(case.feeds())["out_sample"]
    assert rel_l2(got, expected) < 1e-5
    assert rel_l2(case.expected["out_sample"], expected) > 1e-2  # the LoRA changes the result
