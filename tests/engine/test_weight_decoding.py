"""8-bit and fp16 weights decoded inside their ops, block by block (frame/engine/passes/weight_decoding.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from frame.engine import load_model
from frame.engine.passes import weight_decoding
from tests.engine.builders import model, value
from tests.engine.builders import save as _save

RNG = np.random.default_rng(7)


def save(proto: onnx.ModelProto, path, external: bool = False) -> str:
    """Save a copy (external-data saving rewrites the proto it is given)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return _save(copy, path, external)


def _quantized(name: str, w: np.ndarray, axis: int | None, dtype=np.int8):
    """Initializers + DequantizeLinear for ``w`` (per channel along ``axis``, per tensor when None)."""
    reduce = tuple(i for i in range(w.ndim) if i != axis) if axis is not None else None
    low, high = w.min(axis=reduce), w.max(axis=reduce)
    if dtype == np.int8:
        scale = (np.maximum(-low, high) / 127).astype(np.float32)
        zero = np.zeros_like(scale, dtype=np.int8)
    else:
        low, high = np.minimum(low, 0), np.maximum(high, 0)
        scale = ((high - low) / 255).astype(np.float32)
        zero = np.rint(-low / scale).astype(np.uint8)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    lo, hi = (-127, 127) if dtype == np.int8 else (0, 255)
    q = np.clip(np.rint(w / scale.reshape(shape)) + zero.reshape(shape).astype(np.float32), lo, hi).astype(dtype)
    inits = [numpy_helper.from_array(q, f"{name}_q"), numpy_helper.from_array(np.asarray(scale), f"{name}_s"),
             numpy_helper.from_array(np.asarray(zero), f"{name}_z")]
    attrs = {"axis": axis} if axis is not None else {}
    node = helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [name], **attrs)
    return inits, node


def _weight(*shape) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


def _every_op_model():
    """MatMul, Gemm (both transB, bias shapes), Conv (bias, groups), ConvTranspose and Resize→Conv,
    every weight through DequantizeLinear (int8 and uint8, per channel and per tensor)."""
    inits, nodes = [], []

    def dq(name, w, axis, dtype=np.int8):
        more, node = _quantized(name, w, axis, dtype)
        inits.extend(more)
        nodes.append(node)

    dq("w_mm", _weight(16, 24), 1, np.uint8)
    dq("w_g1", _weight(20, 24), 0)               # Gemm transB=1, per output row
    dq("w_g2", _weight(20, 12), None, np.uint8)  # Gemm transB=0, per tensor
    dq("w_c1", _weight(12, 3, 3, 3), 0)
    dq("w_c2", _weight(12, 6, 3, 3), 0, np.uint8)  # group 2
    dq("w_ct", _weight(12, 5, 2, 2), 1)
    dq("w_up", _weight(6, 5, 3, 3), 0)
    inits += [numpy_helper.from_array(_weight(20), "b_g1"), numpy_helper.from_array(_weight(1, 12), "b_g2"),
              numpy_helper.from_array(_weight(12), "b_c1"), numpy_helper.from_array(_weight(5), "b_ct"),
              numpy_helper.from_array(_weight(6), "b_up"),
              numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    nodes += [
        helper.make_node("MatMul", ["x", "w_mm"], ["mm"]),
        helper.make_node("Gemm", ["mm2d", "w_g1", "b_g1"], ["g1"], transB=1),
        helper.make_node("Gemm", ["g1", "w_g2", "b_g2"], ["g2"], alpha=0.5, beta=2.0),
        helper.make_node("Conv", ["img", "w_c1", "b_c1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "w_c2"], ["c2"], pads=[1, 1, 1, 1], group=2),
        helper.make_node("ConvTranspose", ["c2", "w_ct", "b_ct"], ["ct"], strides=[2, 2]),
        helper.make_node("Resize", ["ct", "", "scales"], ["r"], mode="nearest"),
        helper.make_node("Conv", ["r", "w_up", "b_up"], ["up"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["mm", "shape2d"], ["mm2d"]),
    ]
    inits.append(numpy_helper.from_array(np.array([-1, 24], np.int64), "shape2d"))
    nodes.insert(len(nodes) - 8, nodes.pop())  # Reshape before the first Gemm
    graph_inputs = [value("x", [2, 3, 16]), value("img", [1, 3, 6, 6])]
    outputs = [value("g2", [6, 12]), value("up", [1, 6, 24, 24])]
    return model(nodes, graph_inputs, outputs, inits, opset=19)


def _feeds():
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal((2, 3, 16)).astype(np.float32),
            "img": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}


@pytest.mark.parametrize("block_bytes", [8 << 20, 64])
def test_decoded_ops_match_the_onnx_reference_in_one_block_or_many(tmp_path, monkeypatch, block_bytes):
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 1)
    proto = _every_op_model()
    path = save(proto, tmp_path / "m.onnx", external=True)
    expected = ReferenceEvaluator(proto).run(None, _feeds())
    with load_model(path) as m:
        assert m.rewrites["weight_decoding"] == 7
        assert "DequantizeLinear" not in {s.node.op_type for s in m.steps}
        got = m.run(_feeds())
    for name, want in zip(("g2", "up"), expected):
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-4)


def test_a_big_weight_never_exists_in_float32_whole(tmp_path, monkeypatch):
    """A 1.3 MB float32 (330 kB int8) MatMul weight with 64 kB blocks: the largest float32 piece of it
    ever made is one block, and no value the executor holds has the weight's shape."""
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 1)
    w = _weight(256, 1280)
    inits, dq = _quantized("w", w, 1)
    proto = model([dq, helper.make_node("MatMul", ["x", "w"], ["y"])], [value("x", [4, 256])],
                  [value("y", [4, 1280])], inits, opset=19)
    path = save(proto, tmp_path / "m.onnx", external=True)
    blocks = []
    original = weight_decoding.decode_block

    def recording(*args):
        block = original(*args)
        blocks.append(block.nbytes)
        return block

    monkeypatch.setattr(weight_decoding, "decode_block", recording)
    x = {"x": np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)}
    with load_model(path) as m:
        shapes = []
        m._executor.after_step = lambda i, env: shapes.extend(a.shape for a in env.values() if a.dtype == np.float32)
        got = m.run(x)["y"]
    assert len(blocks) == 20 and max(blocks) <= 64 << 10
    assert (256, 1280) not in shapes
    np.testing.assert_allclose(got, ReferenceEvaluator(proto).run(None, x)[0], rtol=1e-4, atol=1e-4)


