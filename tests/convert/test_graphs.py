"""frame's own SD graphs (frame.convert.graphs) against torch, through onnxruntime and frame's engine.

Each committed case (tools/build_graph_fixtures.py: a tiny diffusers/transformers module with random
weights) is rebuilt from its config here, given the module's state dict under its own keys, and run;
torch's outputs must be matched to 1e-4 relative L2 error. The engine also runs with forced attention
slicing, and its fusion passes must take every attention block and every upsampling conv, as they do
for optimum's exports (else streaming memory would be higher than with an optimum export).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from frame.convert.graphs import weight_specs
from frame.engine import load_model
from tests.convert.graph_cases import FIXTURES as FIXTURES_DIR
from tests.convert.graph_cases import build_case, case_folders, load_case, rel_l2

CASES = case_folders()
TOLERANCE = 1e-4


class FixedNoise:
    """The engine's ``rng`` for a sampling VAE encoder: hands its RandomNormalLike the committed noise."""

    def __init__(self, noise: np.ndarray) -> None:
        self.noise = noise

    def standard_normal(self, size, dtype=np.float32) -> np.ndarray:
        assert tuple(size) == self.noise.shape
        return self.noise.astype(dtype)


def _save(model: onnx.ModelProto, folder: Path) -> Path:
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="model.onnx_data", size_threshold=0)
    return path


def _check(case, got: dict[str, np.ndarray], what: str) -> None:
    assert set(got) == set(case.expected), what
    for name, want in case.expected.items():
        assert got[name].shape == want.shape, f"{case.name} {what} {name}"
        error = rel_l2(got[name], want)
        assert error <= TOLERANCE, f"{case.name} {what} {name}: relative L2 error {error:.2e}"


@pytest.mark.skipif(not CASES, reason="no graph fixtures")
@pytest.mark.parametrize("folder", CASES, ids=[p.name for p in CASES])
def test_onnxruntime_matches_torch(folder: Path):
    ort = pytest.importorskip("onnxruntime")
    case = load_case(folder)
    if "noise" in case.inputs:
        pytest.skip("onnxruntime draws its own noise (the engine test hands the graph torch's)")
    model = case.model()
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    _check(case, dict(zip(names, session.run(names, case.feeds()))), "onnxruntime")


@pytest.mark.skipif(not CASES, reason="no graph fixtures")
@pytest.mark.parametrize("folder", CASES, ids=[p.name for p in CASES])
@pytest.mark.parametrize("weights,slices", [("prefetch", None), ("nocache", 3)])
def test_engine_matches_torch(folder: Path, weights: str, slices: int | None, tmp_path: Path):
    case = load_case(folder)
    graph = case.model()
    rng = FixedNoise(case.inputs["noise"]) if "noise" in case.inputs else None
    with load_model(_save(graph, tmp_path), weights=weights, attention_slices=slices) as model:
        got = model.run(case.feeds(), rng=rng) if rng is not None else model.run(case.feeds())
        rewrites = dict(model.rewrites)
        table = model.token_table("input_ids") if case.kind == "text_encoder" else None
    _check(case, got, f"engine ({weights}, slices {slices})")
    ops = [n.op_type for n in graph.graph.node]
    assert rewrites["attention"] == ops.count("Softmax"), "every attention block runs sliced"
    assert rewrites["upsample_conv"] == ops.count("Resize"), "every upsampling runs as UpsampleConv"
    feed_forwards = [n for n in graph.graph.node if n.output[0].endswith(".ff.net.0/geglu")]
    assert rewrites["geglu"] == len(feed_forwards), "every GEGLU feed-forward runs in channel blocks"
    if "InstanceNormalization" in ops:
        assert rewrites["norm_conv"] > 0
    if case.kind == "text_encoder":  # textual inversion puts its vectors into this Gather's rows
        assert table == ("token_embeds", case.config["hidden_size"])


@pytest.mark.skipif(not CASES, reason="no graph fixtures")
@pytest.mark.parametrize("folder", CASES, ids=[p.name for p in CASES])
def test_structure_declares_the_state_dict_keys_without_data(folder: Path):
    """The importer's contract: one data-less float32 initializer per state-dict key, torch's shape."""
    case = load_case(folder)
    graph = build_case(case.kind, case.config, case.options)
    specs = weight_specs(graph)
    assert len(specs) == len({name for name, _ in specs})
    assert all(case.weights[name].shape == shape for name, shape in specs)
    for init in graph.graph.initializer:
        assert init.data_type == onnx.TensorProto.FLOAT
        assert not (init.raw_data or init.float_data or init.external_data), init.name


@pytest.mark.parametrize("weights", ["fp16", "uint8"])
def test_converted_unet_keeps_its_fusions_and_its_plan(weights: str, tmp_path: Path, monkeypatch):
    """``frame model convert`` (what the importer's --weights runs) on a built SDXL UNet: the engine
    still decodes every Gemm weight in blocks inside its op, still blocks every GEGLU (now on decoded
    Gemm weights), the kept plan (model-plans) runs bit-identically, and the result stays close to torch."""
    from frame.convert.files import Options, convert_proto
    from frame.engine import model as engine_model

    case = load_case(FIXTURES_DIR / "unet_sdxl")
    converted = convert_proto(case.model(), Options(weights))
    path, plans = _save(converted, tmp_path), tmp_path / "model-plans"
    with load_model(path, plans=plans) as model:
        first = model.run(case.feeds())["out_sample"]
        rewrites = dict(model.rewrites)
    gemms = sum(1 for n in case.model().graph.node if n.op_type == "Gemm")
    assert rewrites["geglu"] == 8 and rewrites["weight_decoding"] > gemms
    monkeypatch.setattr(engine_model, "plan_structure", lambda *a, **k: pytest.fail("planned again"))
    with load_model(path, plans=plans) as model:
        kept = model.run(case.feeds())["out_sample"]
    assert kept.tobytes() == first.tobytes()
    assert rel_l2(first, case.expected["out_sample"]) < (2e-3 if weights == "fp16" else 5e-2)
