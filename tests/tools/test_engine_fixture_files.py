"""The committed engine fixtures are complete and self-consistent (no torch needed).

These guard the contract the engine tests rely on: every fixture listed in the README exists, its
feeds match the graph's declared inputs, its expected outputs are onnxruntime's for those feeds, and
each storage variant (external data, fp16 weights, fully fp16) is really stored that way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engine"
NAMES = sorted(p.name for p in ROOT.iterdir() if p.is_dir())
ARCHS = {"unet_sd15", "unet_sdxl", "vae_decoder", "clip_text", "clip_text_with_projection"}


def _meta(name: str) -> dict:
    return json.loads((ROOT / name / "meta.json").read_text())


def _graph(name: str) -> onnx.ModelProto:
    return onnx.load(str(ROOT / name / "model.onnx"), load_external_data=False)


def _np_dtype(elem_type: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def test_readme_lists_exactly_the_fixture_folders():
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", (ROOT / "README.md").read_text(), re.M))
    assert listed == set(NAMES)


def test_every_architecture_exporter_and_storage_is_covered():
    metas = [_meta(n) for n in NAMES]
    assert {m["architecture"] for m in metas} == ARCHS
    assert {(m["exporter"], m["opset"]) for m in metas} >= {("torchscript", 14), ("torchscript", 17),
                                                          ("dynamo", 18)}
    assert {m["fp16"] for m in metas} == {"none", "weights", "full"}
    assert any(m["weights"].startswith("external") for m in metas)
    assert any(m["dynamic"] for m in metas) and any(not m["dynamic"] for m in metas)


@pytest.mark.parametrize("name", NAMES)
def test_model_checks_and_files_present(name):
    folder = ROOT / name
    meta = _meta(name)
    for f in ("model.onnx", "inputs.npz", "expected.npz", "meta.json"):
        assert (folder / f).is_file(), f
    assert (folder / "model.onnx_data").is_file() == meta["weights"].startswith("external")
    onnx.checker.check_model(str(folder / "model.onnx"))
    model = _graph(name)
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == meta["opset"]


@pytest.mark.parametrize("name", NAMES)
def test_feeds_and_expected_match_graph_signature(name):
    model = _graph(name)
    meta = _meta(name)
    feeds = np.load(ROOT / name / "inputs.npz")
    expected = np.load(ROOT / name / "expected.npz")
    assert list(feeds.files) == [i.name for i in model.graph.input]
    assert list(expected.files) == [o.name for o in model.graph.output]
    for value in model.graph.input:
        arr = feeds[value.name]
        t = value.type.tensor_type
        assert arr.dtype == _np_dtype(t.elem_type), value.name
        assert arr.ndim == len(t.shape.dim), value.name
        for size, dim in zip(arr.shape, t.shape.dim):
            assert dim.dim_param or dim.dim_value == size, (value.name, arr.shape)
    for value in model.graph.output:
        arr = expected[value.name]
        assert arr.dtype == _np_dtype(value.type.tensor_type.elem_type)
        assert np.isfinite(arr).all() and arr.std() > 0, value.name
    assert set(meta["inputs"]) == set(feeds.files)


@pytest.mark.parametrize("name", NAMES)
def test_storage_variant_is_what_meta_says(name):
    model = _graph(name)
    meta = _meta(name)
    external = [t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    if not meta["weights"].startswith("external"):
        assert not external
    else:
        assert external
        locations = {e.value for t in external for e in t.external_data if e.key == "location"}
        assert locations == {"model.onnx_data"}
    floats = [t for t in model.graph.initializer if t.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)]
    halves = [t for t in floats if t.data_type == TensorProto.FLOAT16]
    if meta["fp16"] == "weights":
        big_float32 = [t for t in floats if t.data_type == TensorProto.FLOAT and np.prod(t.dims) > 1]
        assert halves and not big_float32
        cast_inputs = {n.input[0]: n for n in model.graph.node if n.op_type == "Cast"}
        for t in halves:
            node = cast_inputs[t.name]
            assert helper.get_attribute_value(node.attribute[0]) == TensorProto.FLOAT
    elif meta["fp16"] == "full":
        assert halves
        assert model.graph.input[0].type.tensor_type.elem_type in (TensorProto.FLOAT16, TensorProto.INT32)
        assert model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    else:
        assert not halves


@pytest.mark.parametrize("name", NAMES)
def test_expected_is_onnxruntime_output(name):
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(ROOT / name / "model.onnx"), opts, providers=["CPUExecutionProvider"])
    feeds = dict(np.load(ROOT / name / "inputs.npz"))
    expected = np.load(ROOT / name / "expected.npz")
    for out, got in zip(sess.get_outputs(), sess.run(None, feeds)):
        ref = expected[out.name].astype(np.float64)
        err = np.linalg.norm(got.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-12)
        assert err <= 1e-5, (out.name, err)


@pytest.mark.parametrize("name", NAMES)
def test_onnxruntime_agreed_with_torch_when_built(name):
    meta = _meta(name)
    limit = 2e-3 if meta["fp16"] != "none" else 1e-5
    errors = meta["ort_vs_torch_fp32"]
    assert set(errors) == set(meta["outputs"])
    assert all(e["rel_l2"] <= limit for e in errors.values()), errors


def test_total_size_under_budget():
    total = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert total < 8 * 1024 * 1024, total
