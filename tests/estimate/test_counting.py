"""Counting from the graph: multiply-adds and bytes by hand on small graphs, and against independent
references on the real export fixtures (torch's FLOP counter, onnxruntime's profile, the bytes the
engine really fetches)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from frame.estimate.counting import count_graph
from tests.engine.builders import model, save, value

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ENGINE = FIXTURES / "engine"
TORCH = json.loads((FIXTURES / "estimate" / "torch_macs.json").read_text())


def _w(name: str, shape, dtype=np.float32, seed: int = 0) -> onnx.TensorProto:
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(dtype), name)


def test_conv_macs_follow_the_definition(tmp_path):
    """3x3 conv 6 -> 8 channels in 2 groups, stride 2, pads 1, on 1x6x10x12: output 1x8x5x6, each
    output element sums 3 (= 6/2 channels) x 3 x 3 products -> 240 x 27 = 6480."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], group=2, strides=[2, 2], pads=[1, 1, 1, 1])]
    path = save(model(nodes, [value("x", [1, 6, 10, 12])], [value("y", None)], [_w("w", (8, 3, 3, 3))]),
                tmp_path / "conv.onnx")
    count = count_graph(path, {"x": (1, 6, 10, 12)})
    assert count.macs == 8 * 5 * 6 * 3 * 3 * 3 == 6480
    assert count.macs_of("conv") == 6480
    assert count.weight_bytes == 8 * 3 * 3 * 3 * 4


def test_conv_transpose_and_gemm_and_batched_matmul(tmp_path):
    """ConvTranspose: every input element meets M/group x kh x kw taps; Gemm with transB: M x N x K;
    a batched MatMul of two activations: batch x M x N x K, of the attention kind."""
    nodes = [helper.make_node("ConvTranspose", ["x", "wt"], ["u"], strides=[2, 2]),
             helper.make_node("Gemm", ["a", "wg"], ["g"], transB=1),
             helper.make_node("MatMul", ["q", "k"], ["s"])]
    inputs = [value("x", [1, 4, 3, 5]), value("a", [7, 16]), value("q", [2, 3, 9, 8]), value("k", [2, 3, 8, 11])]
    path = save(model(nodes, inputs, [value("u", None), value("g", None), value("s", None)],
                      [_w("wt", (4, 6, 2, 2)), _w("wg", (10, 16))]), tmp_path / "mix.onnx")
    count = count_graph(path, {"x": (1, 4, 3, 5), "a": (7, 16), "q": (2, 3, 9, 8), "k": (2, 3, 8, 11)})
    assert count.macs_of("conv") == (1 * 4 * 3 * 5) * (6 * 2 * 2)
    assert count.macs_of("matmul") == 7 * 10 * 16
    assert count.macs_of("attention") == 2 * 3 * 9 * 11 * 8


def test_memory_bound_ops_count_bytes_and_views_count_none(tmp_path):
    """Add reads two 1x4x8 float tensors and writes one: 3 x 128 bytes; Reshape and Transpose are views."""
    nodes = [helper.make_node("Add", ["x", "y"], ["s"]),
             helper.make_node("Reshape", ["s", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0])]
    shape = numpy_helper.from_array(np.array([4, 8], np.int64), "shape")
    path = save(model(nodes, [value("x", [1, 4, 8]), value("y", [1, 4, 8])], [value("t", None)], [shape]),
                tmp_path / "add.onnx")
    count = count_graph(path, {"x": (1, 4, 8), "y": (1, 4, 8)})
    assert count.macs == 0
    assert count.element_bytes == 3 * 32 * 4


def test_token_embedding_reads_only_the_prompt_rows(tmp_path):
    """Gather from a 1000 x 16 table for 77 ids: the engine reads 77 rows (77 x 64 bytes), not 64 kB."""
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("MatMul", ["e", "w"], ["y"])]
    path = save(model(nodes, [value("ids", [1, 77], TensorProto.INT64)], [value("y", None)],
                      [_w("table", (1000, 16)), _w("w", (16, 4))]), tmp_path / "embed.onnx")
    count = count_graph(path, {"ids": (1, 77)})
    assert count.weight_bytes == 77 * 16 * 4 + 16 * 4 * 4
    assert count.stored_weight_bytes == 1000 * 16 * 4 + 16 * 4 * 4