def _fp16_model(extra_use: bool = False):
    """fp16 weights behind Cast(to=FLOAT) (frame model convert --weights fp16): an embedding Gather, a
    MatMul; with ``extra_use`` the MatMul weight is also added to something (so it must be widened)."""
    table = (RNG.standard_normal((100, 8))).astype(np.float16)
    w = _weight(8, 8).astype(np.float16)
    inits = [numpy_helper.from_array(table, "table_fp16"), numpy_helper.from_array(w, "w_fp16")]
    nodes = [helper.make_node("Cast", ["table_fp16"], ["table"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["w_fp16"], ["w"], to=TensorProto.FLOAT),
             helper.make_node("Gather", ["table", "ids"], ["e"]),
             helper.make_node("MatMul", ["e", "w"], ["y"])]
    outputs = [value("y", [1, 3, 8])]
    if extra_use:
        nodes.append(helper.make_node("Add", ["w", "w"], ["w2"]))
        outputs.append(value("w2", [8, 8]))
    return model(nodes, [value("ids", [1, 3], TensorProto.INT64)], outputs, inits)


@pytest.mark.parametrize("extra_use", [False, True])
def test_fp16_weights_are_handed_over_as_float16_only_when_every_use_widens_them(tmp_path, extra_use):
    proto = _fp16_model(extra_use)
    path = save(proto, tmp_path / "m.onnx", external=True)
    feeds = {"ids": np.array([[5, 99, 5]], np.int64)}
    with load_model(path) as m:
        fetched = {}
        get = m.provider.get
        m.provider.get = lambda ref: fetched.setdefault(ref.name, get(ref))
        got = m.run(feeds)
        gather = next(s for s in m.steps if s.node.op_type == "Gather")
        assert gather.gather_rows is not None and gather.gather_rows.name == "table_fp16"  # only 2 rows read
        assert m.rewrites["weight_decoding"] == (1 if extra_use else 2)
    assert "table_fp16" not in fetched
    if not extra_use:
        assert fetched["w_fp16"].dtype == np.float16
    want = ReferenceEvaluator(proto).run(None, feeds)
    for name, expected in zip([o.name for o in proto.graph.output], want):
        assert got[name].dtype == np.float32
        np.testing.assert_allclose(got[name], expected, rtol=1e-5, atol=1e-5)


def test_a_weight_that_is_not_an_initializer_is_left_alone(tmp_path):
    """DequantizeLinear of a graph input (activation QDQ) is not a stored weight: no fusion."""
    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["w"]), helper.make_node("MatMul", ["x", "w"], ["y"])]
    proto = model(nodes, [value("x", [2, 4]), value("q", [4, 3], TensorProto.INT8)], [value("y", [2, 3])],
                  [numpy_helper.from_array(np.array(0.5, np.float32), "s")], opset=19)
    feeds = {"x": np.ones((2, 4), np.float32), "q": np.arange(12, dtype=np.int8).reshape(4, 3)}
    with load_model(save(proto, tmp_path / "m.onnx")) as m:
        assert m.rewrites["weight_decoding"] == 0
        np.testing.assert_allclose(m.run(feeds)["y"], ReferenceEvaluator(proto).run(None, feeds)[0])


