"""Detection, key mapping and derived configs at full size: SD 1.5, SD 2.1 (768, v) and SDXL base.

The manifests (tools/checkpoint_manifests.py) hold every key and shape of the real single-file layout,
made from the configs the Hugging Face repositories publish, and the diffusers state-dict shapes the
keys must map to. No tensor data: what is checked is that every weight lands on diffusers' name with
diffusers' shape, and that the configs frame derives from shapes and known defaults are the published
ones (heads, groups and activations included, which shapes cannot tell).
"""

from __future__ import annotations

import pytest

from frame.convert.checkpoint.plan import Options, detect
from tests.convert.checkpoint.helpers import ManifestCheckpoint

FAMILY = {"sd15": "sd1", "sd21": "sd2", "sdxl": "sdxl"}
TEXT_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
               "max_position_embeddings", "hidden_act", "bos_token_id", "eos_token_id", "pad_token_id")


def _norm(value):
    return list(value) if isinstance(value, (list, tuple)) else value


@pytest.mark.parametrize("kind", ["sd15", "sd21", "sdxl"])
def test_full_size_maps_onto_diffusers_names_and_configs(kind):
    checkpoint = ManifestCheckpoint(kind)
    found = detect(checkpoint, Options(name=f"{kind}.safetensors"))
    assert found.family == FAMILY[kind]
    assert {c.name for c in found.components} == set(checkpoint.diffusers_shapes)
    for component in found.components:
        assert component.shapes() == checkpoint.diffusers_shapes[component.name], component.name
        real = checkpoint.real_configs[component.name]
        if component.name.startswith("text_encoder"):
            fields = TEXT_FIELDS + (("projection_dim",) if component.name == "text_encoder_2" else ())
            assert {f: component.config[f] for f in fields} == {f: real[f] for f in fields}
            continue
        for key, value in real.items():
            assert _norm(component.config.get(key, _default(key))) == _norm(value), (component.name, key)


def _default(key):
    """UNet2DConditionModel's defaults for keys frame leaves out."""
    return {"use_linear_projection": False, "upcast_attention": False}.get(key)


def test_sd21_native_size_and_prediction():
    found = detect(ManifestCheckpoint("sd21"))
    assert (found.prediction, found.resolution) == ("v_prediction", 768)
    assert found.component("unet").config["sample_size"] == 96
    assert found.label == ("SD 2.x (OpenCLIP ViT-H text encoder, context 1024, linear projections), "
                           "v-prediction, 768 px")


@pytest.mark.parametrize("kind", ["sd15", "sd21", "sdxl"])
def test_full_size_graphs_read_exactly_the_mapped_weights(kind):
    """frame's graphs built from the derived full-size configs declare every mapped weight, each with
    the checkpoint's shape, and nothing else (what ``write_graph`` checks before writing a byte)."""
    from frame.convert.importer.graph_weights import weight_refs
    from frame.convert.importer.graphs import frame_builders
    from frame.convert.importer.layout import GRAPHS

    checkpoint = ManifestCheckpoint(kind)
    found = detect(checkpoint)
    builders = frame_builders(found.family)
    for component in found.components:
        declared = set()
        for graph in GRAPHS[component.name]:
            declared |= set(weight_refs(builders[graph](component.config), component))
        assert declared == set(component.takes), component.name
