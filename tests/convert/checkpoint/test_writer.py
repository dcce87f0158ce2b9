"""The writing side: each graph's weights streamed from the checkpoint into model.onnx + model.onnx_data
in fp32, fp16 or uint8 exactly as ``frame model convert`` writes them; the folder built aside and
renamed when complete; a stopped import resumed; bad input leaving nothing behind."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from frame.convert.checkpoint.plan import Options, detect
from frame.convert.checkpoint.reader import open_checkpoint
from frame.convert.importer.writer import ImportOptions, import_model
from frame.errors import UsageError
from tests.convert.checkpoint import fake_graphs
from tests.convert.checkpoint.helpers import FIXTURES, digest, expected

SD15 = str(FIXTURES / "sd15.safetensors")


def _builders(kind="sd15"):
    checkpoint = open_checkpoint(str(FIXTURES / f"{kind}.safetensors"))
    found = detect(checkpoint, Options(config_dir=str(FIXTURES / kind)))
    checkpoint.close()
    return fake_graphs.builders(found)


def _weights(path) -> dict[str, np.ndarray]:
    """The float32 value each original weight name has in a written model (Casts and
    DequantizeLinear evaluated by hand)."""
    model = onnx.load(str(path))
    values = {t.name: numpy_helper.to_array(t, base_dir=str(path.parent)) for t in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type == "Cast":
            out[node.output[0]] = values[node.input[0]].astype(np.float32)
        elif node.op_type == "DequantizeLinear":
            q, scale, zero = (values[n] for n in node.input)
            axis = next(a.i for a in node.attribute if a.name == "axis")
            shape = [1] * q.ndim
            shape[axis] = -1
            out[node.output[0]] = (q.astype(np.float32) - zero.reshape(shape)) * scale.reshape(shape)
    out.update({k: v for k, v in values.items() if v.dtype == np.float32 and not k.endswith("_scale")})
    return out


def _graph_digests(folder, kind="sd15") -> dict:
    merged = {}
    for graph in ("unet", "vae_decoder", "vae_encoder", "text_encoder", "text_encoder_2"):
        if (folder / graph / "model.onnx").exists():
            component = merged.setdefault({"vae_decoder": "vae", "vae_encoder": "vae"}.get(graph, graph), {})
            for key, value in _weights(folder / graph / "model.onnx").items():
                component[key] = digest(value)
    return merged


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
def test_fp32_import_writes_the_diffusers_weights(tmp_path, kind):
    dst = tmp_path / "model"
    result = import_model(str(FIXTURES / f"{kind}.safetensors"), dst,
                          ImportOptions(weights="fp32", config_dir=str(FIXTURES / kind)), _builders(kind))
    assert _graph_digests(dst, kind) == expected(kind)
    assert result.detected.family == {"sd15": "sd1", "sdxl": "sdxl"}[kind]
    names = sorted(p.name for p in dst.iterdir())
    want = ["model_index.json", "scheduler", "text_encoder", "tokenizer", "unet", "vae_decoder", "vae_encoder"]
    assert names == sorted(want + (["text_encoder_2", "tokenizer_2"] if kind == "sdxl" else []))
    assert not list(tmp_path.glob(".*"))  # nothing left aside
    unet = json.loads((dst / "unet" / "config.json").read_text())
    assert unet == json.loads((FIXTURES / kind / "unet" / "config.json").read_text())
    assert json.loads((dst / "scheduler" / "scheduler_config.json").read_text())["prediction_type"] == "epsilon"


def test_fp16_import_is_what_convert_writes(tmp_path):
    from frame.convert.files import Options as ConvertOptions
    from frame.convert.files import convert

    fp32, fp16 = tmp_path / "fp32", tmp_path / "fp16"
    import_model(SD15, fp32, ImportOptions(weights="fp32", config_dir=str(FIXTURES / "sd15")), _builders())
    import_model(SD15, fp16, ImportOptions(weights="fp16", config_dir=str(FIXTURES / "sd15")), _builders())
    converted = tmp_path / "converted"
    convert(fp32, converted, ConvertOptions("fp16"))
    for graph in ("unet", "vae_decoder", "text_encoder"):
        mine, theirs = onnx.load(str(fp16 / graph / "model.onnx")), onnx.load(str(converted / graph / "model.onnx"))
        assert mine.graph.node == theirs.graph.node
        assert [(t.name, t.data_type, list(t.dims)) for t in mine.graph.initializer] == \
               [(t.name, t.data_type, list(t.dims)) for t in theirs.graph.initializer]
        assert (fp16 / graph / "model.onnx_data").read_bytes() == (converted / graph / "model.onnx_data").read_bytes()


def test_uint8_import_quantizes_per_channel(tmp_path):
    dst = tmp_path / "q"
    result = import_model(SD15, dst, ImportOptions(weights="uint8", config_dir=str(FIXTURES / "sd15")), _builders())
    assert any(kind == "uint8" for kind in result.reports["unet"].converted.values())
    exact = {}
    checkpoint = open_checkpoint(SD15)
    for component in detect(checkpoint, Options(config_dir=str(FIXTURES / "sd15"))).components:
        exact.update(dict(component.weights()) if component.name == "unet" else {})
    written = _weights(dst / "unet" / "model.onnx")
    for key, value in exact.items():
        assert written[key].shape == value.shape
        assert np.abs(written[key] - value).max() <= np.abs(value).max() / 127 + 1e-6, key


def test_bad_input_leaves_nothing(tmp_path):
    path = tmp_path / "style.safetensors"
    path.write_bytes(b"\x00" * 7)
    with pytest.raises(UsageError, match="neither a .safetensors nor a .ckpt checkpoint"):
        import_model(str(path), tmp_path / "model", ImportOptions(), {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["style.safetensors"]


def test_integer_weight_found_mid_write_leaves_nothing(tmp_path):
    """A float weight stored as int64 (the sizes agree, so the header passes): refused when read."""
    from tests.convert.checkpoint.helpers import read_raw, write_safetensors

    tensors = read_raw(FIXTURES / "sd15.safetensors")
    key = "model.diffusion_model.out.2.weight"
    tensors[key] = np.zeros(tensors[key].shape, np.int64)
    path = write_safetensors(tmp_path / "lie.safetensors", tensors)
    with pytest.raises(UsageError, match=f"tensor '{key}' is I64, not a float weight"):
        import_model(str(path), tmp_path / "model", ImportOptions(config_dir=str(FIXTURES / "sd15")), _builders())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lie.safetensors"]


def test_existing_destination_is_never_touched(tmp_path):
    dst = tmp_path / "model"
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists"):
        import_model(SD15, dst, ImportOptions(), _builders())
    assert [p.name for p in dst.iterdir()] == ["keep.txt"]


def test_stopped_import_resumes_with_the_graphs_already_written(tmp_path):
    builders = _builders()
    calls = []

    def failing_vae(config):
        calls.append("vae_decoder")
        raise KeyboardInterrupt  # the owner's Ctrl-C, or a power cut, at the VAE

    dst = tmp_path / "model"
    with pytest.raises(KeyboardInterrupt):
        import_model(SD15, dst, ImportOptions(weights="fp32", config_dir=str(FIXTURES / "sd15")),
                     {**builders, "vae_decoder": failing_vae})
    assert not dst.exists()
    aside = tmp_path / ".model.import"
    assert (aside / "unet" / "model.onnx").is_file()
    unet_written = (aside / "unet" / "model.onnx_data").stat().st_mtime_ns
    result = import_model(SD15, dst, ImportOptions(weights="fp32", config_dir=str(FIXTURES / "sd15")), builders)
    assert result.resumed == ["unet"]
    assert (dst / "unet" / "model.onnx_data").stat().st_mtime_ns == unet_written
    assert _graph_digests(dst) == expected("sd15")
    assert not aside.exists()


def test_other_options_start_afresh(tmp_path):
    builders = _builders()

    def failing_vae(config):
        raise KeyboardInterrupt

    dst = tmp_path / "model"
    with pytest.raises(KeyboardInterrupt):
        import_model(SD15, dst, ImportOptions(weights="fp32", config_dir=str(FIXTURES / "sd15")),
                     {**builders, "vae_decoder": failing_vae})
    result = import_model(SD15, dst, ImportOptions(weights="fp16", config_dir=str(FIXTURES / "sd15")), builders)
    assert result.resumed == []
    assert "fp16" in set(result.reports["unet"].converted.values())


def test_a_vae_file_is_not_a_model(tmp_path):
    from tests.convert.checkpoint.helpers import read_raw, write_safetensors

    vae = {k[len("first_stage_model."):]: v for k, v in read_raw(FIXTURES / "sd15.safetensors").items()
           if k.startswith("first_stage_model.")}
    path = write_safetensors(tmp_path / "vae.safetensors", vae)
    with pytest.raises(UsageError, match="a VAE file, not a model: give it with --vae"):
        import_model(str(path), tmp_path / "model", ImportOptions(), {})
    assert not (tmp_path / "model").exists() and not (tmp_path / ".model.import").exists()