def test_onnx_reference_agrees_with_the_converted_fixture_pipeline_unet(tmp_path):
    """The real exported graph (tiny SD 1.5 UNet) converted to uint8 runs fused and matches onnxruntime
    without graph optimizations (which would quantize activations too)."""
    ort = pytest.importorskip("onnxruntime")
    from pathlib import Path

    from frame.convert.files import Options, convert

    src = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines" / "sdxl" / "model" / "unet" / "model.onnx"
    dst = tmp_path / "unet.onnx"
    convert(src, dst, Options("uint8"))
    rng = np.random.default_rng(0)
    inputs = {i.name: i for i in onnx.load(str(dst), load_external_data=False).graph.input}
    feeds = {"sample": rng.standard_normal((1, 4, 8, 8)).astype(np.float32), "timestep": np.array([10.0], np.float32),
             "encoder_hidden_states": rng.standard_normal((1, 77, inputs["encoder_hidden_states"].type.tensor_type
                                                           .shape.dim[2].dim_value)).astype(np.float32),
             "text_embeds": rng.standard_normal((1, inputs["text_embeds"].type.tensor_type.shape.dim[1].dim_value))
             .astype(np.float32),
             "time_ids": np.array([[64, 64, 0, 0, 64, 64]], np.float32)}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(str(dst), options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with load_model(str(dst)) as m:
        assert m.rewrites["weight_decoding"] > 50
        np.testing.assert_allclose(m.run(feeds)["out_sample"], want, rtol=1e-3, atol=1e-4)


def test_a_block_of_output_channels_runs_the_whole_convs_algorithm(tmp_path, monkeypatch):
    """8 -> 4 channels is no "narrow" conv (that needs 4x more input than output channels), but a
    block of one output channel looked like one: it padded its whole input (31 MB in the SDXL UNet)."""
    from frame.engine.ops import conv as conv_ops

    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 1)
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 8 * 9 * 4)  # one output channel per block
    narrow_calls = []
    original = conv_ops.narrow_conv2d
    monkeypatch.setattr(conv_ops, "narrow_conv2d", lambda *a, **k: narrow_calls.append(1) or original(*a, **k))
    w = _weight(4, 8, 3, 3)
    inits, dq = _quantized("w", w, 0, np.uint8)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    proto = model([dq, conv], [value("x", [1, 8, 10, 10])], [value("y", None)], inits, opset=19)
    path = save(proto, tmp_path / "m.onnx")
    x = RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)
    with load_model(path) as engine:
        got = engine.run({"x": x})["y"]
    assert not narrow_calls
    expected = ReferenceEvaluator(proto).run(None, {"x": x})[0]
    assert np.abs(got - expected).max() < 1e-4


@pytest.mark.parametrize("weights", ["nocache", "prefetch", "ram"])
def test_big_stored_weights_are_read_block_by_block(tmp_path, monkeypatch, weights):
    """Every decoded op whose output channels lead the weight (Conv, Gemm transB, UpsampleConv) reads its
    stored weight per block through the provider's row reads: same results, and no read of a whole
    row-streamed weight (the uint8/fp16 bytes of one block are all that is in memory)."""
    from frame.engine.providers import NoCache, Prefetch, Ram

    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 64)
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 1)
    monkeypatch.setattr(weight_decoding, "STREAM_ROWS_MIN_BYTES", 0)
    proto = _every_op_model()
    path = save(proto, tmp_path / "m.onnx", external=True)
    provider = {"nocache": NoCache, "prefetch": Prefetch, "ram": Ram}[weights]()
    whole, rows = [], []
    get, get_rows = provider.get, provider.get_rows
    monkeypatch.setattr(provider, "get", lambda ref: whole.append(ref.name) or get(ref))
    monkeypatch.setattr(provider, "get_rows", lambda ref, r: rows.append((ref.name, len(r))) or get_rows(ref, r))
    with load_model(path, weights=provider) as m:
        streamed = {s.weight_rows.name for s in m.steps if s.weight_rows is not None}
        got = m.run(_feeds())
    assert len(streamed) == 3  # the Conv, the Gemm with transB and the Resize -> Conv
    reads = [name for name, _ in rows]
    assert set(reads) == streamed and all(reads.count(name) > 1 for name in streamed)  # in blocks
    if weights != "ram":
        assert not streamed & set(whole)
    expected = ReferenceEvaluator(proto).run(None, _feeds())
    for name, want in zip(("g2", "up"), expected):
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-4)