@pytest.mark.parametrize("name", sorted(TORCH["fixtures"]))
def test_macs_equal_torch_flop_counter_on_the_fixture_models(name):
    """tools/build_estimate_fixtures.py ran the same models under torch's FlopCounterMode; the full-size
    SD 1.5 UNet/VAE/CLIP agree exactly too (docs/estimate.md)."""
    feeds = dict(np.load(ENGINE / name / "inputs.npz"))
    count = count_graph(str(ENGINE / name / "model.onnx"), {k: v.shape for k, v in feeds.items()})
    assert count.macs == TORCH["fixtures"][name]
    assert count.unknown_shapes == 0


class CountingProvider:
    """A no-cache disk provider that adds up every byte it reads (rows included)."""

    def __init__(self) -> None:
        from frame.engine.providers import NoCache

        self.inner = NoCache()
        self.read = 0

    def prepare(self, refs) -> None:
        self.inner.prepare(refs)

    def get(self, ref):
        self.read += ref.nbytes
        return self.inner.get(ref)

    def get_rows(self, ref, rows):
        out = self.inner.get_rows(ref, rows)
        self.read += out.nbytes
        return out

    def release(self, ref) -> None:
        self.inner.release(ref)


@pytest.mark.parametrize("name", ["clip_text_ts14_dynamic", "unet_sd15_ts14_fp16w_dynamic",
                                  "unet_sdxl_dynamo18_dynamic_external", "vae_decoder_ts17_static_fp16w"])
def test_weight_bytes_equal_what_the_engine_fetches(name):
    from frame.engine import load_model

    feeds = dict(np.load(ENGINE / name / "inputs.npz"))
    source = str(ENGINE / name / "model.onnx")
    provider = CountingProvider()
    with load_model(source, weights=provider) as loaded:
        loaded.run(feeds)
    count = count_graph(source, {k: v.shape for k, v in feeds.items()})
    repeated = 0
    if name.startswith("clip"):  # the count reads a row per token; the run reads each distinct id once
        ids = feeds["input_ids"]
        repeated = (ids.size - np.unique(ids).size) * 16 * 4  # hidden size 16, float32 rows
    assert provider.read == count.weight_bytes - repeated


def _profile(source: str, feeds: dict) -> list[dict]:
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.profile_file_prefix = "ort_profile"  # in the test's working folder
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    session.run(None, feeds)
    path = Path(session.end_profiling())
    try:
        events = json.loads(path.read_text())
    finally:
        path.unlink()
    return [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]


@pytest.mark.parametrize("name", ["unet_sd15_dynamo18_dynamic", "vae_decoder_ts14_dynamic", "clip_text_ts14_dynamic"])
def test_shapes_and_parameter_bytes_match_the_onnxruntime_profile(name, tmp_path, monkeypatch):
    """onnxruntime's profile (graph optimisations off) records each node's output shapes and the bytes
    of its constant inputs (except where it pre-packs them): the count's shapes and bytes must agree."""
    from frame.engine.counted_shapes import infer_shapes
    from frame.engine.model import read_structure
    from frame.engine.static_shapes import fill_small_values

    monkeypatch.chdir(tmp_path)
    source = str(ENGINE / name / "model.onnx")
    feeds = dict(np.load(ENGINE / name / "inputs.npz"))
    structure = read_structure(source)
    fill_small_values(structure.proto, structure.weights)
    table = infer_shapes(structure.proto, structure.weights, structure.nodes, {k: v.shape for k, v in feeds.items()})
    nodes = {n.name: n for n in structure.nodes}
    constants = {n.output[0]: numpy_helper.to_array(n.attribute[0].t).nbytes for n in structure.proto.graph.node
                 if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"}
    constants.update({name: ref.nbytes for name, ref in structure.weights.items()})  # onnxruntime: both
    checked = 0
    for event in _profile(source, feeds):
        node = nodes.get(event["name"][:-len("_kernel_time")])
        if node is None:
            continue
        shapes = [tuple(next(iter(s.values()))) for s in event["args"]["output_type_shape"]]
        assert [table.shapes[o] for o in node.outputs if o] == shapes, node.name
        reported = int(event["args"]["parameter_size"])
        if node.op_type not in ("MatMul", "Gemm", "Conv"):  # these may pre-pack weights, then not count them
            assert sum(constants[i] for i in node.inputs if i in constants) == reported, node.name
            checked += 1
    assert checked > 10
