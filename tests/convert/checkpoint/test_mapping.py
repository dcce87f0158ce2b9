"""frame's import of the tiny single-file checkpoints yields exactly diffusers' weights.

The fixtures (tools/build_checkpoint_fixtures.py) are SD 1.5 (float16, training buffers, CLIP
position_ids), SD 2.x v-prediction (bfloat16, OpenCLIP ViT-H layout with its 24th layer and
projection) and SDXL (float16, CLIP-L + OpenCLIP bigG) files in the original key layout, each checked
at build time to load in diffusers' ``from_single_file`` to the very weights recorded in
``expected.json``. Here frame's reader, detection and key mapping must give the same keys, shapes and
bytes, without torch.
"""

from __future__ import annotations

import pytest

from frame.convert.checkpoint.plan import Options, detect
from frame.convert.checkpoint.reader import open_checkpoint
from tests.convert.checkpoint.helpers import FIXTURES, KINDS, digest, expected

FAMILY = {"sd15": "sd1", "sd2v": "sd2", "sdxl": "sdxl"}
COMPONENTS = {"sd15": ["unet", "vae", "text_encoder"], "sd2v": ["unet", "vae", "text_encoder"],
              "sdxl": ["unet", "vae", "text_encoder", "text_encoder_2"]}


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


def _detected(kind: str, **options):
    checkpoint = open_checkpoint(str(FIXTURES / f"{kind}.safetensors"))
    return checkpoint, detect(checkpoint, Options(name=f"{kind}.safetensors", **options))


def test_weights_are_diffusers_weights(kind):
    checkpoint, found = _detected(kind, config_dir=str(FIXTURES / kind))
    try:
        want = expected(kind)
        assert sorted(c.name for c in found.components) == sorted(COMPONENTS[kind])
        for component in found.components:
            got = {key: digest(array) for key, array in component.weights()}
            assert got == want[component.name], component.name
            assert component.shapes() == {k: tuple(v[0]) for k, v in want[component.name].items()}
    finally:
        checkpoint.close()


def test_detection_says_what_it_found(kind):
    checkpoint, found = _detected(kind)
    checkpoint.close()
    assert found.family == FAMILY[kind]
    if kind == "sd2v":
        assert (found.prediction, found.resolution) == ("v_prediction", 768)
        assert any("v-prediction at 768 px" in n for n in found.notes)
        text = found.component("text_encoder")
        assert text.config["num_hidden_layers"] == 23  # of the file's 24: SD 2.x uses the penultimate
        assert any(k.endswith("resblocks.23.ln_1.weight") for k in text.skipped)
        assert any(k.endswith("text_projection") for k in text.skipped)
    else:
        assert (found.prediction, found.resolution) == ("epsilon", 1024 if kind == "sdxl" else 512)
    if kind == "sd15":
        skipped = found.component("text_encoder").skipped
        assert skipped == ("cond_stage_model.transformer.text_model.embeddings.position_ids",)
    assert "Turbo" not in found.label


def test_derived_configs_agree_with_the_tiny_models_where_shapes_tell(kind):
    """Without --config: every value the shapes decide is the tiny model's own."""
    import json

    checkpoint, found = _detected(kind)
    checkpoint.close()
    decided = {"unet": ("block_out_channels", "layers_per_block", "cross_attention_dim", "in_channels",
                        "out_channels", "down_block_types", "up_block_types", "use_linear_projection",
                        "transformer_layers_per_block", "addition_embed_type", "addition_time_embed_dim",
                        "projection_class_embeddings_input_dim"),
               "vae": ("block_out_channels", "layers_per_block", "in_channels", "out_channels", "latent_channels"),
               "text": ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size",
                        "max_position_embeddings", "hidden_act")}
    for component in found.components:
        tiny = json.loads((FIXTURES / kind / component.name / "config.json").read_text())
        for key in decided["text" if component.name.startswith("text") else component.name]:
            if key not in tiny:
                continue
            want, have = tiny[key], component.config.get(key)
            if key == "transformer_layers_per_block" and isinstance(want, list) and len(set(want)) == 1:
                want = want[0]
            assert have == want, (component.name, key)


def test_config_that_contradicts_the_shapes_is_refused(tmp_path):
    import json
    import shutil

    from frame.errors import UsageError

    folder = tmp_path / "cfg"
    shutil.copytree(FIXTURES / "sd15", folder)
    config = json.loads((folder / "unet" / "config.json").read_text())
    config["block_out_channels"] = [8, 32]
    (folder / "unet" / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match=r"unet/config.json: block_out_channels is \[8, 32\], but the "
                                         r"checkpoint's unet weights say \[8, 16\]"):
        _detected("sd15", config_dir=str(folder))