def test_a_shared_run_reads_row_streamed_weights_for_every_item(tmp_path, monkeypatch):
    """Classifier-free guidance's shared run (``Model.run_shared``) on a model whose big decoded weights
    are read block by block: every item gets the weight's rows (it failed with "input ... is not
    available" on the full-size fp16/uint8 SD 1.5 UNet, whose weights are over 4 MB)."""
    monkeypatch.setattr(weight_decoding, "BLOCK_BYTES", 64)
    monkeypatch.setattr(weight_decoding, "MIN_BLOCK_CHANNELS", 1)
    monkeypatch.setattr(weight_decoding, "STREAM_ROWS_MIN_BYTES", 0)
    path = save(_every_op_model(), tmp_path / "m.onnx", external=True)
    rng = np.random.default_rng(11)
    other = {name: rng.standard_normal(value.shape).astype(np.float32) for name, value in _feeds().items()}
    from frame.engine.providers import Prefetch

    provider = Prefetch()
    rows = []
    get_rows = provider.get_rows
    monkeypatch.setattr(provider, "get_rows", lambda ref, r: rows.append(ref.name) or get_rows(ref, r))
    with load_model(path, weights=provider) as m:
        assert any(s.weight_rows is not None for s in m.steps)
        separate = [m.run(feeds) for feeds in (_feeds(), other)]
        reads_per_run = len(rows) // 2
        shared = m.run_shared([_feeds(), other])
    assert len(rows) - 2 * reads_per_run == reads_per_run  # each block read once for both items
    for got, want in zip(shared, separate):
        for name in ("g2", "up"):
            np.testing.assert_array_equal(got[name], want[name])


def test_a_shared_run_decodes_each_weight_once_for_all_items(tmp_path, monkeypatch):
    """A weight fetched whole (under STREAM_ROWS_MIN_BYTES: most of a text encoder's) is decoded once
    per shared run, not once per item (the taste picker's pass of ten texts decoded the OpenCLIP
    encoder's 8-bit weights ten times); every item's output is still bit-identical to its own run."""
    path = save(_every_op_model(), tmp_path / "m.onnx", external=True)
    rng = np.random.default_rng(11)
    feeds = [_feeds()] + [{name: rng.standard_normal(v.shape).astype(np.float32) for name, v in _feeds().items()}
                          for _ in range(2)]
    decoded = []
    stored_block = weight_decoding._stored_block
    monkeypatch.setattr(weight_decoding, "_stored_block", lambda q, *a: decoded.append(q.shape) or stored_block(q, *a))
    with load_model(path) as m:
        assert all(s.weight_rows is None for s in m.steps)
        separate = [m.run(f) for f in feeds]
        per_run = len(decoded) // 3
        shared = m.run_shared(feeds)
    assert per_run > 0 and len(decoded) - 3 * per_run == per_run  # once for three items
    for got, want in zip(shared, separate):
        for name in ("g2", "up"):
            assert got[name].tobytes() == want[name].tobytes()


@pytest.mark.parametrize("storage", ["fp16", "uint8"])
def test_a_shared_run_decodes_a_norm_convs_weight_once_though_its_group_norm_differs(tmp_path, monkeypatch,
                                                                                     storage):
    """GroupNorm -> SiLU -> Conv runs as one NormConv whose GroupNorm table is computed per item, so the
    items of a guided step never had the same operands: each decoded the conv's weight for itself (the
    SD 1.5 UNet's 1280-channel convs at 8x8 took 1.94x one item's time for two). The stored weight is
    the same, so it is decoded once; each item's output is still bit-identical to its own run."""
    from frame.estimate.probes import norm_conv_probe
    from frame.estimate.signature import Signature

    attrs = (("act", True), ("dilations", (1, 1)), ("group", 1), ("pads", (1, 1, 1, 1)), ("strides", (1, 1)))
    rng = np.random.default_rng(5)
    proto, feeds = norm_conv_probe(Signature("norm_conv", ((1, 64, 8, 8), (96, 64, 3, 3)), attrs, storage),
                                   10**9, rng)
    path = save(proto, tmp_path / "m.onnx", external=True)
    items = [feeds, {"x": (rng.standard_normal(feeds["x"].shape) * 3 + 1).astype(np.float32)}]
    decoded = []
    stored_block = weight_decoding._stored_block
    monkeypatch.setattr(weight_decoding, "_stored_block", lambda q, *a: decoded.append(q.shape) or stored_block(q, *a))
    with load_model(path) as m:
        assert any(s.node.name.endswith("norm_conv/decoded_weight") for s in m.steps)
        separate = [m.run(f) for f in items]
        per_run = len(decoded) // 2
        shared = m.run_shared(items)
    assert per_run > 0 and len(decoded) - 2 * per_run == per_run  # once for both items
    for got, want in zip(shared, separate):
        assert got["y"].tobytes() == want["y"].tobytes()
